"""The run's memory, planned before any weight loads (``normvar plan``), and the limits ``compute``
keeps to (which measures it holds or drops), both from the same figures.

Peak bytes of a run on the CPU (every term in bytes, each computed in ``memory.terms.py``; docs/scale.md,
"The memory formulas"):

    total = runtime + plan + weights + max(pass + loop, publish) + Σ_e held(e)
            + max(Σ_a planned_bytes(a), Σ_e running(e))
    loop = view + Σ_a update_held(a) + max_a (update_bytes(a) − update_held(a))
    publish = writer + Σ_a publish_bytes(a)

* runtime  the interpreter with torch, transformers, numba, DuckDB (``RUNTIME_BYTES``, measured); plan: the
           kept sentences and their flat encoding (measured on the built plan); weights: parameters and buffers
           at the forward dtype (the base model ``AutoModel`` loads, no LM head);
* Σ_a      each measure's ``planned_bytes(ctx)`` (``pipeline/measures/base.py``): the arrays of its ``planned_state``;
* pass     one forward pass of the largest padded batch; with the loop below, pass + loop on a GPU and
           pass + max(pass, loop) on the CPU, whose heap keeps a batch's freed pages for the next (``terms.pass_work``)
           (P = rows x width tokens, N ≤ P counted, H hidden states, L kept, e bytes of the dtype, f the MLP width, h
           heads): H·P·d·e (the returned hidden states) + P·(f + 4d)·e + rows·h·width²·e (one block's work)
           + L·N·d·e (the kept positions);
* loop     the kept measures' update of that batch (``memory.terms.loop_total``): one layer's shared view
           (``LayerView.view_bytes``: 8·N·d + 8·d², split 12·N·d + 24·d²) and each measure's ``update_bytes(ctx, N,
           rows)``, of which ``update_held`` stays while the others update (the measures run one after another);
* publish  after the pass, beside the state: each kept measure's ``publish_bytes(ctx)`` (its result and tables'
           work — the moments' copy of the means L·T·d·b_μ, the geometry's covariances and its per-layer TwoNN
           work, ...: every result is kept until the file is written) and the writer's (``writer_bytes``: DuckDB's
           bounded buffer pool and one insert's Arrow parts);
* Σ_e      over the kept measures that declare an early pass (``Measure.early_pass``), its ``planned`` bytes:
           ``running`` before the measures are built (the occurrences': each kept layer's running float64
           scatter, 8·L·d·(d + 2)), so the larger of Σ_e running and Σ_a counts; ``held``: what it leaves the source
           for the pass, held until the pass reaches it (the occurrences': the early batches' states on a CPU
           source, L·N·d·4 up to ``REUSE_BYTES``, with their layer views' Gram products). Both are 0 when the run
           keeps no such measure. The plan's ``early_pass`` adds them up (``scatter_bytes`` = Σ_e running).

On a GPU the device holds weights + Σ_a + pass (the runtime, the plan and the publish work live in host memory
and are not counted against the GPU). What does not fit is dropped in registry order among the measures
that may be dropped (their class's ``may_drop``), each with a one-line reason naming the fix (``notes.skipped``); when
even the rest does not fit, the plan says so (``fits`` false) and suggests ``--mean-dtype float32``, the
``fix`` of each measure forced on (``--self-similarity off``) and a ``--layers`` subset.
The model's shape comes from ``model_shape.py``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from normvar_core import constants
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures import MEASURES
from normvar_core.pipeline.memory.terms import (
    RUNTIME_BYTES,
    GiB,
    device_memory,
    largest_batch,
    loaded_budget,
    loop_parts,
    loop_total,
    pass_bytes,
    pass_work,
    plan_bytes,
    publish_of,
    publish_sum,
    rows_that_fit,
    weights_bytes,
    writer_bytes,
)
from normvar_core.pipeline.model_shape import ModelShape


# ----------------------------------------------------------------------------- the plan
@dataclass
class MemoryPlan:
    """The figures of ``normvar plan --json`` and the decisions ``compute`` follows."""

    params: int
    params_with_lm_head: int
    weights_bytes: int
    hidden_states: int
    dim: int
    types: int
    layers: list[int]
    device: str
    dtype: str
    measures: dict[str, int]  # every measure the run asks for: its planned bytes
    runtime_bytes: int
    plan_bytes: int
    pass_bytes: int
    publish_bytes: int
    total_bytes: int  # what the run holds at its peak, after the drops
    memory_bytes: int
    fits: bool
    dropped: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    policy: dict[str, str] = field(default_factory=dict)  # {measure: its class's policy}: may it drop, why
    terms: dict[str, list[str]] = field(default_factory=dict)  # {measure: its planned state, array by array}
    suggestions: list[str] = field(default_factory=list)
    model: str = ""
    architecture: str = ""
    unknown: list[str] = field(default_factory=list)  # measures that do not declare their planned state
    sample_positions: int = 0  # P: positions picked for the PCA clouds / explorer
    id_sample: int = 0  # K: the uniform TwoNN sample (constants.id_sample_size: min(|X|, --id-sample))
    embeddings: int = 0  # n: counted positions per layer
    early_pass: dict = field(default_factory=dict)  # the kept measures' early passes, added up (``early_of``)
    early_parts: dict = field(default_factory=dict)  # {measure: its early pass's planned bytes} (``early_parts``)
    checkpoint_bytes: int = 0  # the checkpoint on disk: the kept measures' state (.npz)
    host: dict = field(default_factory=dict)  # plan --devices: the host's bytes while the devices run and at publish
    shape_note: str = ""  # where the model's shape came from, when not the model's own files
    devices: list = field(default_factory=list)  # plan --devices: one row per device (memory/per_device.py)
    device_map: dict = field(default_factory=dict)  # plan --devices: {module: device} as accelerate places it
    batch: list = field(default_factory=list)  # plan --devices: (rows, width, tokens) of the largest batch
    publish: dict = field(default_factory=dict)  # publish_bytes by part: each kept measure's and the "writer"
    batch_note: str = ""  # plan --devices: the batch size chosen to fit each device, in words (``dry_run``)

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)

    def kept(self, name: str) -> bool:
        return name not in self.dropped

    def summary(self) -> str:
        """ "needs 31.2 GiB of 80.0 GiB"."""
        return f"needs {gb(self.total_bytes)} of {gb(self.memory_bytes)}"

    def lines(self) -> list[str]:
        """The plan as text (``normvar plan``)."""
        out = [
            f"model {self.model} ({self.architecture}): {self.params:,} parameters "
            f"({self.params_with_lm_head:,} with a vocab x d LM head), {self.hidden_states} hidden states x "
            f"{self.dim} d; corpus: {self.types:,} types; {len(self.layers)} layers kept; {self.device}, {self.dtype}",
            *([f"  {self.shape_note}"] if self.shape_note else []),
            f"  {'weights':<10} {gb(self.weights_bytes):>10}",
        ]
        for name, b in self.measures.items():  # each row with the arrays of its planned state
            tag = "  (dropped)" if name in self.dropped else ""
            out.append(f"  {name:<10} {gb(b):>10}{tag}   " + ", ".join(self.terms.get(name, ())))
        host = self.device != "cuda"
        if host:
            out.append(f"  {'runtime':<10} {gb(self.runtime_bytes):>10}")
            out.append(f"  {'plan':<10} {gb(self.plan_bytes):>10}")
        kept = "; with the pages the heap keeps for the next" if host else ""
        out.append(
            f"  {'pass':<10} {gb(self.pass_bytes):>10}   (one forward of the largest batch{kept}, and the measures' "
            "update of it)"
        )
        if self.early_pass.get("bytes"):  # the early passes of the kept measures only
            e = self.early_pass
            out.append(
                f"  {'early pass':<10} {gb(e['bytes']):>10}   (early passes over {e['positions']:,} "
                f"positions in {e['batches']} batches: running state {gb(e['scatter_bytes'])} before the "
                f"measures (the larger counts), states kept for the pass {gb(e['held_bytes'])})"
            )
        if host:
            out.append(
                f"  {'publish':<10} {gb(self.publish_bytes):>10}   (the results and the run file's write "
                f"beside the state; the larger of pass and publish counts)"
            )
        out.append(
            f"  {'total':<10} {gb(self.total_bytes):>10}   {self.summary()}: "
            + ("fits" if self.fits else "does NOT fit")
        )
        every = checkpoint_every(self.checkpoint_bytes)
        out.append(
            f"  {'checkpoint':<10} {gb(self.checkpoint_bytes):>10}   (on disk, rewritten every {every_text(every)} "
            f"while the run lasts, so its writes take ≤ {constants.CHECKPOINT_COST_SHARE:.0%} of the run at "
            f"{constants.DISK_WRITE_BYTES_PER_S / 1e6:.0f} MB/s: the kept measures' state; --no-checkpoint keeps none)"
        )
        if self.batch_note:
            out.append(f"  {'batch':<10} {self.batch_note}")
        for r in self.devices:  # plan --devices
            limit = "no limit" if r["limit_bytes"] is None else gb(r["limit_bytes"])
            out.append(
                f"  {r['device']:<10} {gb(r['bytes']):>10}   of {limit}: weights {gb(r['weights_bytes'])}, "
                f"state {gb(r['state_bytes'])} (layers {layer_span(r['layers'])}), "
                + (f"early pass {gb(r['early_bytes'])}, " if r.get("early_bytes") else "")
                + f"pass {gb(r['pass_bytes'])}"
                + (f", host {gb(r['host_bytes'])}" if r["host_bytes"] else "")
                + ("" if r["fits"] else "  — does NOT fit")
            )
        if self.host:  # plan --devices: what the host holds beside the devices, always
            h = self.host
            out.append(
                f"  {'host':<10} {gb(h['bytes']):>10}   at its peak ({h['limit']}): {gb(h['running_bytes'])} while "
                f"the devices run (runtime {gb(h['runtime_bytes'])}, plan {gb(h['plan_bytes'])}"
                + (f", offloaded state {gb(h['offloaded_bytes'])}" if h["offloaded_bytes"] else "")
                + f"), {gb(h['publish_bytes'])} at publish (the state gathered {gb(h['gathered_bytes'])}, "
                f"results and write {gb(h['work_bytes'])})" + ("" if h["fits"] is not False else "  — does NOT fit")
            )
        out += [f"  dropped: {self.reasons[n]}" for n in self.dropped]
        out += [f"  fix: {s}" for s in self.suggestions]
        out += [f"  note: measure {n} does not declare planned_state: not counted" for n in self.unknown]
        return out


def checkpoint_every(state_bytes: int) -> float:
    """Seconds between periodic checkpoints of ``state_bytes``, as ``execute.checkpoint.Checkpointer`` spaces them:
    max(CHECKPOINT_EVERY_S, t_save / CHECKPOINT_COST_SHARE), t_save = bytes / DISK_WRITE_BYTES_PER_S."""
    save_s = state_bytes / constants.DISK_WRITE_BYTES_PER_S
    return max(constants.CHECKPOINT_EVERY_S, save_s / constants.CHECKPOINT_COST_SHARE)


def every_text(seconds: float) -> str:
    """ "60 s", "12 min", "3.3 h"."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def layer_span(layers: list[int]) -> str:
    """ "0-11" for a run of layers, "6" for one, "none" for none (``normvar plan --devices``)."""
    return f"{layers[0]}-{layers[-1]}" if len(layers) > 1 else ",".join(map(str, layers)) or "none"


