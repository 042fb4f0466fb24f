"""The occurrences measure (the Occurrences page): every counted occurrence of a layer — at most
``--occurrences`` per layer, a seeded uniform sample beyond that — at its coordinates on the layer's
principal axes, without keeping the d-dimensional vectors.

How the axes are obtained (the choice, recorded per layer in the ``occurrence_axes`` table):

1. **Early axes.** Before the pass, the measure's early pass (``AxesPass``, ``early_pass`` of the contract) runs whole
batches spread over the plan
   (``OCCURRENCE_EARLY`` positions) and takes, per layer, their mean m₀ and the top k = ``OCCURRENCE_AXES``
   eigenvectors B (d × k) of their covariance. Every process of the run (local, resumed, each Ray actor)
   computes the same B from the same batches; B and m₀ are part of the registered state, so a checkpoint
   carries the axes its projections were made on. The states are not held: each batch is pooled into a
   running float64 mean and scatter per layer (8·L·d·(d + 2) bytes, ``AxesPass.planned``, counted by the memory
   plan; freed before the measures are built). A source on the CPU keeps those batches' states when they
   weigh at most ``REUSE_BYTES`` and yields them again when the pass reaches them (no second forward pass), with
   each layer's mean and Gram products, which the pass's layer views take instead of computing them again.
2. **During the pass** each kept occurrence stores y = Bᵀ(x − m₀) (k float32), and over *every* counted
   position the sums Σy and Σyyᵀ (float64) are pooled, which give the exact mean and covariance of the
   projections.
3. **At publish** the page's two axes are the exact top-2 eigenvectors e₁, e₂ of the geometry's covariance
   (the d × d scatter the run streams anyway; ``geometry`` hands them over) rotated into span(B): u₁ ∝ BBᵀe₁,
   u₂ ∝ BBᵀe₂ made orthogonal to u₁; a point's coordinates are (x − μ)·u₁, (x − μ)·u₂ with μ the exact mean.
   The angle between eᵢ and span(B), arccos ‖Bᵀeᵢ‖, is recorded (``angle_x_deg``, ``angle_y_deg``): 0 means
   the coordinates are the exact principal coordinates. A run without the geometry falls back to the exact
   principal axes of the projections (the top-2 eigenvectors of their pooled k × k covariance; angle not
   measured, NaN).

State: (L, P, k) float32 projections (P = min(--occurrences, counted positions)), their filled flags,
(L, d, k) + (L, d) float64 early axes and mean, (L, k) + (L, k, k) float64 sums. Tables: ``occurrences``
(layer, token_id, sentence_id, position, x, y FLOAT) and ``occurrence_axes`` (one row per layer).
"""

from __future__ import annotations

import numpy as np
import torch

from normvar_core.config import RunConfig
from normvar_core.constants import OCCURRENCE_AXES, OCCURRENCE_EARLY
from normvar_core.errors import interrupts_between_batches
from normvar_core.pipeline.batches import batch_token_counts, first_position, unit_ids
from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures.base import EarlyPass, Planned
from normvar_core.pipeline.measures.covariance import Covariance
from normvar_core.pipeline.measures.geometry import GeometryMeasure
from normvar_core.pipeline.measures.halves import HalvesMeasure, half_rows, view_split
from normvar_core.pipeline.measures.layerview import LayerMajor, LayerView, per_layer, resolve_scatter_dtype
from normvar_core.pipeline.measures.pooling import pool_into
from normvar_core.pipeline.measures.samples import Fill, locate, position_keys
from normvar_core.pipeline.sample_plan import SamplePlan, plan_uniform
from normvar_core.pipeline.sources import REUSE_BYTES
from normvar_core.runs.schema import OCCURRENCES_TABLES
from normvar_core.runs.tables import occurrence_tables
from normvar_core.stats.axes import top_axes


def spread_order(n: int):
    """0 .. n-1 in van der Corput order (0, n/2, n/4, 3n/4, ...), lazily: any prefix is spread over the range."""
    seen: set = set()
    j = 0
    while len(seen) < n:
        x, f, i = 0.0, 0.5, j
        while i:
            x, i, f = x + f * (i & 1), i >> 1, f / 2
        b = min(int(x * n), n - 1)
        if b not in seen:
            seen.add(b)
            yield b
        j += 1


