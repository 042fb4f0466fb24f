"""Exact k nearest neighbours within one batch of float32 rows (numpy; the candidates' float64 distances by the
numba kernel ``twonn_kernels.row_pair_distances``).

For every row i of X its k nearest other rows, ranked by the float64 distance ‖x_i − x_j‖ of the float32 rows,
ties by the smaller row index; with ``groups``, also its k nearest rows of *other* groups (its own sentence
masked, as ``twonn_id_cross``). Candidates come from the float32 Gram distance
d² = ‖a‖² + ‖b‖² − 2 a·b, whose rounding is at most s_i = (2d + 24) u (‖a‖² + max ‖b‖²) (u = 2⁻²⁴, the
bound of ``twonn_context.context_neighbours``): the true k-th smallest d² of a row is at most its float32 k-th
smallest plus s_i, so every pair with float32 d² ≤ that + 2 s_i is re-ranked by its float64 distance, and the
result equals a brute-force float64 search over all (allowed) pairs. One Gram block serves both searches.
"""
from __future__ import annotations

import numpy as np


CHUNK = 512  # rows of one block (CHUNK x m float32 distances)


def _kth(d2: np.ndarray, k: int) -> np.ndarray:
    """The k-th smallest of each row (inf where a row has fewer finite entries)."""
    kk = min(k, d2.shape[1])
    if kk == 0:
        return np.full(d2.shape[0], np.inf, np.float32)
    return np.partition(d2, kk - 1, axis=1)[:, kk - 1]


def _take(X32: np.ndarray, at: np.ndarray, d2: np.ndarray, k: int, slack2: np.ndarray,
          dist: np.ndarray, idx: np.ndarray) -> None:
    """Rows ``at``'s k nearest columns (finite d2 only) into ``dist``/``idx`` (ascending, ties by index)."""
    thr = np.minimum(_kth(d2, k) + slack2, np.finfo(np.float32).max)  # never an infinite (masked) entry
    i, j = np.nonzero(d2 <= thr[:, None])
    if not i.size:
        return
    from normvar_core.stats.twonn_kernels import row_pair_distances  # numba: not imported by the pages' readers

    r = np.empty(i.size)
    row_pair_distances(X32, np.ascontiguousarray(at[i], np.int64), np.ascontiguousarray(j, np.int64), r)
    order = np.lexsort((j, r, i))
    i, j, r = i[order], j[order], r[order]
    first = np.r_[True, i[1:] != i[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(i.size), 0))
    rank = np.arange(i.size) - start
    keep = rank < k
    dist[i[keep], rank[keep]] = r[keep]
    idx[i[keep], rank[keep]] = j[keep]


def nearest_k(X: np.ndarray, k: int, groups: np.ndarray | None = None, chunk: int = CHUNK):
    """((dist, idx), (dist_cross, idx_cross) or None): for every row of X (m, d), its k nearest other rows,
    (m, k) float64 distances ascending and their row indices (ties by the smaller index; inf / −1 past the rows
    there are), and with ``groups`` (m,) the same over the rows of other groups only."""
    X32 = np.ascontiguousarray(X, np.float32)
    m, d = X32.shape
    sq64 = np.einsum("ij,ij->i", X32.astype(np.float64), X32.astype(np.float64))
    sq = sq64.astype(np.float32)
    c = (2 * d + 24) * 2.0 ** -24 * 1.02
    out = (np.full((m, k), np.inf), np.full((m, k), -1, np.int64))
    cross = (np.full((m, k), np.inf), np.full((m, k), -1, np.int64)) if groups is not None else None
    g = None if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1].reshape(-1)
    inf = np.float32(np.inf)
    smax = sq64.max() if m else 0.0
    for a in range(0, m, chunk):
        at = np.arange(a, min(m, a + chunk))
        d2 = X32[at] @ X32.T
        d2 *= -2
        d2 += sq[at, None]
        d2 += sq[None, :]
        d2[np.arange(at.size), at] = inf
        slack2 = 2 * (c * (sq64[at] + smax)).astype(np.float32)
        _take(X32, at, d2, k, slack2, out[0][a:a + at.size], out[1][a:a + at.size])
        if cross is not None:
            d2[g[at, None] == g[None, :]] = inf
            _take(X32, at, d2, k, slack2, cross[0][a:a + at.size], cross[1][a:a + at.size])
    return out, cross


__all__ = ["nearest_k", "CHUNK"]
