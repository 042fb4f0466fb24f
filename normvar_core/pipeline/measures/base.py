"""The measure contract: one class per streamed measure, checked on every class of ``MEASURES`` by
``tests/test_measure_contract.py``.

A measure class says, as class attributes and classmethods:

* ``name`` (the run row's ``accumulators`` value and the ``notes.skipped`` key: never renamed), ``title``
  (its finalize label), ``table_names`` (from ``runs/schema.py``), ``uses_results`` (earlier measures whose
  results its ``result()`` reuses), ``uses_states`` (measures whose finished state its ``result()`` reads, without
  waiting for their results) and ``finalize_in_background``;
* ``asked(cfg)``: whether the RunConfig asks for it (reads its switch by attribute, e.g. ``cfg.geometry``);
  ``may_drop(cfg)``: whether a run short of memory may leave it out; ``policy``: that rule in words
  (``normvar plan --json``'s ``policy``); ``fix``: how to leave it out when it is forced on and does not fit;
* ``planned_state(ctx)``: {key: (shape, dtype)} of every array its ``state_dict`` holds after the whole pass,
  before anything is built. From it ``planned_bytes(ctx)`` = Σ_key prod(shape) · itemsize(dtype) (the memory
  plan's figure; 0 when not asked) and ``planned_terms(ctx)`` (the terms ``normvar plan`` prints) follow: one
  formula per measure. ``planned_exact = False`` where the plan is an upper bound of the state (the halves);
* ``publish_bytes(ctx)``: what its ``result()`` and ``tables()`` hold at publish beyond the state (results are
  kept until the run file is written; a measure that ``finalize_in_background`` works beside the others): the
  memory plan's publish term (``memory.terms.publish_bytes``);
* ``update_bytes(ctx, n, rows)``: what its ``update`` of a batch of n counted tokens in ``rows`` sentences holds at
  its peak beside its state, the batch's states and the shared ``LayerView``; ``update_held(ctx, n, rows)``: the
  part of it kept while the other measures update (a layer's copy kept for the next layer). The memory plan's loop
  term is the view's bytes + Σ held + max(peak − held) over the kept measures (``memory.terms.loop_total``), and
  ``splits_view`` says whether it asks the view for a split (three d × d products instead of one);
* ``early_pass``: None, or an ``EarlyPass`` class — a pass over some of the run's batches before the measures
  are built, whose ``result()`` the measure's constructor reads from ``ctx.early[name]`` (the occurrences'
  early axes). The memory plan counts its ``planned`` bytes, a checkpoint keeps an unfinished one's
  ``state_dict``, and the executors run it for every measure the run keeps (``measures.prime``);

and per run:

* ``for_run(ctx)`` builds it (None when not asked or dropped by the memory plan, ``skip_reason`` says why);
* its state is **registered** once (``state.Stateful._add_state``: name, initial array, merge rule), from
  which ``state_dict()`` (numpy arrays only, saved with np.savez, loaded with allow_pickle=False),
  ``load_state_dict``, ``from_state_dict(state, ctx)``, ``state_spec()``, ``to(device)`` and the merge
  follow; ``update(batch)`` adds a StateBatch; ``merge(other)`` / ``merge_from(reader)`` pools another
  partial state of the same run exactly ("two halves merged = one stream");
* ``result()`` the finished measure; ``tables(result, ctx)`` -> {table name: pyarrow.Table} written to the run
  file; ``run_meta`` notes for the run row; ``sentence_ids`` the sentences its tables point at;

its Gaussian null: ``null_tables(run, kind, stats, null, seed=…)`` -> {table name: table} of the null run that
``pipeline.execute.null_run.write_null_run`` publishes (a subset of ``table_names``; {} by default: no null);

and what it shows: ``curves``, its per-layer curves (``runs.declared.LayerCurve``), recorded in the run file with
its tables, from which the dashboard's page and the deck draw them (no registry to edit).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures.state import Stateful
from normvar_core.runs.declared import LayerCurve

Planned = dict[str, tuple[tuple[int, ...], Any]]
"""{state key: (shape, dtype)}: what ``state_dict`` holds after the whole pass (dtype: anything ``np.dtype``
takes, e.g. ``np.float64``)."""


class Measure(Stateful, ABC):
    """One streamed measure (see the module docstring for the contract)."""

    name: ClassVar[str]
    title: ClassVar[str]
    table_names: ClassVar[tuple[str, ...]] = ()
    uses_results: ClassVar[tuple[str, ...]] = ()
    """Names of measures whose results this one's ``result()`` reuses: publish hands them over through
    ``take_results`` first when the run holds them (they finish earlier in ``MEASURES`` order)."""
    uses_states: ClassVar[tuple[str, ...]] = ()
    """Names of measures whose finished state this one's ``result()`` reads (the occurrences read the geometry's
    covariance): publish hands the measures over through ``take_states`` first, without waiting for their
    ``result()`` (which may still be running in its own thread: read, never modify)."""
    requires: ClassVar[tuple[str, ...]] = ()
    """Names of measures without whose state this one has nothing to compute (the neighbourhoods search the
    geometry's sample): a memory plan that drops one of them drops this one too, and says why."""
    finalize_in_background: ClassVar[bool] = False
    """True when ``result()`` is slow and needs nothing of another result (the geometry: spectra, TwoNN):
    publish finishes it in its own thread and writes its tables last."""
    policy: ClassVar[str] = ""
    """May a run short of memory drop it, and why, in words (``normvar plan --json``'s ``policy``)."""
    fix: ClassVar[str] = ""
    """The option that leaves it out, suggested when it is forced on and the run does not fit ("" if none)."""
    planned_exact: ClassVar[bool] = True
    """``planned_state`` is the state's exact shapes (False: an upper bound of them)."""
    curves: ClassVar[tuple[LayerCurve, ...]] = ()
    """Per-layer curves of its tables that the dashboard (the curve's page, as a tab) and the deck (a slide) draw,
    e.g. ``LayerCurve("layer_norms", "mean_norm", "Mean norm per layer", "mean ‖x‖")``."""
    early_pass: ClassVar[type[EarlyPass] | None] = None
    """Its pass before the measures are built (``EarlyPass``), or None; ``for_run`` waits for its result in
    ``ctx.early[name]``."""

    # ------------------------------------------------------------------ what the run asks for
    @classmethod
    def asked(cls, cfg: RunConfig) -> bool:
        """Whether the run config asks for this measure (by default always)."""
        return True

    @classmethod
    def may_drop(cls, cfg: RunConfig) -> bool:
        """Whether a run short of memory may leave it out (by default never)."""
        return False

    @classmethod
    def droppable(cls, ctx: RunContext) -> bool:
        """Asked for, and a run short of memory may leave it out."""
        return cls.asked(ctx.cfg) and cls.may_drop(ctx.cfg)

    @classmethod
    def keeps(cls, ctx: RunContext) -> bool:
        """Asked for, and not dropped by the memory plan."""
        return cls.asked(ctx.cfg) and not ctx.dropped(cls.name)

    @classmethod
    def for_run(cls, ctx: RunContext) -> Measure | None:
        """This measure sized for the run, or None: not asked (``asked``), dropped (``skip_reason``) or its early
        pass not run (no ``ctx.early[name]``)."""
        if not cls.asked(ctx.cfg) or cls.skip_reason(ctx):
            return None
        if cls.early_pass is not None and cls.name not in ctx.early:
            return None
        return cls(ctx)  # type: ignore[call-arg]  # every measure is built from the run context

    @classmethod
    def skip_reason(cls, ctx: RunContext) -> str | None:
        """Why ``for_run(ctx)`` is None, in one line naming the fix (the memory plan's reason, ``ctx.dropped``,
        when the run asked for it); None when there is nothing to say."""
        return ctx.dropped(cls.name) if cls.asked(ctx.cfg) else None

    @classmethod
    def drop_reason(cls, ctx: RunContext, *, need: int, free: int, subset: list[int] | None) -> str:
        """The one line recorded in ``notes.skipped`` when the memory plan leaves it out."""
        fix = (
            f"keep fewer layers (e.g. --layers {','.join(map(str, subset))})"
            if subset
            else "use a larger device or fewer --layers"
        )
        return (
            f"{cls.name} skipped: needs {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB left on the device after "
            f"the weights and the moments — {fix}, or a larger --memory-gb"
        )

    # ------------------------------------------------------------------ memory, from one formula
    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned | None:
        """{key: (shape, dtype)} of the state after the whole pass, for a run that asks for it. None (this
        default): not declared — the memory plan counts nothing for it and says so (``MemoryPlan.unknown``)."""
        return None

    @classmethod
    def planned_sizes(cls, ctx: RunContext) -> dict[str, int] | None:
        """{key: prod(shape) · itemsize} over ``planned_state`` (None when the class does not declare its state)."""
        planned = cls.planned_state(ctx)
        if planned is None:
            return None
        return {
            k: int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize for k, (shape, dtype) in planned.items()
        }

    @classmethod
    def planned_bytes(cls, ctx: RunContext) -> int | None:
        """Σ ``planned_sizes`` (0 when the run does not ask for it; None when the class does not declare its
        state)."""
        if not cls.asked(ctx.cfg):
            return 0
        size = cls.planned_sizes(ctx)
        return None if size is None else sum(size.values())

    @classmethod
    def planned_terms(cls, ctx: RunContext) -> list[str]:
        """``planned_state`` as ``normvar plan`` prints it: "key L×T×d float64" per array, largest first, until
        they hold 99 % of the bytes; the rest counted ("+ 5 smaller arrays")."""
        planned = cls.planned_state(ctx) or {}
        size = cls.planned_sizes(ctx) or {}
        out: list[str] = []
        held, total = 0, sum(size.values())
        for k in sorted(planned, key=lambda k: -size[k]):
            if held >= 0.99 * total and out:
                rest = len(planned) - len(out)
                return out + [f"+ {rest} smaller array{'s' if rest > 1 else ''}"]
            out.append(f"{k} {'×'.join(f'{n:,}' for n in planned[k][0])} {np.dtype(planned[k][1]).name}")
            held += size[k]
        return out

    splits_view: ClassVar[bool] = False
    """Its update asks the layer views for a row split (``LayerMajor.view_split``): the view then holds the parts'
    Gram products and their sum (``LayerView.view_bytes``)."""

    @classmethod
    def update_bytes(cls, ctx: RunContext, n: int, rows: int) -> int:
        """Bytes its ``update`` of a batch of ``n`` counted tokens in ``rows`` sentences holds at its peak beyond its
        state, the batch's states and the shared layer view (by default 0: sums into the state in place). An upper
        bound, checked against the measured peak by ``tests/test_update_memory.py``."""
        return 0

    @classmethod
    def update_held(cls, ctx: RunContext, n: int, rows: int) -> int:
        """The part of ``update_bytes`` it keeps from one layer's update to the next, while the other measures
        update (by default 0)."""
        return 0

    @classmethod
    def publish_bytes(cls, ctx: RunContext) -> int:
        """Bytes its ``result()`` and ``tables()`` hold at publish beyond the state, at their peak (by default 0:
        a result of a few numbers per layer, tables built from the state without a copy)."""
        return 0

    # ------------------------------------------------------------------ the pass and the result
    @abstractmethod
    def update(self, batch: StateBatch) -> None: ...

    @classmethod
    def from_state_dict(cls, state: dict[str, np.ndarray], ctx: RunContext) -> Measure:
        measure = cls.for_run(ctx)
        if measure is None:
            raise ValueError(f"measure {cls.name!r} is not enabled for this run")
        measure.load_state_dict(state)
        return measure

    @abstractmethod
    def result(self) -> Any: ...

    def take_results(self, results: dict[str, Any]) -> None:
        """Receive the results named in ``uses_results`` (those the run has) before ``result()``."""

    def take_states(self, measures: dict[str, Measure]) -> None:
        """Receive the measures named in ``uses_states`` (those the run has), after the pass, before ``result()``."""

    @abstractmethod
    def tables(self, result: Any, ctx: RunContext) -> dict[str, Any]:
        """{table name: pyarrow.Table} for the run file (names from ``table_names``)."""

    def tables_written(self, ctx: RunContext) -> tuple[str, ...]:
        """The tables this run's ``tables`` gives (publish lists them before the results exist): by default all
        of ``table_names``; a measure with a table only some runs have narrows it (the moments' ``word_units``)."""
        return self.table_names

    @classmethod
    def null_tables(cls, run, kind: str, stats, null, *, seed: int, search=None) -> dict[str, Any]:
        """{table name: pyarrow.Table (or an iterator of them, as ``tables`` may give)} of the Gaussian null of
        ``run`` for this measure: the tables of ``table_names`` that the null run holds, drawn from the null, seeded
        by ``seed`` alone. {} (this default): the measure has no null. ``write_null_run`` asks only the measures
        whose tables ``run`` holds.

        ``run``: the published run (``runs.reader.Run``); ``kind``: one of ``constants.NULL_KINDS``; ``stats``: the
        run's per-type moments (``run.stats()``, a ``stats.tokenstats.TokenStats``); ``null``: the null's per-type
        moments, the ``stats.null.null_stats(kind, stats, run.layer_stats(), seed=seed)`` draw every measure's null
        is built on (the moments are the null's own, the rest is drawn given them); ``search``: the TwoNN candidate
        search (``geometry.host_search`` from the CLI and the worker; numpy's when None)."""
        return {}

    def run_meta(self, result: Any) -> dict:
        """Extra notes for the run row (JSON), e.g. counts or reasons a part was skipped."""
        return {}

    def sentence_ids(self, result: Any) -> set[int]:
        """Sentences this measure's tables point at: their text goes to the run's ``sentences`` table."""
        return set()


class EarlyPass(ABC):
    """A measure's pass over some of the run's batches before the measures are built (``Measure.early_pass``).

    ``start`` builds it for a run; ``run`` pools batches from the source until ``finished``, calling
    ``on_batch(self)`` after each whole batch (``done`` counts them); ``state_dict`` / ``load_state_dict`` make an
    unfinished one a checkpoint's ``<measure>_early`` entry (numpy arrays only); ``result()`` goes to
    ``ctx.early[name]``, which the measure's constructor reads. ``planned`` is its memory, from the plan alone:
    ``running_bytes`` (held while it runs, freed before the measures are built: the memory plan counts the
    larger of Σ running and Σ planned state), ``held_bytes`` (what it leaves the source for the pass, held
    through it), ``positions`` and ``batches``. A checkpoint of the pass keeps ``checkpoint_meta(result)`` in its
    meta, and ``from_checkpoint`` gives the result back from the measure's saved state and that meta, so a
    resumed pass does not run it again."""

    label: ClassVar[str] = "the early pass"
    """What it computes, in words (the progress line's detail)."""

    done: int = 0

    @classmethod
    @abstractmethod
    def planned(cls, ctx: RunContext, *, device: str | None = None) -> dict[str, int]:
        """{"running_bytes", "held_bytes", "positions", "batches"} on ``device`` (default ``ctx.device``)."""

    @classmethod
    @abstractmethod
    def start(cls, ctx: RunContext, source, *, reuse: bool) -> EarlyPass:
        """A fresh pass for the run (``reuse``: it may leave the batches it ran to ``source`` for the pass)."""

    @property
    @abstractmethod
    def finished(self) -> bool: ...

    @abstractmethod
    def run(self, *, on_batch=None) -> None:
        """Pool batches after the ``done`` ones until ``finished``."""

    @abstractmethod
    def state_dict(self) -> dict[str, np.ndarray]: ...

    @abstractmethod
    def load_state_dict(self, state: dict) -> EarlyPass: ...

    @abstractmethod
    def result(self) -> Any: ...

    @classmethod
    def checkpoint_meta(cls, result: Any) -> dict:
        """Meta entries a checkpoint of the pass keeps for ``from_checkpoint`` (``result`` None: not run)."""
        return {}

    @classmethod
    def from_checkpoint(cls, state: dict, meta: dict, ctx: RunContext) -> Any:
        """The result back from the measure's checkpointed ``state`` and the checkpoint's ``meta``, or None."""
        return None


__all__ = ["Measure", "EarlyPass", "Planned"]
