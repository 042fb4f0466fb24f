"""numba kernels of TwoNN's streaming neighbour search on the CPU (``pipeline.measures.twonn_stream``).

One block: rows i (new kept rows) against columns j (kept rows of their TwoNN batch, the rows themselves
the last ``own`` columns), from the float32 Gram products g_ij. Each pair's lower bound
lo = ‖a‖²(1 − c) + ‖b‖²(1 − c) − 2 g_ij is formed in float64 (so the only rounding left is the float32
Gram product's and norms', which c covers), and a pair is a candidate when lo is at most its row's or
its column's threshold — the torch search's rule with a tighter threshold (a row's second smallest upper
bound hi = d² + e per pair, not the block's largest e), the rows' own pairs met once, and each row read
twice while in cache (its threshold, its candidates) instead of a dozen passes over the whole block.
``insert_pairs`` then updates both sides' two nearest with the pairs' exact float64 distances.
``context_candidates`` and ``row_pair_squares`` do the same for TwoNN's context measures
(``stats.twonn_context``): each row's thresholds of its three searches (all rows, its own sentence, other
sentences) in one pass over its Gram distances and its candidates in a second, then the candidates' float64
squares without gathering copies. Compiled on first use, cached on disk.
"""

from __future__ import annotations

import numba
import numpy as np

_MARGIN = 1.0 + 1e-6  # a threshold from a float64 r₂: 1e-6 above its rounding (as the torch search)


@numba.njit(cache=True, nogil=True, inline="always")
def _min2(m1, m2, v):  # pragma: no cover
    """The two smallest of (m1 ≤ m2) and v."""
    if v < m2:
        if v < m1:
            return v, m1
        return m1, v
    return m1, m2


@numba.njit(cache=True, nogil=True)
def _row_threshold(G, hr, hc, cskip, row_r2, own, l, i, c1, c2):  # pragma: no cover
    """min(row i's second smallest hi, r₂(row)² (1 + 1e-6)); with c1, c2 (non-empty) each column's two
    smallest hi updated on the way. Without c1, 8 lanes of running (smallest, second smallest), min/max
    only (so it vectorises), merged at the end: hc must then be infinite at the skipped columns."""
    n = G.shape[2]
    mine = n - own + i if own else -1
    m1 = np.inf
    m2 = np.inf
    if c1.size:
        for j in range(n):
            if cskip[l, j] or j == mine:
                continue
            v = hr[l, i] + hc[l, j] - 2.0 * np.float64(G[l, i, j])
            m1, m2 = _min2(m1, m2, v)
            c1[j], c2[j] = _min2(c1[j], c2[j], v)
        return min(m2, row_r2[l, i] * row_r2[l, i] * _MARGIN)
    a1 = np.full(8, np.inf)
    a2 = np.full(8, np.inf)
    if mine >= 0:
        _lanes(hr[l, i], hc[l], G[l, i], 0, mine, a1, a2)
        _lanes(hr[l, i], hc[l], G[l, i], mine + 1, n, a1, a2)
    else:
        _lanes(hr[l, i], hc[l], G[l, i], 0, n, a1, a2)
    for u in range(8):
        m1, m2 = _min2(m1, m2, a1[u])
        m1, m2 = _min2(m1, m2, a2[u])
    return min(m2, row_r2[l, i] * row_r2[l, i] * _MARGIN)


@numba.njit(cache=True, nogil=True, inline="always")
def _lanes(h, hl, g, start, stop, a1, a2):  # pragma: no cover
    """hi = h + hl[j] − 2 g[j] for j in [start, stop) into 8 lanes of running (smallest, second smallest);
    hl is infinite at skipped columns."""
    j = start
    while j + 8 <= stop:
        for u in range(8):
            v = h + hl[j + u] - 2.0 * np.float64(g[j + u])
            a2[u] = min(a2[u], max(a1[u], v))
            a1[u] = min(a1[u], v)
        j += 8
    while j < stop:
        v = h + hl[j] - 2.0 * np.float64(g[j])
        a2[0] = min(a2[0], max(a1[0], v))
        a1[0] = min(a1[0], v)
        j += 1


@numba.njit(cache=True, nogil=True)
def _old_pairs(G, br, bc, cskip, row_t, col_t, own, l, i, out_i, out_j, k):  # pragma: no cover
    """Row i's candidates among the old columns (j < n − own): lo ≤ the row's or the column's threshold;
    written while they fit; returns the count so far."""
    t = row_t[l, i]
    for j in range(G.shape[2] - own):
        if cskip[l, j]:
            continue
        v = br[l, i] + bc[l, j] - 2.0 * np.float64(G[l, i, j])
        if v <= t or v <= col_t[l, j]:
            if k < out_i.size:
                out_i[k] = i
                out_j[k] = j
            k += 1
    return k


