"""Chan, Golub & LeVeque's pooled update of (count, mean, sum of squared deviations), shared by the
measures that stream a mean and a second moment:

    n = n_a + n_b,  δ = μ_b − μ_a,  μ = μ_a + δ n_b / n,  S = S_a + S_b + δδᵀ n_a n_b / n   (or δ² per coordinate)

``outer=True`` pools a d×d scatter (δδᵀ), else per-coordinate sums (δ²). A measure registers the triple with
``covariance.Covariance`` (one line), which declares ``Chan`` as its merge."""

from __future__ import annotations

import torch

from normvar_core.pipeline.measures.state import as_like


def pool_into(
    mean: torch.Tensor, m2: torch.Tensor, n_a: int, mean_b: torch.Tensor, m2_b: torch.Tensor, n_b: int, *, outer: bool
) -> None:
    """Pool (n_b, mean_b, m2_b) into (n_a, mean, m2) in place (the caller adds n_b to its count)."""
    if n_b == 0:
        return
    if n_a == 0:
        mean.copy_(mean_b)
        m2.copy_(m2_b)
        return
    n = n_a + n_b
    delta = mean_b - mean
    mean += delta * (n_b / n)
    m2 += m2_b + (torch.outer(delta, delta) if outer else delta * delta) * (n_a * n_b / n)


class Chan:
    """The merge rule of a registered (count, mean, second moment) triple, declared on the second
    moment's entry by ``covariance.Covariance`` (``_add_state("scatter", ..., merge=Chan(count="n", mean="mean",
    outer=True))``; the mean registered with ``merge="pooled"``, the count with ``"sum"``): per layer block,
    ``pool_into`` with the counts as they were before the merge. The incoming second moment is read
    one layer block at a time (``reader.blocks``), so a d × d scatter per layer is the largest piece."""

    def __init__(self, *, count: str, mean: str, outer: bool):
        self.count, self.mean, self.outer = count, mean, outer

    def merge(self, holder, name: str, reader) -> None:
        n_b = int(reader.get(self.count).reshape(-1)[0])
        if n_b == 0:
            return
        n_a = int(getattr(holder, self.count))
        mean, m2 = getattr(holder, self.mean), getattr(holder, name)
        mean_b = as_like(reader.get(self.mean), mean)
        for l, block in enumerate(reader.blocks(name)):
            pool_into(mean[l], m2[l], n_a, mean_b[l], as_like(block, m2), n_b, outer=self.outer)


__all__ = ["pool_into", "Chan"]
