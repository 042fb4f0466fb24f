"""The run without its first position: per kept layer, the exact mean and covariance of every counted embedding
except those at position 0, so that a decoder's attention sink (the first position's massive activations, Sun et
al. 2024) can be read with and without it from one run.

For a batch's layer view (n rows, float64 mean μ and scatter S about it, the geometry's own) and its n₀ rows at
position 0 (mean μ₀, scatter S₀, formed from those rows in float64), the other n_r = n − n₀ rows have::

    μ_r = (n μ − n₀ μ₀) / n_r,    S_r = S − S₀ − δδᵀ · n₀ n_r / n,    δ = μ₀ − μ_r

(Chan, Golub & LeVeque's pooling read backwards), pooled into the state by the same update (``Covariance``):
exact under any split of the batches. The first position's rows are one per sentence, so S₀ costs n₀ d² per
layer and batch, a few per cent of the view's own scatter. Float64 keeps the subtraction's rounding at
ε ‖S‖: at SmolLM2's first-token norms (≈ 2.3e4 against ≈ 1e2 elsewhere) about 1e-9 of the rest's spectrum.

Results per kept layer (``layer_position0``): the embeddings without position 0 (``n_rest``) and at it
(``n_position0``), the anisotropy λ₁ / Σλ of the rest's covariance (the geometry's ``anisotropy`` without position
0: Razzhigaev et al. 2024 §2.3) and Q(X) = ‖μ_r‖² + tr(S_r) / n_r without it. On with the geometry; a run that
excludes position 0 (``--exclude-position0``) has no such rows, and does not hold it. Its d × d per layer is as
large as the geometry's covariance, so a run short of memory may leave it out.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures.base import Planned
from normvar_core.pipeline.measures.covariance import Covariance
from normvar_core.pipeline.measures.layerview import LayerMajor, LayerView
from normvar_core.runs.declared import LayerCurve
from normvar_core.stats.layer_geometry import spectrum


def without_rows(n: int, mean, scatter, x0) -> tuple[int, torch.Tensor, torch.Tensor]:
    """(n_r, μ_r, S_r) of a block of n rows (float64 mean and scatter) less its rows ``x0`` (module docstring)."""
    n0 = int(x0.shape[0])
    mean, scatter = mean.to(torch.float64), scatter.to(torch.float64)
    if n0 == 0:
        return n, mean, scatter
    n_r = n - n0
    x0 = x0.to(torch.float64)
    mean0 = x0.mean(0)
    if n_r == 0:
        return 0, torch.zeros_like(mean), torch.zeros_like(scatter)
    c0 = x0 - mean0
    mean_r = (mean * n - mean0 * n0) / n_r
    delta = mean0 - mean_r
    return n_r, mean_r, scatter - c0.T @ c0 - torch.outer(delta, delta) * (n0 * n_r / n)


class Position0Measure(LayerMajor):
    """The covariance of every counted embedding but position 0's, per kept layer (module docstring)."""

    n_position0: int  # registered state (``_add_state``): the rows at position 0, one count for all layers

    name = "position0"
    title = "the run without its first position"
    table_names = ("layer_position0",)
    curves = (
        LayerCurve(
            table="layer_position0",
            column="anisotropy_without_position0",
            title="Anisotropy without position 0",
            y_title="λ₁ / Σλ without position 0",
            description="The anisotropy of every counted embedding but the first position's: a decoder's attention "
            "sink (Sun et al. 2024) read out of the curve beside it.",
        ),
    )
    policy = "a d × d float64 scatter per kept layer (8·L·d² bytes): a run short of memory leaves it out"

    def __init__(self, ctx: RunContext):
        super().__init__(ctx)  # layers, device, scatter dtype
        L, d = ctx.num_layers, ctx.dim
        self.cov = Covariance(self, (L, d), device=self.device)  # n, mean, scatter of the rest
        self._add_state("n_position0", 0)
        self._first: torch.Tensor = torch.zeros(0, dtype=torch.bool)

    @classmethod
    def asked(cls, cfg: RunConfig) -> bool:
        return cfg.geometry and not cfg.exclude_position0

    @classmethod
    def may_drop(cls, cfg: RunConfig) -> bool:
        return True

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """The rest's count, means and scatters (8·L·d² + 8·L·d + 8 bytes) and the first position's count."""
        return {**Covariance.planned(ctx.num_layers, ctx.dim), "n_position0": ((1,), np.int64)}

    @classmethod
    def update_bytes(cls, ctx: RunContext, n: int, rows: int) -> int:
        """The batch's first rows (one per sentence) as taken, in float64 and centred (20·rows·d), and the scatter
        without them: their Gram product, the difference, its correction and Chan's outer product (4·8·d²)."""
        return 20 * rows * ctx.dim + 4 * 8 * ctx.dim**2

    def begin_batch(self, batch) -> None:
        self._first = batch.positions == 0

    def update_layer(self, l: int, view: LayerView, batch) -> None:
        first = self._first.to(view.x.device)
        n_r, mean_r, scatter_r = without_rows(view.n, view.mean, view.scatter, view.x[first])
        self.cov.pool(l, n_r, mean_r.to(self.device), scatter_r.to(self.device))

    def end_batch(self, batch) -> None:
        self.n_position0 += int(self._first.sum())

    def result(self) -> dict[str, np.ndarray]:
        n, means, scatters = self.cov.n, self.cov.mean.cpu().numpy(), self.cov.scatter.cpu().numpy()
        aniso, q = np.full(len(self.layers), np.nan), np.full(len(self.layers), np.nan)
        if n > 0:
            for li, (mu, S) in enumerate(zip(means, scatters)):  # one layer's eigenvalues at a time
                aniso[li] = spectrum(S).anisotropy
                q[li] = float(mu @ mu + np.trace(S) / n)
        return {
            "layer": np.asarray(self.layers, np.int64),
            "n_rest": np.full(len(self.layers), n, np.int64),
            "n_position0": np.full(len(self.layers), self.n_position0, np.int64),
            "anisotropy_without_position0": aniso,
            "q_without_position0": q,
        }

    def tables(self, result, ctx: RunContext) -> dict[str, pa.Table]:
        return {"layer_position0": pa.table(result)}
