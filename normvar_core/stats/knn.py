"""Exact k nearest neighbours within one batch of float32 rows (numpy's Gram blocks; the selection and the
candidates' float64 distances by the numba kernel ``knn_kernels.knn_block``).

For every row i of X its k nearest other rows, ranked by the float64 distance ‖x_i − x_j‖ of the float32 rows,
ties by the smaller row index; with ``groups``, also its k nearest rows of *other* groups (its own sentence
masked, as ``twonn_id_cross``). Candidates come from the float32 Gram distance
d² = ‖a‖² + ‖b‖² − 2 a·b, whose rounding is at most s_i = (2d + 24) u (‖a‖² + max ‖b‖²) (u = 2⁻²⁴, the
bound of ``twonn_context.context_neighbours``): the true k-th smallest d² of a row is at most its float32 k-th
smallest plus s_i, so every pair with float32 d² ≤ that + 2 s_i is re-ranked by its float64 distance, and the
result equals a brute-force float64 search over all (allowed) pairs. One Gram block serves every search, and a
candidate of several searches has its float64 distance computed once.
"""

from __future__ import annotations

import numpy as np

CHUNK = 512  # rows of one block (CHUNK x m float32 distances)


def searches(
    X: np.ndarray, k: int, groups: np.ndarray | None = None, first: np.ndarray | None = None, chunk: int = CHUNK
) -> tuple[np.ndarray, np.ndarray]:
    """(dist, idx), each (S, m, k): for every row of X (m, d) its k nearest rows (float64 distances ascending, ties by
    the smaller row; int32 row numbers; inf / −1 past the rows there are) in each search of ``stats.knn_kernels``:
    [0] every other row; with ``groups`` (m,), [1] the rows of other groups; with ``first`` (m,) bool, the same over
    the rows where it is True, for those rows only ([2], and [3] with groups: the search on the distinct rows when
    copies are dropped).
    One float32 Gram block of ``chunk`` rows serves every search; each block's products with the rows from its own on
    are kept (``gram_bytes``), so each pair's product is computed once and the later blocks read theirs transposed
    (the rounding bound holds for any order of a product's sum)."""
    from normvar_core.stats.knn_kernels import knn_block  # numba: not imported by the pages' readers

    X32 = np.ascontiguousarray(X, np.float32)
    m, d = X32.shape
    which = [0] + ([1] if groups is not None else [])
    if first is not None:
        which += [2] + ([3] if groups is not None else [])
    S = len(which)
    sq64 = np.einsum("ij,ij->i", X32.astype(np.float64), X32.astype(np.float64))
    sq = sq64.astype(np.float32)
    c = (2 * d + 24) * 2.0**-24 * 1.02
    dist, idx = np.full((S, m, k), np.inf), np.full((S, m, k), -1, np.int32)  # int32: a batch's rows (< 2³¹)
    g = (
        np.zeros(m, np.int64)
        if groups is None
        else np.unique(np.asarray(groups), return_inverse=True)[1].reshape(-1).astype(np.int64)
    )
    own_order = np.argsort(g, kind="stable").astype(np.int64)  # each group's rows, ascending
    own_start = np.searchsorted(g[own_order], np.arange(g.max(initial=0) + 2)).astype(np.int64)
    copies = np.empty(0, np.int64) if first is None else np.flatnonzero(~np.asarray(first, bool)).astype(np.int64)
    inf = np.float32(np.inf)
    smax = sq64.max() if m else 0.0
    run = np.asarray(which, np.int64)
    upper: list[np.ndarray] = []  # block a's products with the rows from a on: each pair's product once
    for a in range(0, m, chunk):
        at = np.arange(a, min(m, a + chunk))
        right = X32[at] @ X32[a:].T
        d2 = np.empty((at.size, m), np.float32)
        d2[:, a:] = right
        for b, block in zip(range(0, a, chunk), upper):  # the earlier blocks' products with these rows
            d2[:, b : b + block.shape[0]] = block[:, a - b : a - b + at.size].T
        upper.append(right)
        d2 *= -2
        d2 += sq[at, None]
        d2 += sq[None, :]
        d2[np.arange(at.size), at] = inf
        slack2 = 2 * (c * (sq64[at] + smax)).astype(np.float32)
        knn_block(
            X32, at, d2, slack2, own_order, own_start, g, copies, run, dist[:, a : a + at.size], idx[:, a : a + at.size]
        )
    return dist, idx


def search_bytes(m: int, k: int, cores: int) -> int:
    """The most the host memory ``searches`` holds for a batch of m rows, k deep, beside X and its Gram products
    (``gram_bytes``): the four searches' (m, k) float64 distances and int32 rows (48·k·m) and, per core, the kernel's
    scratch for its rows (``knn_kernels.knn_block``): the group minima and their keys (48·k), a row's two masked
    copies, its column codes, the candidates' columns, type bits and float64 distances (34·m), their sort order with
    the merge sort's buffer (16·m), and a row's four lists before they are copied out (48·k), for a row whose every
    column is a candidate."""
    return 48 * k * m + cores * (50 * m + 96 * k)


def gram_bytes(m: int, chunk: int = CHUNK) -> int:
    """The float32 Gram products ``searches`` holds for a batch of m rows at its peak: every block's products with
    the rows from its own on (the upper triangle, 2·m·(m + chunk)), and one block's full rows with its distances
    (4·chunk·m)."""
    return 2 * m * (m + chunk) + 4 * chunk * m


def nearest_k(X: np.ndarray, k: int, groups: np.ndarray | None = None, chunk: int = CHUNK):
    """((dist, idx), (dist_cross, idx_cross) or None): for every row of X (m, d), its k nearest other rows,
    (m, k) float64 distances ascending and their row indices (ties by the smaller index; inf / −1 past the rows
    there are), and with ``groups`` (m,) the same over the rows of other groups only (``searches`` 0 and 1)."""
    dist, idx = searches(X, k, groups=groups, chunk=chunk)
    return (dist[0], idx[0]), ((dist[1], idx[1]) if groups is not None else None)


__all__ = ["CHUNK", "gram_bytes", "nearest_k", "search_bytes", "searches"]