def gb(n: float) -> str:
    """Bytes in GiB (2³⁰ bytes), labelled so: an 80 GB device (80·10⁹ bytes, as sold) prints as 74.5 GiB."""
    return f"{n / GiB:.1f} GiB"


def sizes_and_droppable(ctx, registry) -> tuple[dict[str, int], list, list[str]]:
    """({name: bytes} of every measure the run asks for, [droppable classes in order], [unknown])."""
    sizes, optional, unknown = {}, [], []
    for cls in registry:
        b = cls.planned_bytes(ctx)
        if b is None:
            unknown.append(cls.name)
            continue
        b = int(b)
        if b > 0:
            sizes[cls.name] = b
            if cls.droppable(ctx):
                optional.append(cls)
    return sizes, optional, unknown


def early_parts(ctx, registry, device: str | None = None) -> dict[str, dict]:
    """{name: its early pass's ``planned`` bytes} of every measure of ``registry`` the run asks for that declares
    one (``Measure.early_pass``)."""
    if ctx.plan is None:
        return {}
    return {
        c.name: c.early_pass.planned(ctx, device=device)
        for c in registry
        if c.early_pass is not None and c.asked(ctx.cfg)
    }


def early_of(parts: dict[str, dict], drop=(), device: str | None = None) -> dict:
    """The early passes of ``parts`` not in ``drop``, added up: ``scatter_bytes`` = Σ running, ``held_bytes``,
    ``bytes`` = both, ``host_bytes`` (the held ones on the CPU), ``positions``, ``batches``."""
    kept = {n: p for n, p in parts.items() if n not in drop}
    total = {k: sum(int(p[k]) for p in kept.values()) for k in ("running_bytes", "held_bytes", "positions", "batches")}
    held = total["held_bytes"]
    return {
        "bytes": total["running_bytes"] + held,
        "scatter_bytes": total["running_bytes"],
        "held_bytes": held,
        "host_bytes": held if device == "cpu" else 0,
        "positions": total["positions"],
        "batches": total["batches"],
    }


