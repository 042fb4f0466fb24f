"""The plan per device (``normvar plan --devices 8x80``): a device-mapped run's bytes on each device.

The model is built from its config on the meta device (no weights) at the run's dtype and placed as
transformers places it for ``--device-map`` (``auto``/``balanced``: accelerate's balanced memory, then
``infer_auto_device_map``; ``sequential``; ``balanced_low_0``; or the JSON file's map) within the devices'
limits. Then, per device k (docs/scale.md, "Per-device plans"):

    weights_k = the bytes of the modules placed on k (parameters x e + buffers)
    state_k   = Σ_a planned_bytes(a) for the L_k kept hidden states produced on k (each device-map entry holds
                its layers' measures: ``layer_groups.py``; offloaded entries, "cpu" and "disk", on the CPU)
    pass_k    = H_k·P·d·e (the hidden states k produces) + [k runs a block] (P·(f + 4d)·e + rows·h·width²·e)
                + [L_k > 0] (L_k·N·d·e + loop_k)       (offloaded entries: the first two terms on the first GPU,
                                                        where accelerate runs them; the last on the CPU)
                loop_k = the measures' update of the L_k layers (``memory.terms.loop_total``; the largest of the
                         entries kept on k: they update one after another)
    early_k   = Σ_e running(e) over the kept measures with an early pass, for the L_k layers (its ``planned``
                ``running_bytes`` on the device that keeps the layers, freed before the measures are built; the
                occurrences': each layer's running float64 scatter, 8·L_k·d·(d + 2))
    bytes_k   = weights_k + max(state_k, early_k) + pass_k   (the CPU row: + runtime + plan + the gathered state
                                                              + publish)

and a device fits when bytes_k <= limit_k (weights on "disk" fit only with --offload-folder). What does not fit
drops the droppable measures (the last in the registry first, then takes back each that fits again, the earliest
first: the earlier measures are kept, as on one device), each reason naming the device; the suggestions are per device.
``memory.with_devices`` puts these rows, drops and verdict into the run's ``MemoryPlan``.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normvar_core.device_options import read_device_map
from normvar_core.pipeline.measures import MEASURES
from normvar_core.pipeline.memory.plan import early_parts, gb, layer_span, sizes_and_droppable
from normvar_core.pipeline.memory.terms import (
    DTYPE_BYTES,
    RUNTIME_BYTES,
    largest_batch,
    loop_parts,
    loop_total,
    plan_bytes,
    publish_of,
    publish_sum,
    writer_bytes,
)
from normvar_core.pipeline.models.device_map import check_map_modules, device_name, entry_of, meta_model
from normvar_core.pipeline.models.meta_facts import kept_facts, whole
from normvar_core.pipeline.models.probe import blocks, is_norm, producers


@contextmanager
def _quiet():
    """accelerate warns once per GPU index that this machine lacks (a plan is made for other machines)."""
    log = logging.getLogger("accelerate.utils.modeling")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def placed_map(model, strategy: str | None, devices: dict) -> dict[str, str]:
    """{module: "cuda:k" | "cpu" | "disk"} as transformers would place ``model`` for ``--device-map strategy``
    within ``devices`` (accelerate's max_memory)."""
    from transformers.integrations.accelerate import _get_device_map

    chosen = read_device_map(strategy or "auto")
    check_map_modules(chosen, model, str(strategy))
    with _quiet():
        dmap = chosen if isinstance(chosen, dict) else _get_device_map(model, chosen, dict(devices), None)
    return {k: device_name(v) for k, v in dmap.items()}


def module_bytes(model, dmap: dict[str, str]) -> dict[str, int]:
    """Bytes of parameters and buffers per device of ``dmap``."""
    out = {d: 0 for d in dmap.values()}
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        out[entry_of(dmap, name)] += t.numel() * t.element_size()
    return out


def hidden_state_devices(model, dmap: dict[str, str], num_hidden_states: int) -> list[str]:
    """The map entry that produces each hidden state: the embeddings, block i-1, the final norm for the last."""
    names = producers(model, num_hidden_states, None)
    stack = {id(b) for b in blocks(model)}  # walked once, not once per module
    inside = {n for n, m in model.named_modules() if id(m) in stack}
    final = [n for n, m in model.named_modules() if n and "." not in n and is_norm(m) and n not in inside]
    if final:
        names[-1] = final[-1]
    return [entry_of(dmap, n) for n in names]


def block_devices(model, dmap: dict[str, str]) -> list[str]:
    """The map entry of every transformer block, in order."""
    names = {id(m): n for n, m in model.named_modules()}
    return [entry_of(dmap, names[id(b)]) for b in blocks(model)]


@dataclass(frozen=True)
class Placed:
    """What ``device_rows`` reads of a model placed by ``device_map`` (``placement``), without the model: the map
    entry producing each hidden state, each entry's weight bytes, the entries that run a block."""

    device_map: dict[str, str]
    produced: list[str]
    weights: dict[str, int]
    blocks_on: list[str]


def placed_model(config, dtype: str, trust_remote_code: bool, strategy, devices: dict, num_hidden_states: int, *,
                 cache: Path | None = None) -> Placed:  # fmt: skip
    """The model of ``config`` at ``dtype``, built on the meta device and placed for ``--device-map strategy``
    over ``devices`` (``placed_map``), as ``Placed``; ``cache``: a folder where these facts are kept and read back
    (``models.meta_facts``: the same map and figures, no model built)."""
    inputs = {
        "dtype": dtype,
        "strategy": read_device_map(strategy or "auto"),
        "devices": [[k, int(v)] for k, v in devices.items()],  # accelerate's max_memory, its keys as they are
        "num_hidden_states": int(num_hidden_states),
    }

    def build() -> dict:  # from a copy: a build sets fields of its config (the key is the config as read)
        model = meta_model(copy.deepcopy(config), dtype, trust_remote_code)
        dmap = placed_map(model, strategy, devices)
        produced, weights, blocks_on = placement(model, dmap, num_hidden_states)
        return {"device_map": dmap, "produced": produced, "weights": weights, "blocks_on": sorted(blocks_on)}

    facts = kept_facts(cache, "placement", config, trust_remote_code, inputs, _placed_facts(num_hidden_states), build)
    return Placed(**facts)


def _placed_facts(num_hidden_states: int):
    """Whether a "placement" entry read back has the fields and types ``placed_model`` gives, for this depth."""

    def check(facts: dict) -> bool:
        dmap, produced, weights, blocks_on = (facts[k] for k in ("device_map", "produced", "weights", "blocks_on"))
        if not (isinstance(dmap, dict) and dmap and isinstance(weights, dict)):
            return False
        entries = set(dmap.values())
        return (
            len(facts) == 4
            and all(isinstance(v, str) for v in dmap.values())
            and isinstance(produced, list)
            and len(produced) == num_hidden_states
            and set(produced) <= entries
            and set(weights) == entries
            and all(whole(b) for b in weights.values())
            and isinstance(blocks_on, list)
            and set(blocks_on) <= entries
        )

    return check


_PLACEMENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def placement(model, dmap: dict[str, str], num_hidden_states: int) -> tuple[list[str], dict[str, int], set[str]]:
    """(``hidden_state_devices``, ``module_bytes``, the set of ``block_devices``) of ``model`` placed by ``dmap``:
    walked once per model and map, then kept while the model lives (``plan --devices`` asks for them once per
    measure dropped and batch size tried; the walk over a 60-block model's modules is what took the time). A
    ``Placed`` (``placed_model``) stands for its model: its own figures (for its own map)."""
    if isinstance(model, Placed):
        if model.device_map != dmap or len(model.produced) != num_hidden_states:
            raise ValueError("a Placed model is read with its own device map and depth")
        return list(model.produced), dict(model.weights), set(model.blocks_on)
    key = (tuple(dmap.items()), int(num_hidden_states))
    try:
        kept = _PLACEMENTS.setdefault(model, {})
    except TypeError:  # not weak-referenceable: walked every time
        kept = {}
    if key not in kept:
        kept[key] = (
            hidden_state_devices(model, dmap, num_hidden_states),
            module_bytes(model, dmap),
            set(block_devices(model, dmap)),
        )
    produced, weights, blocks_on = kept[key]
    return list(produced), dict(weights), set(blocks_on)


def device_parts(ctx, shape, model, dmap, limits: dict[str, int], dtype: str, registry) -> dict:
    """What ``device_rows`` needs that does not depend on the measures dropped: per device of ``dmap`` and
    ``limits``, its kept layers, every measure's bytes and early pass there, and its pass; the plan's and the
    publish's terms. ``plan_placed`` computes them once and sums them per set of measures dropped."""
    produced, weights, blocks_on = placement(model, dmap, shape.num_hidden_states)
    kept = {e: [l for l in ctx.layers if produced[l] == e] for e in dict.fromkeys(dmap.values())}
    rows_, width, n = largest_batch(ctx.plan.batches)
    P, d, e = rows_ * width, shape.dim, DTYPE_BYTES[dtype]
    devices = list(dict.fromkeys([*dmap.values(), *limits]))
    gpus = [x for x in devices if x.startswith("cuda")]
    host = "cpu" if "cpu" in devices else "disk"  # offloaded layers keep their state in host memory ...

    def runs_on(dev: str) -> str:  # ... and their blocks run on the first GPU (accelerate's execution device)
        return dev if dev.startswith("cuda") else gpus[0] if gpus else host

    def keeps_on(dev: str) -> str:
        return host if dev in ("cpu", "disk") else dev

    placed = []  # (the device that keeps its state, {measure: bytes}, {measure: early running bytes}, its update)
    passes = dict.fromkeys(devices, 0)
    for dev in devices:
        L_k = len(kept.get(dev, ()))
        sub = dataclasses.replace(ctx, layers=kept.get(dev, []), device="cpu" if dev in ("cpu", "disk") else dev)
        sizes = sizes_and_droppable(sub, registry)[0] if L_k else {}
        parts = early_parts(sub, registry) if L_k else {}
        loop = loop_parts(sub, registry) if L_k else None
        placed.append((keeps_on(dev), sizes, {name: p["running_bytes"] for name, p in parts.items()}, loop))
        H_k = sum(1 for x in produced if x == dev)
        passes[runs_on(dev)] += H_k * P * d * e + (
            P * (shape.ffn + 4 * d) * e + rows_ * shape.heads * width**2 * e if dev in blocks_on else 0
        )
        passes[keeps_on(dev)] += L_k * n * d * e
    return {
        "devices": devices,
        "kept": kept,
        "weights": weights,
        "placed": placed,
        "passes": passes,
        "plan_bytes": plan_bytes(ctx.plan),
        "publish": publish_of(dataclasses.replace(ctx, device="cpu"), registry),
    }


def device_rows(
    ctx, shape, model, dmap, limits: dict[str, int], dtype: str, registry, drop=(), offload: bool = False, parts=None
) -> list[dict]:
    """One row per device (module docstring) with the measures not in ``drop``; ``parts``: ``device_parts`` of
    the same arguments, when already computed."""
    if parts is None:
        parts = device_parts(ctx, shape, model, dmap, limits, dtype, registry)
    devices, kept, weights, passes = parts["devices"], parts["kept"], parts["weights"], parts["passes"]
    measures: dict[Any, dict] = {x: {} for x in devices}
    state, early, loop = dict.fromkeys(devices, 0), dict.fromkeys(devices, 0), dict.fromkeys(devices, 0)
    for keeps, sizes, running, update in parts["placed"]:
        if update is not None:
            loop[keeps] = max(loop[keeps], loop_total(update, drop))
        state[keeps] += sum(b for name, b in sizes.items() if name not in drop)
        early[keeps] += sum(b for name, b in running.items() if name not in drop)
        measures[keeps].update(sizes)
    out = []
    for dev in devices:
        row = {
            "device": dev,
            "weights_bytes": int(weights.get(dev, 0)),
            "state_bytes": int(state[dev]),
            "early_bytes": int(early[dev]),
            "pass_bytes": int(passes[dev] + loop[dev]),
            "layers": kept.get(dev, []),
            "measures": measures[dev],
            "host_bytes": 0,
        }
        out.append(row)
        if dev == "cpu":  # the host: the process, the plan, the whole state gathered at publish and its work
            row["host_bytes"] = (
                RUNTIME_BYTES + parts["plan_bytes"] + sum(state.values()) + publish_sum(parts["publish"], drop)
            )
        if dev == "disk":
            row.update(bytes=row["weights_bytes"], limit_bytes=None, fits=bool(offload or not row["weights_bytes"]))
            continue
        row["bytes"] = (
            row["weights_bytes"] + max(row["state_bytes"], row["early_bytes"]) + row["pass_bytes"] + row["host_bytes"]
        )
        row["limit_bytes"] = limits.get(dev)
        row["fits"] = row["limit_bytes"] is None or row["bytes"] <= row["limit_bytes"]
    return out


def plan_devices(ctx, shape, config, devices: dict, *, dtype: str, registry=None) -> dict:
    """{"devices": rows, "device_map": {module: device}, "fits", "dropped", "reasons", "suggestions", "batch"}
    for the run device-mapped over ``devices`` (accelerate's max_memory; module docstring)."""
    model = meta_model(config, dtype, bool(ctx.cfg.trust_remote_code))
    dmap = placed_map(model, ctx.cfg.device_map, devices)
    return plan_placed(
        ctx, shape, model, dmap, {device_name(k): int(v) for k, v in devices.items()}, dtype=dtype, registry=registry
    )


def plan_placed(ctx, shape, model, dmap: dict[str, str], limits: dict[str, int], *, dtype: str, registry=None) -> dict:
    """``plan_devices`` for a model already placed by ``dmap`` (a loaded device-mapped model: what compute keeps)."""
    registry = MEASURES if registry is None else registry
    cfg = ctx.cfg
    offload = bool(cfg.offload_folder)
    dropped, reasons = [], {}
    parts = device_parts(ctx, shape, model, dmap, limits, dtype, registry)  # summed anew per set dropped
    rows = device_rows(ctx, shape, model, dmap, limits, dtype, registry, (), offload, parts)
    # the last droppable measure first, as on one device (``plan.plan_memory`` keeps the earlier ones first)
    for cls in reversed([c for c in registry if c.droppable(ctx)]):
        over = [r for r in rows if not r["fits"] and r["state_bytes"] and r["device"] != "disk"]
        if not over:
            break
        if not any(cls.name in r["measures"] for r in over):
            continue
        dropped.append(cls.name)
        worst = over[0]
        reasons[cls.name] = (
            f"{cls.name}: {worst['device']} needs {gb(worst['bytes'])} of "
            f"{gb(worst['limit_bytes'])} (its layers {layer_span(worst['layers'])})"
        )
        rows = device_rows(ctx, shape, model, dmap, limits, dtype, registry, dropped, offload, parts)
    order = [c.name for c in registry]
    for name in sorted(dropped, key=order.index):  # an earlier one dropped may fit again once a larger one is out
        if all(r["fits"] for r in rows):
            rest = [n for n in dropped if n != name]
            again = device_rows(ctx, shape, model, dmap, limits, dtype, registry, rest, offload, parts)
            if all(r["fits"] for r in again):
                dropped, rows = rest, again
                reasons.pop(name)
    dropped.sort(key=order.index)  # listed in registry order
    suggestions = [_suggest(r, cfg) for r in rows if not r["fits"]]
    for r in rows:
        r.pop("measures")
    host = host_figures(rows, dropped, parts)
    return {
        "devices": rows,
        "device_map": dmap,
        "fits": all(r["fits"] for r in rows) and host["fits"] is not False,
        "dropped": dropped,
        "reasons": reasons,
        "suggestions": suggestions,
        "host": host,
        "batch": list(largest_batch(ctx.plan.batches)),
    }


def host_figures(rows: list[dict], drop, parts: dict) -> dict:
    """What the host (this process's RAM) holds beside the devices, always — the "cpu" row's figures when
    ``--devices`` names one (``cpu=256``), else the same terms against no stated limit:

        running = runtime + plan + the offloaded entries' weights, state and pass (the "cpu" row's, if any)
        publish = runtime + plan + the offloaded weights + the whole state gathered (Σ state_k) + the publish
                  work of the kept measures and the writer (``memory.terms.publish_sum``)
        bytes   = the "cpu" row's bytes when there is one, else publish (the larger of the two)

    ``parts``: ``device_parts`` of the run (the plan's bytes and each measure's publish work)."""
    cpu = next((r for r in rows if r["device"] == "cpu"), None)
    runtime, plan, publish = RUNTIME_BYTES, parts["plan_bytes"], parts["publish"]
    offloaded = cpu["weights_bytes"] + max(cpu["state_bytes"], cpu["early_bytes"]) + cpu["pass_bytes"] if cpu else 0
    gathered = sum(r["state_bytes"] for r in rows)
    kept = {n: b for n, b in publish.items() if n not in drop}
    work = sum(kept.values()) + writer_bytes()
    at_publish = runtime + plan + (cpu["weights_bytes"] if cpu else 0) + gathered + work
    peak = cpu["bytes"] if cpu else at_publish
    limit = cpu["limit_bytes"] if cpu else None
    return {
        "row": cpu is not None,
        "bytes": int(peak),
        "running_bytes": int(runtime + plan + offloaded),
        "publish_bytes": int(at_publish),
        "runtime_bytes": int(runtime),
        "plan_bytes": int(plan),
        "offloaded_bytes": int(offloaded),
        "gathered_bytes": int(gathered),
        "work_bytes": int(work),
        "publish": {**kept, "writer": writer_bytes()},
        "limit_bytes": limit,
        "limit": f"of {gb(limit)}"
        if limit is not None
        else "not checked: no host limit given, add cpu=SIZE to --devices",
        "fits": None if limit is None else bool(peak <= limit),  # None: not checked, never "fits"
    }


def device_limits(dmap: dict[str, str]) -> dict[str, int]:
    """What each device of a loaded map may hold in all (``--max-memory`` bounds only the weights accelerate places
    there): a GPU's free memory plus what this process holds there; the available RAM plus this process's."""
    import psutil

    out = {}
    for dev in dict.fromkeys(dmap.values()):
        if dev.startswith("cuda"):
            import torch

            out[dev] = int(torch.cuda.mem_get_info(dev)[0]) + int(torch.cuda.memory_reserved(dev))
        elif dev == "cpu":
            out[dev] = int(psutil.virtual_memory().available) + int(psutil.Process().memory_info().rss)
    return out


def _suggest(row: dict, cfg) -> str:
    dev = row["device"]
    if dev == "disk":
        return (
            f"{gb(row['weights_bytes'])} of weights fit on no device: more or larger devices, or "
            "--offload-folder DIR to read them from disk (slow)"
        )
    if row["limit_bytes"] is not None and row["weights_bytes"] >= row["limit_bytes"]:
        return f"{dev}: the weights alone ({gb(row['weights_bytes'])}) exceed {gb(row['limit_bytes'])}: more devices"
    tips = ["--mean-dtype float32"] if cfg.mean_dtype == "float64" else []
    tips += ["fewer --layers", "a smaller --batch-size", "--max-memory to move layers off it"]
    return f"{dev}: needs {gb(row['bytes'])} of {gb(row['limit_bytes'])} — " + ", ".join(tips)


__all__ = [
    "plan_devices",
    "plan_placed",
    "Placed",
    "placed_model",
    "host_figures",
    "device_limits",
    "placed_map",
    "module_bytes",
    "hidden_state_devices",
    "device_rows",
    "device_parts",
    "meta_model",
]
