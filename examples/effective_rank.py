"""The effective rank of every kept layer: a complete measure in one file (the walk-through of docs/measures.md).

For the covariance C = S / n of a layer's counted embeddings, with eigenvalues λ_1 ≥ … ≥ λ_d ≥ 0 (Roy &
Vetterli 2007, eq. 1–2)::

    p_i = λ_i / Σ_j λ_j,    H(p) = −Σ_i p_i log p_i,    erank(C) = exp H(p)

erank is 1 when one direction holds all the variance and d when every direction holds the same share: how many
directions a layer's embeddings really use, read beside the geometry's anisotropy and IsoScore.

The state is the shared covariance of ``pipeline/measures/covariance.py`` (n, the mean and the scatter S of every
kept layer, pooled by Chan's exact update), folded from the layer view that the geometry, the outliers and the
halves share, so a checkpoint, a resumed run and a Ray run hold it with no code here. The measure declares its
table and its curve; the run file carries both, so the dashboard's Geometry page and the deck draw it.

Registered with one line, where the run's measures are listed::

    registry = MEASURES + (EffectiveRankMeasure,)

``tests/test_effective_rank.py`` checks it against a float64 brute force over every embedding of a real run.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures.base import Planned
from normvar_core.pipeline.measures.covariance import Covariance
from normvar_core.pipeline.measures.layerview import LayerMajor
from normvar_core.runs.declared import LayerCurve


def effective_rank(eigenvalues: np.ndarray) -> float:
    """exp H(p), p_i = λ_i / Σλ over the non-negative eigenvalues (rounding's negative ones read as 0); NaN
    for a zero covariance."""
    lam = np.clip(np.asarray(eigenvalues, dtype=np.float64), 0.0, None)
    total = lam.sum()
    if total <= 0:
        return float("nan")
    p = lam[lam > 0] / total
    return float(np.exp(-(p * np.log(p)).sum()))


class EffectiveRankMeasure(LayerMajor):
    """erank of every kept layer's covariance (module docstring)."""

    name = "effective_rank"
    title = "effective rank"
    table_names = ("layer_effective_rank",)
    curves = (
        LayerCurve(
            table="layer_effective_rank",
            column="effective_rank",
            title="Effective rank per layer",
            y_title="effective rank exp H(λ / Σλ)",
            description="How many directions a layer's embeddings use: 1 when one direction holds "
            "all the variance, d when every direction holds the same share (Roy & "
            "Vetterli 2007).",
        ),
    )
    policy = "a d × d covariance per kept layer (8·L·d² bytes): a run short of memory leaves it out"

    def __init__(self, ctx: RunContext):
        super().__init__(ctx)  # layers, device, scatter dtype
        self.cov = Covariance(self, (ctx.num_layers, ctx.dim), device=self.device)

    @classmethod
    def may_drop(cls, cfg) -> bool:
        return True  # as large as the geometry's covariances: never worth a run that does not fit

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """n, then per layer the mean (d) and the scatter (d × d): 8·L·d² + 8·L·d + 8 bytes."""
        return Covariance.planned(ctx.num_layers, ctx.dim)

    def update_layer(self, l: int, view, batch) -> None:
        self.cov.fold(l, view)

    def result(self) -> dict[str, np.ndarray]:
        covariance = self.cov.covariance().cpu().numpy()
        return {
            "layer": np.asarray(self.layers, np.int64),
            "effective_rank": np.array([effective_rank(np.linalg.eigvalsh(c)) for c in covariance]),
        }

    def tables(self, result, ctx: RunContext) -> dict[str, pa.Table]:
        return {"layer_effective_rank": pa.table(result)}