def work_of(base: dict, drop=()) -> int:
    """The pass and the update of the measures not in ``drop`` (``terms.pass_work``)."""
    return pass_work(base["pass"], loop_total(base["loop"], drop), base["device"] == "cpu")


def publish_total(base: dict, drop=()) -> int:
    """The module docstring's publish for the measures not in ``drop`` (0 on a GPU: host memory)."""
    return publish_sum(base["publish_of"], drop) if base["device"] == "cpu" else 0


def peak(base: dict, sizes: dict[str, int], early: dict[str, dict], drop=()) -> int:
    """The module docstring's total for the measures of ``sizes`` not in ``drop`` (an early pass, of ``early`` =
    ``early_parts``, counts while its measure is kept)."""
    state = sum(b for n, b in sizes.items() if n not in drop)
    e = early_of({n: p for n, p in early.items() if n in sizes}, drop)
    return (
        base["host"]
        + base["weights"]
        + max(work_of(base, drop), publish_total(base, drop))
        + e["held_bytes"]
        + max(state, e["scatter_bytes"])
    )


def _total(ctx, registry, base: dict, drop=()) -> int:
    sizes, _, _ = sizes_and_droppable(ctx, registry)
    return peak(base, sizes, early_parts(ctx, registry, base.get("device")), drop)


