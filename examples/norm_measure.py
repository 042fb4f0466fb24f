"""A measure with state, written the way every measure of normvar is: one class (the walk-through in
docs/measures.md). Per kept layer it streams n, Σ‖x‖ and Σ‖x‖² of the counted embeddings, and reports the mean
norm E‖x‖ and the root mean square norm √E‖x‖² = √Q(X) (seed 002, eq. 8: Q(X) = E‖x‖²).

Every state is a sum, so two partial states of disjoint batches merge by adding them (``merge="sum"``, the
default), in any split and any order. ``tests/test_measure_contract.py`` runs the project's contract on this
class beside the built-in ones.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures.base import Measure, Planned


class NormMeasure(Measure):
    """Mean and RMS norm of every kept layer's embeddings."""

    name = "norms"
    title = "norms"
    table_names = ("layer_norms",)  # a built-in measure imports its names from runs/schema.py
    policy = "small (24·L bytes): never dropped"

    def __init__(self, ctx: RunContext):
        L = ctx.num_layers
        self.layers = list(ctx.layers)
        self._add_state("n", 0)  # a count: an int, merged by sum
        self._add_state("norm_sum", torch.zeros(L, dtype=torch.float64))  # Σ‖x‖ per layer
        self._add_state("sq_sum", torch.zeros(L, dtype=torch.float64))  # Σ‖x‖² per layer

    @classmethod
    def asked(cls, cfg: RunConfig) -> bool:
        return True  # a built-in measure reads its RunConfig switch here, e.g. ``return cfg.geometry``

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """The arrays of ``state_dict`` after the pass: 8 + 16·L bytes."""
        L = ctx.num_layers
        return {"n": ((1,), np.int64), "norm_sum": ((L,), np.float64), "sq_sum": ((L,), np.float64)}

    def update(self, batch: StateBatch) -> None:
        x = torch.as_tensor(batch.states).to(torch.float64)  # (L, N, d), in float64 whatever the model's dtype
        sq = (x * x).sum(dim=2)  # (L, N): ‖x‖²
        self.n += batch.size
        self.norm_sum += sq.sqrt().sum(dim=1)
        self.sq_sum += sq.sum(dim=1)

    def result(self) -> dict[str, np.ndarray]:
        n = max(self.n, 1)
        return {
            "layer": np.asarray(self.layers, np.int64),
            "mean_norm": self.norm_sum.numpy() / n,
            "rms_norm": np.sqrt(self.sq_sum.numpy() / n),
        }

    def tables(self, result, ctx: RunContext) -> dict[str, pa.Table]:
        return {"layer_norms": pa.table(result)}
