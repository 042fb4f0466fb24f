"""numba kernels of TwoNN's streaming neighbour search on the CPU (``pipeline.accumulators.twonn_stream``).

One block: rows i (new kept rows) against columns j (kept rows of their TwoNN batch, the rows themselves
the last ``own`` columns), from the float32 Gram products g_ij. Each pair's lower bound
lo = ‖a‖²(1 − c) + ‖b‖²(1 − c) − 2 g_ij is formed in float64 (so the only rounding left is the float32
Gram product's and norms', which c covers), and a pair is a candidate when lo is at most its row's or
its column's threshold — the same rule as the torch search, in three passes over each row that stays in
cache (the row's two smallest lo; the count; the pairs) instead of a dozen passes over the whole block.
``insert_pairs`` then updates both sides' two nearest with the pairs' exact float64 distances.
Compiled on first use, cached on disk.
"""
from __future__ import annotations

import numba
import numpy as np

_MARGIN = 1.0 + 1e-6  # a threshold from a float64 r₂: 1e-6 above its rounding (as the torch search)


@numba.njit(cache=True, nogil=True, inline="always")
def _lo(G, br, bc, l, i, j):  # pragma: no cover
    return br[l, i] + bc[l, j] - 2.0 * np.float64(G[l, i, j])


@numba.njit(parallel=True, cache=True, nogil=True)
def block_thresholds(G, br, bc, rskip, cskip, row_r2, col_r2, own, emax):  # pragma: no cover
    """Per layer l (threads take whole layers): row_t[l, i] = min(second smallest lo of row i + emax,
    r₂(row)² (1 + 1e-6)); col_t[l, j] = r₂(column)² (1 + 1e-6), where that is infinite the column's second
    smallest lo + emax, −inf for the rows' own columns (their pairs are met in the rows); counts[l, i] the
    candidates of row i. Skipped rows / columns (copies) and a row's own column are never pairs."""
    L, m, n = G.shape
    inf = np.inf
    row_t = np.empty((L, m))
    col_t = np.empty((L, n))
    counts = np.zeros((L, m), np.int64)
    first_own = n - own
    for l in numba.prange(L):
        need = False
        for j in range(n):
            if j >= first_own:
                col_t[l, j] = -inf
            else:
                col_t[l, j] = col_r2[l, j] * col_r2[l, j] * _MARGIN
                if col_t[l, j] == inf and not cskip[l, j]:
                    need = True
        c1 = np.full(n, inf)
        c2 = np.full(n, inf)
        for i in range(m):
            if rskip[l, i]:
                row_t[l, i] = -inf
                continue
            m1 = inf
            m2 = inf
            mine = first_own + i if own else -1
            for j in range(n):
                if cskip[l, j] or j == mine:
                    continue
                v = _lo(G, br, bc, l, i, j)
                if v < m2:
                    if v < m1:
                        m2 = m1
                        m1 = v
                    else:
                        m2 = v
                if need and v < c2[j]:
                    if v < c1[j]:
                        c2[j] = c1[j]
                        c1[j] = v
                    else:
                        c2[j] = v
            row_t[l, i] = min(m2 + emax, row_r2[l, i] * row_r2[l, i] * _MARGIN)
        if need:
            for j in range(first_own):
                col_t[l, j] = min(c2[j] + emax, col_t[l, j])
        for i in range(m):
            if rskip[l, i]:
                continue
            mine = first_own + i if own else -1
            t = row_t[l, i]
            k = 0
            for j in range(n):
                if cskip[l, j] or j == mine:
                    continue
                v = _lo(G, br, bc, l, i, j)
                if v <= t or v <= col_t[l, j]:
                    k += 1
            counts[l, i] = k
    return row_t, col_t, counts


@numba.njit(parallel=True, cache=True, nogil=True)
def block_pairs(G, br, bc, rskip, cskip, own, row_t, col_t, start, out_l, out_i, out_j):  # pragma: no cover
    """The candidates counted by ``block_thresholds``, row (l, i)'s at out[start[l·m + i]:]: (l, i, j)."""
    L, m, n = G.shape
    first_own = n - own
    for task in numba.prange(L * m):
        l = task // m
        i = task % m
        if rskip[l, i]:
            continue
        mine = first_own + i if own else -1
        t = row_t[l, i]
        k = start[task]
        for j in range(n):
            if cskip[l, j] or j == mine:
                continue
            v = _lo(G, br, bc, l, i, j)
            if v <= t or v <= col_t[l, j]:
                out_l[k] = l
                out_i[k] = i
                out_j[k] = j
                k += 1


@numba.njit(cache=True, nogil=True, inline="always")
def _insert(r, nn, l, p, q, dist):  # pragma: no cover
    """q at ``dist`` into p's two nearest (r ascending); a neighbour already held is not taken twice."""
    if nn[l, p, 0] == q or nn[l, p, 1] == q:
        return
    if dist < r[l, p, 0]:
        r[l, p, 1] = r[l, p, 0]
        nn[l, p, 1] = nn[l, p, 0]
        r[l, p, 0] = dist
        nn[l, p, 0] = q
    elif dist < r[l, p, 1]:
        r[l, p, 1] = dist
        nn[l, p, 1] = q


@numba.njit(cache=True, nogil=True)
def insert_pairs(r, nn, pl, pp, pq, dist):  # pragma: no cover
    """Both sides' two nearest (r (L, K, 2) float64 ascending, nn their rows) updated with the pairs
    (pl, pp, pq) at their exact distances: the two smallest distances to distinct rows, whatever the order."""
    for k in range(pl.size):
        _insert(r, nn, pl[k], pp[k], pq[k], dist[k])
        _insert(r, nn, pl[k], pq[k], pp[k], dist[k])


__all__ = ["block_thresholds", "block_pairs", "insert_pairs"]