def evenly_spaced(layers: list[int], k: int) -> list[int]:
    """``k`` of ``layers``, evenly spaced, first and last included."""
    if k >= len(layers):
        return list(layers)
    return sorted({layers[int(round(i))] for i in np.linspace(0, len(layers) - 1, max(int(k), 1))})


def plan_memory(
    ctx,
    *,
    shape: ModelShape,
    memory_bytes: int,
    device: str,
    dtype: str,
    registry=MEASURES,
    plan_held: int | None = None,
    forced_keep: set[str] | None = None,
) -> MemoryPlan:
    """Size every measure the run asks for, add the weights, the pass and (on the CPU) the runtime,
    the plan and the publish copy; drop what does not fit in ``memory_bytes`` (see the module docstring).
    ``forced_keep``: names kept whatever the memory (a resumed checkpoint holds them)."""
    host = device != "cuda"
    wbytes = weights_bytes(shape, dtype)
    plans: dict[int, tuple] = {}  # id(plan) -> (plan, its plan_bytes): every layer subset tried shares the run's plan

    def plan_held_by(p) -> int:
        if plan_held is not None:
            return plan_held
        if id(p) not in plans or plans[id(p)][0] is not p:
            plans[id(p)] = (p, plan_bytes(p))
        return plans[id(p)][1]

    def base_for(c) -> dict:
        return {
            "host": (RUNTIME_BYTES + plan_held_by(c.plan)) if host else 0,
            "weights": wbytes,
            "pass": pass_bytes(shape, c.plan, c.num_layers, dtype),
            "loop": loop_parts(c, registry),
            "publish_of": publish_of(c, registry),
            "device": "cpu" if host else device,
        }

    base = base_for(ctx)
    sizes, optional, unknown = sizes_and_droppable(ctx, registry)
    droppable = {cls.name for cls in optional} - set(forced_keep or ())
    fixed = (
        base["host"]
        + base["weights"]
        + max(work_of(base, droppable), publish_total(base))
        + sum(b for n, b in sizes.items() if n not in droppable)
    )
    free = memory_bytes - fixed
    dropped, reasons = [], {}

    def sub_ctx(k: int):
        return RunContext(
            cfg=ctx.cfg,
            layers=evenly_spaced(list(ctx.layers), k),
            dim=ctx.dim,
            device=ctx.device,
            plan=ctx.plan,
            tokens=ctx.tokens,
        )

    def largest_fit(drop: set[str]) -> list[int] | None:
        """The largest evenly spaced subset of the kept layers whose whole run (without ``drop``) fits."""
        for k in range(len(ctx.layers), 0, -1):
            c = sub_ctx(k)
            if _total(c, registry, base_for(c), drop) <= memory_bytes:
                return list(c.layers)
        return None

    taken: set[str] = set()  # the droppable measures kept so far (their update counts in the loop from then on)
    short: dict[str, tuple[int, int]] = {}  # a measure dropped for its memory: (its need, what was left)
    for cls in optional:
        if cls.name not in droppable:
            continue
        gone = [u for u in cls.requires if u in dropped]
        if gone:  # nothing to compute without it
            dropped.append(cls.name)
            reasons[cls.name] = f"{cls.name} skipped: it needs the {gone[0]} measure's state, which is skipped (above)"
            continue
        without, publish_all = droppable - taken, publish_total(base)
        loop_more = max(work_of(base, without - {cls.name}), publish_all) - max(work_of(base, without), publish_all)
        need = sizes[cls.name] + loop_more
        if need <= free:
            free -= need
            taken.add(cls.name)
            continue
        dropped.append(cls.name)
        short[cls.name] = (need, max(free, 0))
    for cls in optional:  # the layers at which the run would keep it beside all it keeps now
        if cls.name in short:
            subset = largest_fit(set(dropped) - {cls.name})
            need, left = short[cls.name]
            reasons[cls.name] = cls.drop_reason(ctx, need=need, free=left, subset=subset)
    early = early_parts(ctx, registry, base["device"])
    total = _drop_early_passes(ctx, registry, base, sizes, early, dropped, reasons, droppable, memory_bytes)
    fits = total <= memory_bytes
    suggestions = []
    if not fits:
        suggestions = _suggestions(ctx, registry, base_for, memory_bytes, total, set(dropped), device, dtype, sub_ctx)
    publish = publish_total(base, dropped)
    if dropped or not fits:  # smaller batches: room for everything asked for, else for what is kept
        for label, drop in (("keeps everything asked for", ()), ("fits", dropped)):
            room = memory_bytes - peak(base, sizes, early, drop) + max(work_of(base, drop), publish_total(base, drop))
            rows = rows_that_fit(ctx, shape, dtype, room, publish_total(base, drop), host, registry, drop)
            if rows and rows < largest_batch(ctx.plan.batches)[0]:
                suggestions.insert(
                    0,
                    f"--batch-size {rows} {label} (the forward pass of the largest batch and the measures' update "
                    f"now need {gb(work_of(base, drop))})",
                )
                break
    tc = ctx.plan.token_ids.size if ctx.plan is not None else 0
    return MemoryPlan(
        params=shape.params,
        params_with_lm_head=shape.params + shape.lm_head_params,
        weights_bytes=wbytes,
        hidden_states=shape.num_hidden_states,
        dim=shape.dim,
        types=int(tc),
        layers=list(ctx.layers),
        device=device,
        dtype=dtype,
        measures=sizes,
        runtime_bytes=RUNTIME_BYTES if host else 0,
        plan_bytes=base["host"] - (RUNTIME_BYTES if host else 0),
        pass_bytes=work_of(base, dropped),
        publish_bytes=publish,
        total_bytes=int(total),
        memory_bytes=int(memory_bytes),
        fits=bool(fits),
        dropped=dropped,
        reasons=reasons,
        policy={c.name: c.policy for c in registry if c.name in sizes},
        terms={c.name: c.planned_terms(ctx) for c in registry if c.name in sizes},
        suggestions=suggestions,
        model=shape.name,
        architecture=shape.architecture,
        unknown=unknown,
        sample_positions=int(ctx.plan.samples.size),
        id_sample=int(ctx.plan.uniform.size) if ctx.plan.uniform is not None else 0,
        embeddings=int(ctx.plan.total_embeddings),
        early_pass=early_of({n: p for n, p in early.items() if n in sizes}, dropped, base["device"]),
        early_parts={n: p for n, p in early.items() if n in sizes},
        checkpoint_bytes=sum(b for n, b in sizes.items() if n not in dropped),
        publish={**{n: b for n, b in base["publish_of"].items() if n not in dropped}, "writer": writer_bytes()}
        if host
        else {},
    )