def layer_states(sb, source):
    """(row, (N, d) tensor on its device) for every kept layer of a batch, in layer order: ``sb.states[row]``, or
    for a device-mapped batch the layer groups' tensors (``sb.groups``, one per ``source.groups`` entry)."""
    if sb.groups is None:
        yield from enumerate(sb.states)
        return
    for (layers, _), g in zip(source.groups, sb.groups):
        yield from zip(layers, g)


def early_batches(plan, positions: int = OCCURRENCE_EARLY) -> tuple[list[int], int]:
    """The batches of the early pass, in ``spread_order``, until they hold ``positions`` real tokens (at least
    one batch), and those tokens: an upper bound of their counted positions, from the plan alone (what
    ``normvar plan`` counts; the pass itself stops on counted positions, so it may use fewer batches)."""
    tokens = batch_token_counts(plan.batches)
    used, n = [], 0
    for bi in spread_order(plan.n_batches):
        used.append(bi)
        n += int(tokens[bi])
        if n >= positions:
            break
    return used, n


def pass_views(ctx: RunContext) -> tuple[bool, bool]:
    """(whether the pass computes the layer views' Gram products, whether it splits them into the halves), as the
    memory plan kept the measures: the geometry's scatter, or the halves' per-half scatters (``view_split``)."""
    geometry = GeometryMeasure.asked(ctx.cfg) and not ctx.dropped(GeometryMeasure.name)
    halves = bool(ctx.cfg.geometry) and HalvesMeasure.asked(ctx.cfg) and not ctx.dropped(HalvesMeasure.name)
    return geometry or halves, halves


