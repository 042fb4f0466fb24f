"""The exact k-NN searches of ``stats.knn.searches`` in torch, on the device that holds the states (a GPU's run does
its neighbourhoods' search where its sample is, instead of copying it to the host).

The same rule: per block of rows, float32 Gram distances d² = ‖a‖² + ‖b‖² − 2 a·b with the rounding bound
s_i = (2d + 24) u (‖a‖² + max ‖b‖²) (u = the device's float32 matmul unit roundoff: 2⁻²⁴, or TF32's 2⁻¹¹ where
torch lets CUDA matmuls use it: the caller's ``u``); each search's candidates are the allowed columns with
d² ≤ its k-th smallest + 2 s_i, re-ranked by their float64 distance, ties by the smaller column. The lists equal the
host search's; the distances are the same float64 squares summed by the device's reduction, so they equal the host's
to float64 rounding (1e-15 relative), not bit for bit.
"""

from __future__ import annotations

import numpy as np
import torch

from normvar_core.stats.knn import CHUNK

PAIRS = 1 << 15  # candidate pairs re-ranked at a time (their float64 differences: 8·d bytes each)


def _allowed(s: int, at: torch.Tensor, g: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """(b, m) bool: the columns of search s (``stats.knn_kernels``) for rows ``at``; the own column is excluded by
    d²."""
    ok = torch.ones((at.numel(), g.numel()), dtype=torch.bool, device=g.device)
    if s >= 2:
        ok &= first[None, :] & first[at][:, None]
    if s % 2 == 1:
        ok &= g[None, :] != g[at][:, None]
    return ok


def canonical_rows(X: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(canon, firsts) of the rows of X, found where X is: ``canon[i]`` the number of row i's distinct row (bit for
    bit, −0.0 as 0.0), numbered in order of first appearance, ``firsts`` the row where each first appears — the
    geometry's ``first_copies`` without copying the rows to the host (``torch.unique`` over the rows)."""
    m = X.shape[0]
    if m == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    _, inv = torch.unique(X + 0.0, dim=0, return_inverse=True)
    at = torch.arange(m, device=X.device)
    first = torch.full((int(inv.max()) + 1,), m, dtype=torch.int64, device=X.device).scatter_reduce_(0, inv, at, "amin")
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=X.device)
    return rank[inv].cpu().numpy(), first[order].cpu().numpy()


def searches(
    X: torch.Tensor,
    k: int,
    groups: np.ndarray | None = None,
    first: np.ndarray | None = None,
    chunk: int = CHUNK,
    u: float = 2.0**-24,
) -> tuple[np.ndarray, np.ndarray]:
    """``stats.knn.searches`` of the rows X (m, d) on X's device, ``u`` its float32 matmul's unit roundoff; returns
    host arrays (S, m, k)."""
    dev = X.device
    X32 = X.to(torch.float32).contiguous()
    m, d = X32.shape
    which = [0] + ([1] if groups is not None else [])
    if first is not None:
        which += [2] + ([3] if groups is not None else [])
    sq64 = X32.double().square().sum(1)
    sq = sq64.float()
    c = (2 * d + 24) * u * 1.02
    dist = torch.full((len(which), m, k), float("inf"), dtype=torch.float64, device=dev)
    idx = torch.full((len(which), m, k), -1, dtype=torch.int64, device=dev)
    g = torch.as_tensor(
        np.zeros(m, np.int64) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1].reshape(-1),
        device=dev,
    )
    fr = torch.as_tensor(np.ones(m, bool) if first is None else np.asarray(first, bool), device=dev)
    inf = float("inf")
    fmax = torch.finfo(torch.float32).max
    smax = sq64.max() if m else sq64.new_zeros(())
    for a in range(0, m, chunk):
        at = torch.arange(a, min(m, a + chunk), device=dev)
        d2 = X32[at] @ X32.T
        d2 *= -2
        d2 += sq[at, None]
        d2 += sq[None, :]
        d2[torch.arange(at.numel(), device=dev), at] = inf
        slack2 = 2 * (c * (sq64[at] + smax)).float()
        for s_out, s in enumerate(which):
            e = torch.where(_allowed(s, at, g, fr), d2, inf)
            kth = (
                torch.topk(e, k, dim=1, largest=False).values[:, -1]
                if k <= m
                else torch.full((at.numel(),), inf, device=dev)
            )
            thr = torch.clamp_max(kth + slack2, fmax)
            i, j = torch.nonzero(e <= thr[:, None], as_tuple=True)  # row-major: each row's columns ascending
            r = (
                torch.cat(
                    [
                        (X32[at[i[p : p + PAIRS]]].double() - X32[j[p : p + PAIRS]].double()).square_().sum(-1).sqrt_()
                        for p in range(0, i.numel(), PAIRS)
                    ]
                )
                if i.numel()
                else torch.zeros(0, dtype=torch.float64, device=dev)
            )
            order = torch.argsort(r, stable=True)
            order = order[torch.argsort(i[order], stable=True)]  # by row, then distance, then column
            i, j, r = i[order], j[order], r[order]
            start = torch.searchsorted(i, i, right=False)
            rank = torch.arange(i.numel(), device=dev) - start
            keep = rank < k
            dist[s_out, a + i[keep], rank[keep]] = r[keep]
            idx[s_out, a + i[keep], rank[keep]] = j[keep]
    return dist.cpu().numpy(), idx.cpu().numpy()


__all__ = ["canonical_rows", "searches"]