def _drop_early_passes(ctx, registry, base, sizes, early, dropped, reasons, droppable, memory_bytes) -> int:
    """The run's peak; while it does not fit, a droppable measure with an early pass (registry order) whose drop
    alone makes it fit is dropped (``dropped`` and ``reasons`` updated in place); the new peak returned."""
    total = peak(base, sizes, early, dropped)
    for cls in registry:
        name = cls.name
        if total <= memory_bytes or name not in early or name not in droppable or name not in sizes or name in dropped:
            continue
        if peak(base, sizes, early, [*dropped, name]) <= memory_bytes:  # its early pass is what does not fit
            dropped.append(name)
            need = sizes[name] + early_of({name: early[name]})["bytes"]
            reasons[name] = cls.drop_reason(
                ctx, need=need, free=max(memory_bytes - peak(base, sizes, early, dropped), 0), subset=None
            )
            total = peak(base, sizes, early, dropped)
    return total


def _suggestions(ctx, registry, base_for, memory, total, dropped, device, dtype, sub_ctx) -> list[str]:
    out = []
    cfg = ctx.cfg
    if cfg.mean_dtype == "float64":
        c32 = type(ctx)(
            cfg=cfg.replace(mean_dtype="float32"),
            layers=ctx.layers,
            dim=ctx.dim,
            device=ctx.device,
            plan=ctx.plan,
            tokens=ctx.tokens,
        )
        t32 = _total(c32, registry, base_for(c32), dropped)
        out.append(
            f"--mean-dtype float32 halves the means: {gb(t32)} in all" + ("" if t32 <= memory else " (still over)")
        )
    # a measure forced on (asked, not droppable as asked) whose class says how to leave it out
    out += [c.fix for c in registry if c.fix and c.asked(cfg) and not c.may_drop(cfg)]
    if device == "cuda" and dtype == "float32":
        out.append("--dtype bfloat16 halves the weights and the pass")
    for k in range(len(ctx.layers) - 1, 0, -1):
        c = sub_ctx(k)
        if _total(c, registry, base_for(c), dropped) <= memory:
            out.append(f"keep {k} of the {len(ctx.layers)} layers: --layers {','.join(map(str, c.layers))}")
            break
    else:
        weights = base_for(ctx)["weights"]
        out.append(
            f"the weights alone ({gb(weights)}) do not fit in {gb(memory)}: spread the model over several "
            f"devices (--device-map auto; normvar plan --devices 8x80 shows each device) or a larger device"
            if weights >= memory
            else f"even one layer needs more than {gb(memory)}: a larger device, or lower --batch-size / --max-length"
        )
    return out