class AxesPass(EarlyPass):
    """The occurrences' early pass (``early_axes``): ``done`` batches of ``spread_order`` pooled, ``n`` counted
    positions, and per kept layer (row) its count, mean and float64 scatter (Chan's update). ``state_dict`` /
    ``load_state_dict`` make it a checkpoint's ``occurrences_early`` entry, so an interrupted early pass keeps the
    batches it finished; ``result()`` is ``axes()``."""

    label = "the occurrences' early axes"

    def __init__(
        self,
        source,
        plan,
        *,
        positions: int = OCCURRENCE_EARLY,
        scatter_dtype: str = "auto",
        views: tuple[bool, bool] = (False, False),
        reuse: bool = True,
    ):
        self.source, self.plan, self.positions, self.scatter_dtype = source, plan, int(positions), scatter_dtype
        self.views, self.split = views  # ``pass_views``: keep the kept batches' Gram products, split as the pass
        self.reuse = reuse  # module docstring of ``early_axes``
        self.done, self.n = 0, 0
        self.sums: dict[int, list] = {}  # row -> [count, mean (d,), scatter (d, d)] (float64 tensors)

    @property
    def finished(self) -> bool:
        return self.n >= self.positions or self.done >= self.plan.n_batches

    def state_dict(self) -> dict[str, np.ndarray]:
        rows = sorted(self.sums)
        return {
            "done": np.array([self.done]),
            "n": np.array([self.n]),
            "count": np.array([self.sums[r][0] for r in rows], np.int64),
            "mean": np.stack([self.sums[r][1].to("cpu").numpy() for r in rows]),
            "scatter": np.stack([self.sums[r][2].to("cpu").numpy() for r in rows]),
        }

    def load_state_dict(self, state: dict) -> AxesPass:
        self.done, self.n = int(np.asarray(state["done"])[0]), int(np.asarray(state["n"])[0])
        self.sums = {
            r: [int(c), torch.from_numpy(np.array(m, np.float64)), torch.from_numpy(np.array(S, np.float64))]
            for r, (c, m, S) in enumerate(zip(state["count"], state["mean"], state["scatter"]))
        }
        return self

    def _pool(self, row: int, x: torch.Tensor, split) -> LayerView:
        """Pool layer ``row`` of a batch (its view split as the pass splits it, so the pass can reuse it)."""
        view = LayerView(x, resolve_scatter_dtype(self.scatter_dtype, x.device), split)
        mean_b, scatter_b = view.mean, view.scatter  # float64, the scatter about m_b
        measure = self.sums.get(row)
        if measure is None:
            self.sums[row] = [view.n, mean_b.clone(), scatter_b.clone()]
            return view
        if measure[1].device != mean_b.device:  # resumed from a checkpoint (host arrays): onto the layer's device
            measure[1], measure[2] = measure[1].to(mean_b.device), measure[2].to(mean_b.device)
        pool_into(measure[1], measure[2], measure[0], mean_b, scatter_b, view.n, outer=True)
        measure[0] += view.n
        return view

    def run(self, *, on_batch=None) -> None:
        """Pool the batches of the spread order after the ``done`` ones until ``positions`` are in; ``on_batch(self)``
        after each whole batch. SIGINT/SIGTERM wait while a batch is half pooled (``interrupts_between_batches``),
        so the state at an interrupt holds whole batches only."""
        seen: dict = {}
        source, kept_bytes = self.source, 0
        keep = self.reuse and hasattr(source, "reuse") and source.device.type == "cpu"
        order = spread_order(self.plan.n_batches)
        for _ in range(self.done):
            next(order)
        with interrupts_between_batches() as guard:
            for bi in order:
                if self.finished:
                    break
                for sb in source.batches(self.plan, bi, bi + 1):
                    guard.hold()
                    # a batch kept for the pass keeps its Gram products too, split as the pass splits its views
                    hand_over = keep and self.views and sb.groups is None
                    split = view_split(half_rows(sb, sb.states.device)) if hand_over and self.split else None
                    views = []
                    for row, x in layer_states(sb, source):
                        view = self._pool(row, x, split)
                        if hand_over:
                            views.append(view.reusable())  # m_b and the Gram products, not the float64 copy
                        del view
                    sb.views = views if hand_over else None
                    self.n += sb.size
                    if keep:
                        kept_bytes += sum(
                            t.numel() * t.element_size() for t in ((sb.states,) if sb.groups is None else sb.groups)
                        )
                        keep = kept_bytes <= REUSE_BYTES
                        seen.setdefault(bi, []).append(sb) if keep else seen.clear()
                    del sb
                self.done += 1
                if on_batch is not None:
                    on_batch(self)
                guard.release()
        if seen:
            source.reuse(seen)

    def axes(self, k: int = OCCURRENCE_AXES) -> dict:
        """{"mean": (L, d), "axes": (L, d, k) float64, "n", "batches", "layers"}: the top-k eigenvectors of each
        layer's S / n (``stats.axes.top_axes``), a layer per core (``layerview.per_layer``: threaded BLAS beside
        torch's threads on shared cores ran 10-100x slower)."""
        rows = sorted(self.sums)

        def one(i: int):
            cnt, mean, scatter = self.sums[rows[i]]
            return mean.to("cpu").numpy(), top_axes(scatter.to("cpu").numpy() / max(cnt, 1), k)

        out = per_layer(one, len(rows))
        mean, axes = np.stack([o[0] for o in out]), np.stack([o[1] for o in out])
        if axes.shape[2] < k:  # fewer dimensions than k (tiny test models): pad with zero axes
            axes = np.concatenate([axes, np.zeros((*axes.shape[:2], k - axes.shape[2]))], axis=2)
        return {
            "mean": mean,
            "axes": axes,
            "n": int(self.n),
            "batches": int(self.done),
            "layers": list(self.source.layers),
        }

    def result(self) -> dict:
        return self.axes(OCCURRENCE_AXES)

    @classmethod
    def start(cls, ctx: RunContext, source, *, reuse: bool) -> AxesPass:
        """The run's early pass: its batches' states kept for the pass only where the memory plan counted them
        (``planned``'s ``held_bytes``)."""
        return cls(
            source,
            ctx.plan,
            scatter_dtype=ctx.cfg.scatter_dtype,
            views=pass_views(ctx),
            reuse=reuse and cls.planned(ctx)["held_bytes"] > 0,
        )

    @classmethod
    def planned(cls, ctx: RunContext, *, device: str | None = None) -> dict:
        """What the early pass holds before the measures exist, from the plan alone: ``running_bytes`` =
        8·L·d·(d + 2) — each kept layer's running float64 scatter (d × d), mean and the batch's own scatter being
        pooled, on the layer's device — and ``held_bytes``, what a CPU source keeps for the pass (held until the
        pass reaches those batches, so through the pass too): the early batches' float32 states, L·N·d·4, only
        when at most ``REUSE_BYTES``, and with them, where the pass computes the layer views' Gram products
        (``pass_views``), each batch's and layer's products (``LayerView.reusable_bytes``: 16·d² + 24·d with the
        halves' split, 8·d² + 8·d without)."""
        L, d = ctx.num_layers, ctx.dim
        dev = device or str(ctx.device)
        b = 8  # pooled in float64 whatever the per-batch arithmetic (``--scatter-dtype``), as the geometry's scatter
        batches, tokens = early_batches(ctx.plan)
        held = L * tokens * d * 4
        views, split = pass_views(ctx)
        held += L * len(batches) * LayerView.reusable_bytes(d, split) if views else 0
        held = held if dev == "cpu" and L * tokens * d * 4 <= REUSE_BYTES else 0
        return {
            "running_bytes": int(L * d * (d + 2) * b),
            "held_bytes": int(held),
            "positions": int(tokens),
            "batches": len(batches),
        }

    @classmethod
    def checkpoint_meta(cls, result: dict | None) -> dict:
        """``occurrence_early``: the axes' counted positions and batches (None: the run keeps no occurrences)."""
        early = None if result is None else {"n": int(result["n"]), "batches": int(result["batches"])}
        return {"occurrence_early": early}

    @classmethod
    def from_checkpoint(cls, state: dict, meta: dict, ctx: RunContext) -> dict | None:
        """The axes a checkpoint of the pass carries: the measure's registered ``axes`` and ``origin`` and the
        ``occurrence_early`` meta (None when it has none)."""
        early = meta.get("occurrence_early")
        if not early or "axes" not in state:
            return None
        return {
            "mean": np.asarray(state["origin"]),
            "axes": np.asarray(state["axes"]),
            "n": int(early["n"]),
            "batches": int(early["batches"]),
            "layers": list(ctx.layers),
        }


