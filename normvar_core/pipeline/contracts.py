"""The two contracts of the pipeline: a **state source** yields batches of hidden states, and
**accumulators** consume them.

    plan (corpus -> sentences -> batches -> counts -> sample plan)       plan.py
      -> state source: StateBatch per batch                              sources.py
      -> accumulators: update(batch) ... merge(other) ... result()       accumulators/
      -> partial states merge (shards, checkpoints)                      execute/partials.py
      -> publish one run file                                            publish.py

A **StateBatch** holds, for one batch of the plan, every counted position (padding dropped;
special tokens and position 0 dropped when the run asks) of every kept layer:

    states       (L, N, d)  hidden states on the source's device, in its dtype
    token_ids    (N,)       int64 token id of each position
    sentence_ids (N,)       int64 index of its sentence in the plan's sentence list
    positions    (N,)       int64 index in the model's input sequence (special tokens included,
                            padding excluded: the first real token is 0)

An **Accumulator** is one streamed measure, bound to its declaration (``measure``: a
``normvar_core.measure.Measure`` from ``normvar_core/measures/``), from which its ``name``, ``table_names``,
``uses_results`` and ``finalize_in_background`` come. Its contract (checked on every registered
accumulator by ``tests/test_accumulator_contract.py``):

* ``for_run(ctx) -> Accumulator | None`` builds it for a run (``None``: not wanted by this run; by default
  when the declaration's switch is off, ``Measure.asked``, or the memory plan dropped it);
  ``skip_reason(ctx)`` says why in one line naming the fix, when the run asked for it but cannot
  have it (too much memory); it goes to the run row's ``notes.skipped`` and the pages that need it;
* its state is **registered** once (``state.Stateful._add_state``: name, initial array, merge rule),
  from which ``state_dict()`` (numpy arrays only, saved with np.savez, loaded with
  allow_pickle=False), ``load_state_dict(state)``, ``from_state_dict(state, ctx)``, ``state_spec()``
  (the registered keys, shapes, dtypes = what state_dict holds; checked), ``to(device)`` and the merge
  follow; ``update(batch)`` adds a StateBatch; ``merge(other)`` / ``merge_from(reader)`` pools another
  partial state of the same run exactly (any split of the batches, any order: "two halves merged =
  one stream"), reading it one array or one layer block at a time;
* ``planned_bytes(ctx)`` the bytes its state will hold for this run (0: the run does not want it),
  before anything is built — exactly the arrays of its ``state_dict`` after the whole pass (checked);
  ``droppable(ctx)`` whether a run short of memory may leave it out (by default the declaration's
  ``Measure.may_drop`` when asked), and ``drop_reason(ctx, need=,
  free=, subset=)`` the one line saying so (``memory.plan_memory`` decides; ``ctx.memory`` holds the decision);
* ``result()`` the finished measure; ``tables(result, ctx)`` -> {table name: pyarrow.Table}
  written to the run file. ``name`` is recorded in the run row's ``accumulators`` list, so
  readers and pages ask a run what it has instead of assuming.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Protocol

import numpy as np

from normvar_core.config import RunConfig
from normvar_core.measure import Measure, all_measures
from normvar_core.pipeline.state import Stateful

if TYPE_CHECKING:
    from normvar_core.pipeline.plan import RunPlan


@dataclass
class StateBatch:
    """One batch of hidden states (see the module docstring)."""

    index: int
    states: Any          # torch.Tensor (L, N, d)
    token_ids: Any       # torch.Tensor (N,) int64
    sentence_ids: Any    # torch.Tensor (N,) int64
    positions: Any       # torch.Tensor (N,) int64
    groups: Any = None   # --device-map: one (L_g, N, d) tensor per layer group on its device (states None)
    last: bool = True    # the last piece of batch ``index`` (False for the earlier pieces of a split batch)

    @property
    def size(self) -> int:
        return int(self.token_ids.shape[0])


@dataclass
class SourceInfo:
    """What a state source tells the run about itself (the run row's model columns)."""

    dim: int
    num_hidden_states: int           # L + 1 for a transformer of L blocks (0 = input embeddings)
    device: str = "cpu"
    meta: dict = field(default_factory=dict)   # run-row columns: model, architecture, norm placement, ...
    tables: dict = field(default_factory=dict)  # run-file tables the source itself publishes (norm_params)


@dataclass
class RunContext:
    """Everything an accumulator may need to size itself: the run's configuration, the kept
    layers, the dimension, the device and the plan (pre-counted token types, sample plan)."""

    cfg: RunConfig
    layers: list[int]        # hidden-state indices kept, ascending
    dim: int
    device: Any              # torch.device (or its name)
    plan: RunPlan
    tokens: dict = field(default_factory=dict)    # token id -> string
    memory: Any = None       # memory.MemoryPlan: what fits on the device (None: keep everything asked for)
    places: list | None = None  # --device-map: (map entry, state device) per kept layer (``devicemap/layer_groups.py``)
    occurrence_axes: Any = None
    """The early axes of the occurrences (``accumulators.occurrences.early_axes``: computed from the plan's first
    batches by every process that runs batches); None: the run keeps no occurrences."""

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def _decided(self) -> dict[str, tuple[bool, bool]]:
        """{measure: (asked, may drop)} for every declared measure (``Measure.asked``, ``Measure.may_drop``),
        decided once per context from its config: the stages ask it of each accumulator several times."""
        got = self.__dict__.get("_decisions")
        if got is None:
            got = self.__dict__["_decisions"] = {m.name: (m.asked(self.cfg), m.may_drop(self.cfg))
                                                 for m in all_measures()}
        return got

    def asks(self, name: str) -> bool:
        """Whether the run's config asks for measure ``name`` (False for a name no measure declares)."""
        return self._decided().get(name, (False, False))[0]

    def may_drop(self, name: str) -> bool:
        """Whether a run short of memory may leave measure ``name`` out (its declaration's ``may_drop``)."""
        return self._decided().get(name, (False, False))[1]

    @property
    def num_types(self) -> int:
        """T: the plan's counted token types."""
        return int(self.plan.token_ids.size)

    @property
    def mean_bytes(self) -> int:
        """Bytes of one stored per-type mean coordinate: 4 with ``--mean-dtype float32``, else 8."""
        return 4 if self.cfg.mean_dtype == "float32" else 8

    @property
    def torch_device(self):
        import torch

        return torch.device(self.device) if self.device is not None else torch.device("cpu")

    def dropped(self, name: str) -> str | None:
        """The one-line reason the memory plan left accumulator ``name`` out, or None."""
        return None if self.memory is None else self.memory.reasons.get(name)


class StateSource(Protocol):
    """Anything that yields StateBatches for a range of the plan's batches."""

    info: SourceInfo

    def batches(self, plan, start: int, stop: int) -> Iterator[StateBatch]:
        """StateBatches for plan batches [start, stop), in order. A source may split a batch
        (out of memory): it then yields several StateBatches with the same ``index``."""
        ...


class Accumulator(Stateful, ABC):
    """One streamed measure (see the module docstring for the contract). Its state is registered
    (``state.Stateful._add_state``): ``state_dict``, ``load_state_dict``, ``merge`` and device moves follow."""

    measure: ClassVar[Measure]
    """The declaration (``normvar_core/measures/<name>.py``); the class attributes below come from it."""
    name: ClassVar[str]
    table_names: ClassVar[tuple[str, ...]] = ()
    planned_exact: ClassVar[bool] = True  # planned_bytes is the state's size (False: an upper bound of it)

    def __init_subclass__(cls, **kwargs) -> None:
        """A class that sets ``measure`` takes its name, tables, used results and background finalize from it."""
        super().__init_subclass__(**kwargs)
        m = cls.__dict__.get("measure")
        if m is not None:
            cls.name, cls.table_names, cls.uses_results, cls.finalize_in_background = (m.name, m.tables, m.uses,
                                                                                       m.background)

    @classmethod
    def for_run(cls, ctx: RunContext) -> "Accumulator | None":
        """This accumulator sized for the run, or None if the run does not want it: its declared switch is
        off (``Measure.asked``) or the memory plan left it out (``skip_reason``)."""
        if not ctx.asks(cls.name) or cls.skip_reason(ctx):
            return None
        return cls(ctx)

    @classmethod
    def skip_reason(cls, ctx: RunContext) -> str | None:
        """Why ``for_run(ctx)`` is None, in one line naming the fix; None when there is nothing to say. By
        default the memory plan's reason (``ctx.dropped``) when the run asked for the measure."""
        return ctx.dropped(cls.name) if ctx.asks(cls.name) else None

    @classmethod
    def planned_bytes(cls, ctx: RunContext) -> int | None:
        """Bytes of this accumulator's state for the run (the README's "Memory" formula), 0 when the run
        does not want it; computed from the plan before anything is allocated. None (this default): not
        declared — the memory plan counts nothing for it and says so (``MemoryPlan.unknown``); every
        registered accumulator declares it (``tests/test_accumulator_contract.py``)."""
        return None

    @classmethod
    def droppable(cls, ctx: RunContext) -> bool:
        """True when a run short of memory may leave this accumulator out (and say why): asked for, and
        droppable by its declaration (``Measure.may_drop``: ``Memory.droppable``, and ``auto`` where the switch
        has one)."""
        return ctx.asks(cls.name) and ctx.may_drop(cls.name)

    @classmethod
    def drop_reason(cls, ctx: RunContext, *, need: int, free: int, subset: list[int] | None) -> str:
        """The one line recorded in ``notes.skipped`` when the memory plan leaves it out."""
        fix = (f"keep fewer layers (e.g. --layers {','.join(map(str, subset))})" if subset
               else "use a larger device or fewer --layers")
        return (f"{cls.name} skipped: needs {need / 2**30:.1f} GB, {free / 2**30:.1f} GB left on the device after "
                f"the weights and the moments — {fix}, or a larger --memory-gb")

    @abstractmethod
    def update(self, batch: StateBatch) -> None:
        ...

    @classmethod
    def from_state_dict(cls, state: dict[str, np.ndarray], ctx: RunContext) -> "Accumulator":
        acc = cls.for_run(ctx)
        if acc is None:
            raise ValueError(f"accumulator {cls.name!r} is not enabled for this run")
        acc.load_state_dict(state)
        return acc

    @abstractmethod
    def result(self) -> Any:
        ...

    finalize_in_background: ClassVar[bool] = False
    """True when ``result()`` is slow and needs nothing of another result (the geometry: spectra, TwoNN):
    publish finishes it in its own thread and writes its tables last."""

    uses_results: ClassVar[tuple[str, ...]] = ()
    """Names of accumulators whose results this one's ``result()`` may reuse (computed once): publish hands
    them over through ``take_results`` first when the run holds them."""

    def take_results(self, results: dict[str, Any]) -> None:
        """Receive the results named in ``uses_results`` (those the run has) before ``result()``."""

    @abstractmethod
    def tables(self, result: Any, ctx: RunContext) -> dict[str, Any]:
        """{table name: pyarrow.Table} for the run file (names from ``table_names``)."""

    def tables_written(self, ctx: RunContext) -> tuple[str, ...]:
        """The tables this run's ``tables`` gives (publish lists them before the results exist): by default all
        of ``table_names``; a measure with a table only some runs have narrows it (the moments' ``word_units``)."""
        return self.table_names

    def run_meta(self, result: Any) -> dict:
        """Extra notes for the run row (JSON), e.g. counts or reasons a part was skipped."""
        return {}

    def sentence_ids(self, result: Any) -> set[int]:
        """Sentences this accumulator's tables point at: their text goes to the run's ``sentences``
        table (one table for every accumulator, holding only the sentences something points at)."""
        return set()


__all__ = ["StateBatch", "SourceInfo", "RunContext", "StateSource", "Accumulator"]