# ----------------------------------------------------------------------------- the run's budget
def run_budget(
    cfg,
    ctx,
    *,
    shape: ModelShape,
    device: str,
    dtype: str,
    loaded: bool = True,
    resume_names: set[str] | None = None,
    measured: int | None = None,
) -> MemoryPlan:
    """The plan ``compute`` follows: ``--memory-gb`` if given, else what the device reports free now
    plus what this process already holds there (``loaded``: the weights and the plan are resident).
    ``resume_names``: the checkpoint's measures, held exactly. ``measured``: that figure from a Ray actor."""
    memory = (
        int(round(float(cfg.memory_gb) * GiB))
        if cfg.memory_gb is not None
        else int(measured)
        if measured is not None
        else loaded_budget(device)
        if loaded
        else device_memory(device)
    )
    mp = plan_memory(ctx, shape=shape, memory_bytes=memory, device=device, dtype=dtype, forced_keep=resume_names)
    if resume_names is not None:
        for name in [c.name for c in MEASURES if c.droppable(ctx) and c.name in mp.measures]:
            if name not in resume_names and name not in mp.dropped:
                mp.dropped.append(name)
                mp.reasons[name] = (
                    f"{name} skipped: the checkpoint this run resumed from was computed without it "
                    f"(memory) — compute again without --checkpoint to have it"
                )
    return mp


def with_devices(mp: MemoryPlan, per: dict) -> MemoryPlan:
    """The plan with the per-device rows, drops and verdict of ``memory.per_device.plan_placed``; what it counts
    follows the devices' drops (the early passes, the checkpoint), and the host's figures are its row's."""
    host = per["host"]
    return dataclasses.replace(
        mp,
        devices=per["devices"],
        device_map=per["device_map"],
        fits=per["fits"],
        dropped=per["dropped"],
        reasons=per["reasons"],
        suggestions=per["suggestions"],
        total_bytes=sum(r["bytes"] for r in per["devices"]),
        batch=per["batch"],
        early_pass=early_of(mp.early_parts, per["dropped"], "cuda"),
        checkpoint_bytes=sum(b for n, b in mp.measures.items() if n not in per["dropped"]),
        host=host,
        runtime_bytes=host["runtime_bytes"],
        plan_bytes=host["plan_bytes"],
        publish_bytes=host["work_bytes"],
        publish=host["publish"],
    )


__all__ = [
    "MemoryPlan",
    "plan_memory",
    "run_budget",
    "with_devices",
    "sizes_and_droppable",
    "layer_span",
    "evenly_spaced",
    "gb",
    "checkpoint_every",
]