def early_axes(
    source,
    plan,
    *,
    k: int = OCCURRENCE_AXES,
    positions: int = OCCURRENCE_EARLY,
    reuse: bool = True,
    scatter_dtype: str = "auto",
    state: dict | None = None,
    on_batch=None,
    views: tuple[bool, bool] = (False, False),
) -> dict:
    """The early axes of every kept layer from whole batches spread over the plan (``spread_order``) holding
    ``positions`` counted positions, at least one batch: {"mean": (L, d), "axes": (L, d, k) float64, "n":
    positions used, "batches": batches used, "layers": the source's layers}.

    The states are not held: each batch is pooled into a running mean m₀ and scatter S per layer (Chan's update,
    ``pooling.pool_into``: n = n_a + n_b, δ = μ_b − μ_a, S = S_a + S_b + δδᵀ n_a n_b / n) in float64 on the layer's
    device (the batch's scatter in ``--scatter-dtype``'s arithmetic, as the geometry's ``LayerView``); B = the
    top-k eigenvectors of S / n. Only on a CPU source, and up to ``REUSE_BYTES`` in all, are the batches themselves
    kept and handed to the source (``reuse``), so the pass does not redo their forward passes (on a GPU the
    forward pass is cheap next to holding its states). ``state``: an interrupted pass's ``AxesPass.state_dict``
    to go on from; ``on_batch(pass)`` after each batch. ``views`` (``pass_views``): the
    batches kept for the pass keep their layer views' mean and Gram products, split as the pass will split them, and
    the pass takes them as they are (``StateBatch.views``): the pass does not compute those products again."""
    ep = AxesPass(source, plan, positions=positions, scatter_dtype=scatter_dtype, views=views, reuse=reuse)
    if state is not None:
        ep.load_state_dict(state)
    ep.run(on_batch=on_batch)
    return ep.axes(k)


def plan_occurrences(plan, size: int) -> SamplePlan:
    """The kept occurrences: every counted position when the run has at most ``size``, else the seeded uniform
    sample of ``size`` (``plan_uniform``: the same whatever the batches or shards); ordered by (sentence,
    position), with their token (or word) ids in ``token_ids``."""
    up = plan_uniform(plan.batches, size=int(min(size, plan.total_embeddings)), seed=plan.cfg.seed, **plan.exclusions)
    order = np.lexsort((up.offset, up.sentence))
    bat, sent, off = up.batch[order], up.sentence[order], up.offset[order]
    tok = np.zeros(sent.size, np.int64)
    by_batch = {}
    for bi in np.unique(bat):
        at = np.flatnonzero(bat == bi)
        b = plan.batches[int(bi)]
        row_of = {int(s): r for r, s in enumerate(np.asarray(b.indices, np.int64))}
        rows = np.array([row_of[int(s)] for s in sent[at]], np.int64)
        cols = off[at] + first_position(b).numpy()[rows]
        tok[at] = unit_ids(b).numpy()[rows, cols]
        by_batch[int(bi)] = at
    return SamplePlan(
        token_ids=tok, i=np.arange(sent.size, dtype=np.int32), batch=bat, sentence=sent, offset=off, by_batch=by_batch
    )