@numba.njit(cache=True, nogil=True)
def _own_pairs(G, br, bc, rskip, row_t, own, l, out_i, out_j, k):  # pragma: no cover
    """The rows' pairs among themselves, once each (row i < row i'): lo ≤ either row's threshold."""
    first_own = G.shape[2] - own
    for i in range(own):
        if rskip[l, i]:
            continue
        for i2 in range(i + 1, own):
            if rskip[l, i2]:
                continue
            v = br[l, i] + bc[l, first_own + i2] - 2.0 * np.float64(G[l, i, first_own + i2])
            if v <= row_t[l, i] or v <= row_t[l, i2]:
                if k < out_i.size:
                    out_i[k] = i
                    out_j[k] = first_own + i2
                k += 1
    return k


@numba.njit(parallel=True, cache=True, nogil=True)
def block_candidates(G, br, bc, hr, hc, rskip, cskip, row_r2, col_r2, own, out_i, out_j):  # pragma: no cover
    """One block, threads taking whole layers. G (L, m, n) float32 Gram products of the rows against the
    columns (the rows the last ``own`` columns); lo = br_i + bc_j − 2 g and hi = hr_i + hc_j − 2 g (float64)
    bound each pair's squared distance below and above. Thresholds: row_t[l, i] = min(the row's second
    smallest hi, r₂(row)² (1 + 1e-6)); col_t[l, j] = r₂(column)² (1 + 1e-6), where that is infinite
    min(the column's second smallest hi, it), −inf for the rows' own columns. Copies (rskip / cskip) and a
    row's own column are never pairs. Where no column needs the block's bound, each row's candidates are
    taken right after its threshold (the row still in cache). The candidates go to out_i[l], out_j[l] as
    many as fit (``block_pairs`` takes them all when some did not); returns (row_t, col_t, counts per layer)."""
    L, m, n = G.shape
    inf = np.inf
    row_t = np.full((L, m), -inf)
    col_t = np.empty((L, n))
    counts = np.zeros(L, np.int64)
    first_own = n - own
    for l in numba.prange(L):
        need = False
        for j in range(n):
            col_t[l, j] = -inf if j >= first_own else col_r2[l, j] * col_r2[l, j] * _MARGIN
            if col_t[l, j] == inf and not cskip[l, j]:
                need = True
        c1 = np.full(n if need else 0, inf)
        c2 = np.full(n if need else 0, inf)
        k = 0
        for i in range(m):
            if not rskip[l, i]:
                row_t[l, i] = _row_threshold(G, hr, hc, cskip, row_r2, own, l, i, c1, c2)
                if not need:
                    k = _old_pairs(G, br, bc, cskip, row_t, col_t, own, l, i, out_i[l], out_j[l], k)
        if need:
            for j in range(first_own):
                col_t[l, j] = min(c2[j], col_t[l, j])
            for i in range(m):
                if not rskip[l, i]:
                    k = _old_pairs(G, br, bc, cskip, row_t, col_t, own, l, i, out_i[l], out_j[l], k)
        counts[l] = _own_pairs(G, br, bc, rskip, row_t, own, l, out_i[l], out_j[l], k)
    return row_t, col_t, counts


@numba.njit(parallel=True, cache=True, nogil=True)
def block_pairs(G, br, bc, rskip, cskip, own, row_t, col_t, out_i, out_j, start):  # pragma: no cover
    """Every candidate of ``block_candidates`` (when some did not fit), layer l's at out[start[l]:start[l+1]]."""
    for l in numba.prange(G.shape[0]):
        oi, oj = out_i[start[l] : start[l + 1]], out_j[start[l] : start[l + 1]]
        k = 0
        for i in range(G.shape[1]):
            if not rskip[l, i]:
                k = _old_pairs(G, br, bc, cskip, row_t, col_t, own, l, i, oi, oj, k)
        _own_pairs(G, br, bc, rskip, row_t, own, l, oi, oj, k)


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


