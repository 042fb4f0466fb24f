"""Chan, Golub & LeVeque's pooled update of (count, mean, sum of squared deviations), shared by the
accumulators that stream a mean and a second moment:

    n = n_a + n_b,  δ = μ_b − μ_a,  μ = μ_a + δ n_b / n,  S = S_a + S_b + δδᵀ n_a n_b / n   (or δ² per coordinate)

``outer=True`` pools a d×d scatter (δδᵀ), else per-coordinate sums (δ²)."""
from __future__ import annotations

import torch


def pool_into(mean: torch.Tensor, m2: torch.Tensor, n_a: int, mean_b: torch.Tensor, m2_b: torch.Tensor, n_b: int,
              *, outer: bool) -> None:
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


__all__ = ["pool_into"]