def _slots(ctx: RunContext) -> int:
    return int(min(int(ctx.cfg.occurrences), ctx.plan.total_embeddings))


class KeepOurs:
    """The merge rule of the early axes and origin: they are computed from the same batches in every process, so a
    state without them (all zero) takes the other's, one layer block at a time."""

    def merge(self, holder, name: str, reader) -> None:
        mine = getattr(holder, name)
        for l, block in enumerate(reader.blocks(name)):
            if not mine[l].any():
                mine[l] = np.asarray(block)


KEEP_OURS = KeepOurs()


class OccurrencesMeasure(LayerMajor):
    """On while ``--occurrences`` is not 0; reads the geometry's exact axes from its state (``uses_states``: no wait for
    the geometry's TwoNN). Its early pass (``AxesPass``) gives the early axes, ``ctx.early["occurrences"]``."""

    name = "occurrences"
    title = "occurrences"
    table_names = OCCURRENCES_TABLES
    uses_states = ("geometry",)
    policy = "a run short of memory leaves the Occurrences page out (lower --occurrences to keep it)"
    early_pass = AxesPass

    def __init__(self, ctx: RunContext):
        super().__init__(ctx)
        L, k = ctx.num_layers, OCCURRENCE_AXES
        self.plan = plan_occurrences(ctx.plan, _slots(ctx))
        self._keys = position_keys(self.plan)
        early = ctx.early[self.name]
        rows = [list(early["layers"]).index(layer) for layer in self.layers]  # a layer group's own
        self.early = {**early, "axes": np.asarray(early["axes"])[rows], "mean": np.asarray(early["mean"])[rows]}
        self.geometry = None  # the run's geometry measure, handed over at publish (``take_states``)
        self._add_state("axes", np.array(self.early["axes"], np.float64), merge=KEEP_OURS)
        self._add_state("origin", np.array(self.early["mean"], np.float64), merge=KEEP_OURS)
        # n and the sums Σy, Σyyᵀ of every counted position's projection (host arrays)
        self.cov = Covariance(self, (L, k), mean="sum_y", scatter="sum_yy", form="sums")
        self._add_state("proj", np.zeros((L, self.plan.size, k), np.float32), merge=Fill("filled"))
        self._add_state("filled", np.zeros(self.plan.size, bool), merge="or", per_layer=False)

    @classmethod
    def asked(cls, cfg: RunConfig) -> bool:
        return cfg.occurrences != 0

    @classmethod
    def may_drop(cls, cfg: RunConfig) -> bool:
        return True

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """The early axes (L, d, k) and mean (L, d), n, the sums Σy (L, k) and Σyyᵀ (L, k, k) in float64, the
        float32 projections (L, P, k) of the P kept occurrences and their flags:
        4·L·P·k + P + 8·L·(d·k + d + k + k²) + 8 bytes."""
        L, d, k, P = ctx.num_layers, ctx.dim, OCCURRENCE_AXES, _slots(ctx)
        return {
            "axes": ((L, d, k), np.float64),
            "origin": ((L, d), np.float64),
            **Covariance.planned(L, k, mean="sum_y", scatter="sum_yy"),
            "proj": ((L, P, k), np.float32),
            "filled": ((P,), np.bool_),
        }

    @classmethod
    def publish_bytes(cls, ctx: RunContext) -> int:
        """The result's coordinates (L, P, 2) float64 and one layer's projections in float64 (P, k) being turned
        into them, and one layer's table part (about 32 bytes an occurrence): 16·L·P + 8·P·k + 32·P."""
        L, k, P = ctx.num_layers, OCCURRENCE_AXES, _slots(ctx)
        return int(16 * L * P + 8 * P * k + 32 * P)

    @classmethod
    def drop_reason(cls, ctx: RunContext, *, need: int, free: int, subset: list[int] | None) -> str:
        P = _slots(ctx)
        return (
            f"occurrences skipped: {P:,} occurrences x {ctx.num_layers} layers need {need / 2**30:.1f} GiB, "
            f"{free / 2**30:.1f} GiB left on the device — lower --occurrences (e.g. {max(P // 4, 1000)}), keep "
            f"fewer --layers, or a larger --memory-gb"
        )

    # ------------------------------------------------------------------ streaming
    @classmethod
    def update_bytes(cls, ctx: RunContext, n: int, rows: int) -> int:
        """The layer's rows on the k axes, in the view's dtype and in float64: 16·n·k."""
        return 16 * n * OCCURRENCE_AXES

    def begin_batch(self, batch: StateBatch) -> None:
        self._picks, self._rows = locate(self.plan, self._keys, batch)

    def update_layer(self, l: int, view: LayerView, batch: StateBatch) -> None:
        """y = Bᵀ(x − m₀) = Bᵀ(x − c) + Bᵀ(c − m₀) from the shared centred copy (c: the view's centre)."""
        xc = view.centred
        B = torch.as_tensor(self.axes[l], device=xc.device).to(xc.dtype)
        shift = (view.centre.cpu().numpy() - self.origin[l]) @ self.axes[l]
        y = (xc @ B).to("cpu", torch.float64).numpy() + shift
        self.cov.add_rows(l, y)
        if self._picks.size:
            rows = self._rows
            if view.order is not None:  # the centred copy's rows are in the view's order
                inverse = torch.argsort(view.order).cpu().numpy()
                rows = inverse[rows]
            self.proj[l, self._picks] = y[rows]

    def end_batch(self, batch: StateBatch) -> None:
        if self._picks.size:
            self.filled[self._picks] = True

    # ------------------------------------------------------------------ result
    def take_states(self, measures: dict) -> None:
        self.geometry = measures.get("geometry")

    def _directions(self, l: int, cov_y: np.ndarray) -> tuple[np.ndarray, str, list[float]]:
        """(k, 2) directions in span(B), how they were found, the angles (degrees) to the exact axes."""
        if self.geometry is None:
            return top_axes(cov_y, 2), "principal axes of the projections (no geometry)", [float("nan")] * 2
        exact = self.geometry.covariance_axes(l, 2)  # (d, 2): e1, e2
        c = self.axes[l].T @ exact  # (k, 2): Bᵀ e_i
        norms = np.linalg.norm(c, axis=0)
        # atan2(‖e − BBᵀe‖, ‖Bᵀe‖): the same angle as arccos ‖Bᵀe‖, without arccos's √ε noise near 0
        off = np.linalg.norm(exact - self.axes[l] @ c, axis=0)
        # recorded to 1e-9 degrees: below that it is the rounding of the covariance (runs merged in another order)
        angles = [round(float(np.degrees(np.arctan2(o, x))), 9) for o, x in zip(off, norms)]
        u1 = c[:, 0] / max(norms[0], 1e-300)
        u2 = c[:, 1] - (u1 @ c[:, 1]) * u1
        u2 = u2 / max(np.linalg.norm(u2), 1e-300)
        return np.stack([u1, u2], axis=1), "exact top-2 covariance axes rotated into the early subspace", angles

    def result(self) -> dict:
        if not self.filled.all():
            raise RuntimeError(f"{int((~self.filled).sum())} kept occurrences were never filled")
        n = max(self.n, 1)
        xy, rows = [], []
        for l, layer in enumerate(self.layers):
            ybar = self.sum_y[l] / n
            cov_y = self.cov.covariance(l)  # Σyyᵀ / n − ȳȳᵀ
            U, how, angles = self._directions(l, cov_y)
            xy.append((self.proj[l].astype(np.float64) - ybar) @ U)
            var = np.einsum("ij,jk,ki->i", U.T, cov_y, U)
            rows.append(
                {
                    "layer": int(layer),
                    "axes": how,
                    "k": int(self.axes.shape[2]),
                    "n_early": int(self.early["n"]),
                    "early_batches": int(self.early["batches"]),
                    "angle_x_deg": angles[0],
                    "angle_y_deg": angles[1],
                    "var_x": float(var[0]),
                    "var_y": float(var[1]),
                    "n": int(self.n),
                }
            )
        return {"xy": np.stack(xy) if xy else np.zeros((0, 0, 2)), "rows": rows}

    def tables(self, result: dict, ctx: RunContext) -> dict:
        p = self.plan
        return occurrence_tables(
            self.layers,
            result["xy"],
            result["rows"],
            token_ids=p.token_ids,
            sentence_ids=p.sentence,
            positions=p.offset,
        )

    def sentence_ids(self, result) -> set[int]:
        return {int(s) for s in np.unique(self.plan.sentence)}

    def run_meta(self, result) -> dict:
        return {
            "occurrences": int(self.plan.size),
            "occurrence_axes": OCCURRENCE_AXES,
            "occurrence_early": int(self.early["n"]),
        }


__all__ = [
    "OccurrencesMeasure",
    "AxesPass",
    "early_axes",
    "early_batches",
    "layer_states",
    "spread_order",
    "plan_occurrences",
]