@numba.njit(parallel=True, cache=True, nogil=True)
def pair_squares(sample, pl, pp, pq, out):  # pragma: no cover
    """out[k] = (x_p − x_q)² elementwise in float64 for the float32 rows (l, p), (l, q) of pair k: the
    same values as torch's ``(a.double() − b.double()).square()``, summed by torch (the same sum as a brute
    force's), without its float32 gathers and float64 copies."""
    d = sample.shape[2]
    for k in numba.prange(pl.size):
        a = sample[pl[k], pp[k]]
        b = sample[pl[k], pq[k]]
        for j in range(d):
            v = np.float64(a[j]) - np.float64(b[j])
            out[k, j] = v * v


@numba.njit(cache=True, nogil=True)
def _context_pass(d2, at, g, masked, own_group, t, out):  # pragma: no cover
    """One pass of ``context_candidates`` over every row: the candidates counted, and written while ``out`` has room."""
    k = np.zeros(3, np.int64)
    cap = out.shape[2]
    for i in range(d2.shape[0]):
        gi = g[at[i]] if masked else 0
        for j in range(d2.shape[1]):
            v = d2[i, j]
            if not np.isfinite(v):
                continue
            if masked:
                if g[j] == gi:
                    if own_group and j != at[i] and v <= t[i, 1]:
                        if k[1] < cap:
                            out[1, 0, k[1]] = i
                            out[1, 1, k[1]] = j
                        k[1] += 1
                elif v <= t[i, 2]:
                    if k[2] < cap:
                        out[2, 0, k[2]] = i
                        out[2, 1, k[2]] = j
                    k[2] += 1
            if v <= t[i, 0]:
                if k[0] < cap:
                    out[0, 0, k[0]] = i
                    out[0, 1, k[0]] = j
                k[0] += 1
    return k


@numba.njit(cache=True, nogil=True)
def context_candidates(d2, at, g, s2, masked, own_group, every=True):  # pragma: no cover
    """The candidate pairs of ``twonn_context.context_neighbours`` for one block of rows, in two passes over each
    row instead of a partition, masks and a nonzero per search: d2 (b, m) float32 squared Gram distances (inf at
    each row's own column at[i]), g (m,) the groups (read when ``masked``), s2 (b,) float32 = 2 × the row's slack.
    Per row: t_all = its second smallest d2, t_own = its smallest over the other rows of its group (``own_group``),
    t_cross = its second smallest over other groups (inf where a row has fewer); a pair (i, j) is a candidate of
    a search when d2_ij is finite and at most that search's t + s2_i (float32, as numpy's ``t + 2 * slack``).
    ``every`` False: the search over all rows is not made (no pairs).
    Returns the three searches' pairs, (3, 2, n) int64 with their counts (3,), in row-major order."""
    b = d2.shape[0]
    inf = np.float32(np.inf)
    t = np.full((b, 3), inf, np.float32)
    for i in range(b):
        a1 = inf
        a2 = inf
        o1 = inf
        c1 = inf
        c2 = inf
        gi = g[at[i]] if masked else 0
        for j in range(d2.shape[1]):
            v = d2[i, j]
            a1, a2 = _min2(a1, a2, v)
            if masked:
                if g[j] == gi:
                    if j != at[i] and v < o1:
                        o1 = v
                else:
                    c1, c2 = _min2(c1, c2, v)
        t[i, 0] = a2 + s2[i] if every else -inf
        t[i, 1] = o1 + s2[i]
        t[i, 2] = c2 + s2[i]
    out = np.empty((3, 2, 16 * b + 64), np.int64)  # room for ~16 per row (a few are usual): one pass
    counts = _context_pass(d2, at, g, masked, own_group, t, out)
    if counts.max() > out.shape[2]:  # more: a second pass with room for all
        out = np.empty((3, 2, counts.max()), np.int64)
        _context_pass(d2, at, g, masked, own_group, t, out)
    return out, counts


@numba.njit(cache=True, nogil=True)
def row_pair_squares(X, p, q, out):  # pragma: no cover
    """out[k] = (x_p − x_q)² elementwise in float64 for the float32 rows p[k], q[k] of X: the same values as
    ``np.square(a.astype(float64) − b.astype(float64))``, without its gathers and float64 copies (numpy sums
    them, as ``twonn_context.pair_distance``)."""
    for k in range(p.size):
        a = X[p[k]]
        b = X[q[k]]
        for j in range(X.shape[1]):
            v = np.float64(a[j]) - np.float64(b[j])
            out[k, j] = v * v


__all__ = ["pair_squares", "block_candidates", "block_pairs", "insert_pairs", "context_candidates", "row_pair_squares"]
