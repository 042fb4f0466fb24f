"""Stages 3–4 — run the measures over a range of batches, and merge partial states.

A run over batches [start, stop) leaves its measures holding a **partial state**; partial
states of disjoint ranges merge exactly (Chan et al.'s pooled update for the moments), in any
order, into the state of one pass over their union. So:

* a checkpoint is "the partial state of [0, next) + next" (``checkpoint.py``: ``PartialState``, save/load);
* sharding (processes, Ray actors, machines) is "map ``compute_partial`` over batch ranges, then
  ``merge_partials``" — the published run equals the single-process one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from normvar_core.errors import CancelledError, interrupts_between_batches
from normvar_core.pipeline.contracts import RunContext, StateSource
from normvar_core.pipeline.execute.checkpoint import PartialState, load_partial, partial_state
from normvar_core.pipeline.execute.layer_groups import LayerSplit, groups_of, update_split
from normvar_core.pipeline.measures import MEASURES, Measure
from normvar_core.pipeline.measures.layerview import update_all
from normvar_core.pipeline.measures.state import DictReader


def build_measures(ctx: RunContext, registry=MEASURES) -> dict[str, Measure]:
    """Every registered measure the run wants, by name (registry order)."""
    measures = {}
    groups = groups_of(ctx)
    for cls in registry:
        measure = cls.for_run(ctx) if groups is None else LayerSplit.build(cls, ctx, groups)
        if measure is not None:
            measures[cls.name] = measure
    return measures  # type: ignore[return-value]  # a layer split is used as a measure


@dataclass
class Counted:
    """The run's counted positions per layer (|X| of the batches fed): ``run_range`` adds each StateBatch's
    ``size`` as it begins to add the batch to the measures, so a half-added piece already counts."""

    n: int = 0


def run_range(
    source: StateSource,
    plan,
    measures: dict[str, Measure],
    start: int,
    stop: int,
    *,
    on_batch: Callable[[int], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    count: Counted | None = None,
    on_layer: Callable[[int, float], None] | None = None,
) -> None:
    """Feed the StateBatches of plan batches [start, stop) to every measure (``layerview.update_all``:
    the layer-major ones share one float64 copy per layer and batch). ``on_layer(i, fraction)``: the share of
    batch i's layers folded in so far, after each layer (progress inside a long batch).
    ``on_batch(i)`` runs after batch i is complete (all its pieces, if it was split);
    ``should_cancel()`` is polled before each batch and raises CancelledError; ``count`` counts the positions."""
    if start >= stop:
        return
    if should_cancel is not None and should_cancel():
        raise CancelledError("cancelled")
    with interrupts_between_batches() as guard:  # SIGINT/SIGTERM wait while a batch is half added
        for sb in source.batches(plan, start, stop):
            guard.hold()
            if count is not None:
                count.n += sb.size
            if sb.groups is not None:  # --device-map: each layer group's states into its own measures
                update_split(measures, sb)
            else:
                update_all(measures, sb, None if on_layer is None else _within(on_layer, sb.index))
            if sb.last:  # every piece of the batch is in
                _done(sb.index, on_batch, should_cancel if sb.index + 1 < stop else None)
                guard.release()


def _within(on_layer, index: int):
    return lambda done, total: on_layer(index, done / max(total, 1))


def _done(index: int, on_batch, should_cancel) -> None:
    if on_batch is not None:
        on_batch(index)
    if should_cancel is not None and should_cancel():
        raise CancelledError("cancelled")


def compute_partial(source: StateSource, plan, ctx: RunContext, start: int, stop: int, **kw) -> PartialState:
    """One shard: fresh measures over batches [start, stop), returned as a partial state."""
    measures = build_measures(ctx)
    run_range(source, plan, measures, start, stop, **kw)
    return partial_state(measures, start, stop)


def merge_into(measures: dict[str, Measure], reader) -> dict[str, Measure]:
    """Pool a partial state read through ``reader`` (flat keys ``<measure>__<key>``, as
    ``PartialState.arrays``) into ``accs`` in place, measure by measure (``merge_from``: one
    array or one layer block of the incoming state at a time)."""
    for name, measure in measures.items():
        measure.merge_from(reader.sub(f"{name}__"))
    return measures


def merge_partials(ctx: RunContext, partials: list[PartialState]) -> dict[str, Measure]:
    """Merge partial states of disjoint batch ranges into the measures of their union."""
    if not partials:
        return build_measures(ctx)
    ranges = sorted((p.start, p.stop) for p in partials)
    for (a0, a1), (b0, _) in zip(ranges, ranges[1:]):
        if b0 < a1:
            raise ValueError(f"overlapping batch ranges {a0}..{a1} and {b0}..")
    merged = load_partial(build_measures(ctx), partials[0])
    for p in partials[1:]:
        missing = set(merged) - set(p.states)
        if missing:
            raise ValueError(f"partial state lacks measure {sorted(missing)[0]!r}")
        merge_into(merged, DictReader(p.arrays()))
    return merged


__all__ = ["build_measures", "Counted", "run_range", "compute_partial", "merge_partials", "merge_into"]
