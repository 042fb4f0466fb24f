"""The core contracts of the pipeline: a **state source** yields batches of hidden states, and the
measures (``pipeline/measures``: each an ``Measure``, ``measures/base.py``) consume them.

    plan (corpus -> sentences -> batches -> counts -> sample plan)       plan.py
      -> state source: StateBatch per batch                              sources.py
      -> measures: update(batch) ... merge(other) ... result()           measures/
      -> partial states merge (shards, checkpoints)                      execute/partials.py
      -> publish one run file                                            execute/publish.py

A **StateBatch** holds, for one batch of the plan, every counted position (padding dropped;
special tokens and position 0 dropped when the run asks) of every kept layer:

    states       (L, N, d)  hidden states on the source's device, in its dtype
    token_ids    (N,)       int64 token id of each position
    sentence_ids (N,)       int64 index of its sentence in the plan's sentence list
    positions    (N,)       int64 index in the model's input sequence (special tokens included,
                            padding excluded: the first real token is 0)

A batch holds **whole sentences**: the plan never cuts a sentence across batches, and a source that splits a batch
for memory (``Batch.split``: an out-of-memory retry, same ``index``) splits it between sentences; a sentence's rows
are consecutive, in position order (``StateBatch.sentence_runs``). A per-sentence measure therefore sees each
sentence whole, in one ``update``.

A **RunContext** is what a measure sizes itself from (the config, the kept layers, d, the device, the plan
and the memory plan's decisions). This module is the pipeline's core: it imports no measure.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from normvar_core.config import RunConfig

if TYPE_CHECKING:
    from normvar_core.pipeline.run_plan import RunPlan


@dataclass
class StateBatch:
    """One batch of hidden states (see the module docstring)."""

    index: int
    states: Any  # torch.Tensor (L, N, d)
    token_ids: Any  # torch.Tensor (N,) int64
    sentence_ids: Any  # torch.Tensor (N,) int64
    positions: Any  # torch.Tensor (N,) int64
    groups: Any = None  # --device-map: one (L_g, N, d) tensor per layer group on its device (states None)
    last: bool = True  # the last piece of batch ``index`` (False for the earlier pieces of a split batch)
    views: Any = None  # per layer, what an early pass's LayerView computed (``LayerView.reusable``), or None

    @property
    def size(self) -> int:
        return int(self.token_ids.shape[0])

    def sentence_runs(self) -> tuple[Any, Any]:
        """(starts, counts), int64 tensors on ``sentence_ids``' device: sentence j of the batch is rows
        ``starts[j] : starts[j] + counts[j]`` (every counted position of it, in position order: a batch holds whole
        sentences, see the module docstring)."""
        import torch

        _, counts = torch.unique_consecutive(self.sentence_ids, return_counts=True)
        return torch.cumsum(counts, 0) - counts, counts


@dataclass
class SourceInfo:
    """What a state source tells the run about itself (the run row's model columns)."""

    dim: int
    num_hidden_states: int  # L + 1 for a transformer of L blocks (0 = input embeddings)
    device: str = "cpu"
    meta: dict = field(default_factory=dict)  # run-row columns: model, architecture, norm placement, ...
    tables: dict = field(default_factory=dict)  # run-file tables the source itself publishes (norm_params)


@dataclass
class RunContext:
    """Everything a measure may need to size itself: the run's configuration, the kept
    layers, the dimension, the device and the plan (pre-counted token types, sample plan)."""

    cfg: RunConfig
    layers: list[int]  # hidden-state indices kept, ascending
    dim: int
    device: Any  # torch.device (or its name)
    plan: RunPlan
    tokens: dict = field(default_factory=dict)  # token id -> string
    memory: Any = None  # memory.MemoryPlan: what fits on the device (None: keep everything asked for)
    places: list | None = None  # --device-map: (map entry, state device) per kept layer (``execute/layer_groups.py``)
    early: dict = field(default_factory=dict)
    """{measure name: the result of its early pass} (``measures.base.EarlyPass``: computed before the measures
    are built, by every process that runs batches, or taken from a checkpoint)."""

    @property
    def num_layers(self) -> int:
        return len(self.layers)

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
        """The one-line reason the memory plan left measure ``name`` out, or None."""
        return None if self.memory is None else self.memory.reasons.get(name)


class StateSource(Protocol):
    """Anything that yields StateBatches for a range of the plan's batches."""

    info: SourceInfo

    def batches(self, plan, start: int, stop: int) -> Iterator[StateBatch]:
        """StateBatches for plan batches [start, stop), in order. A source may split a batch
        (out of memory): it then yields several StateBatches with the same ``index``."""
        ...


__all__ = ["StateBatch", "SourceInfo", "RunContext", "StateSource"]
