"""numba kernel of the exact k-NN search (``stats.knn``): every search of one block of rows in one pass per row.

For row r of a block (sample row ``at[r]``) and its float32 Gram distances d2[r, :] to every row of the batch, up to
four searches are run at once, each over its own columns:

* 0 — every other row; 1 — the rows of other groups (``g[j] ≠ g[i]``);
* 2, 3 — the same over the rows with ``first[j]`` only (each distinct row's first copy), for rows i that are such a
  first copy themselves (the search on the distinct rows, as GRIDE and TwoNN drop copies).

Each search's threshold is its k-th smallest d2 (``_kth``: found by group minima and a partition) plus the
row's rounding bound ``slack2[r]`` (float32 max where there are fewer than k columns: every column is a candidate). The
union of the searches' candidates has its float64 distance computed once (the squares of the float32 rows' float64
differences summed in coordinate order: the bits of a brute force's plain loop), and each search keeps its k smallest,
ties by the smaller column (a stable sort of the candidates, read in column order). Rows run in parallel.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def _allowed(s, i, j, g, first):  # pragma: no cover
    """Column j belongs to search s of row i (its own column never)."""
    if j == i:
        return False
    if s >= 2 and not first[j]:
        return False
    return not (s % 2 == 1 and g[j] == g[i])


@numba.njit(cache=True, nogil=True)
def _distances(X32, i, cj, n, cd):  # pragma: no cover
    """cd[q] = ‖x_i − x_cj[q]‖ for q < n: float64 squares summed in coordinate order (the bits of a plain loop), four
    columns at a time (four independent sums in flight instead of one chain of dependent additions)."""
    a = X32[i]
    d = X32.shape[1]
    q = 0
    while q + 4 <= n:
        b0, b1, b2, b3 = X32[cj[q]], X32[cj[q + 1]], X32[cj[q + 2]], X32[cj[q + 3]]
        t0 = t1 = t2 = t3 = 0.0
        for e in range(d):
            x = np.float64(a[e])
            w0 = x - np.float64(b0[e])
            w1 = x - np.float64(b1[e])
            w2 = x - np.float64(b2[e])
            w3 = x - np.float64(b3[e])
            t0 += w0 * w0
            t1 += w1 * w1
            t2 += w2 * w2
            t3 += w3 * w3
        cd[q], cd[q + 1], cd[q + 2], cd[q + 3] = np.sqrt(t0), np.sqrt(t1), np.sqrt(t2), np.sqrt(t3)
        q += 4
    while q < n:
        b0 = X32[cj[q]]
        t0 = 0.0
        for e in range(d):
            w0 = np.float64(a[e]) - np.float64(b0[e])
            t0 += w0 * w0
        cd[q] = np.sqrt(t0)
        q += 1


@numba.njit(cache=True, nogil=True)
def _kth(d2, r, i, g, first, search, k, vals, mins, buf):  # pragma: no cover
    """The k-th smallest float32 d2[r, j] over the columns j of ``search`` (inf where fewer than k): the minima of
    k column groups (j mod k) are k distinct columns, so their largest T bounds the k-th smallest from above, and
    the k-th smallest of the columns at most T is the k-th smallest of all. Three plain passes over the row (the
    allowed values, the group minima, the columns ≤ T) and a partition of those (about a sixth of the row)."""
    m = d2.shape[1]
    inf32 = np.float32(np.inf)
    gi = g[i]
    if search == 0:  # one branch-free loop per search: each one vectorizes
        for j in range(m):
            vals[j] = d2[r, j]
    elif search == 1:
        for j in range(m):
            vals[j] = d2[r, j] if g[j] != gi else inf32
    elif search == 2:
        for j in range(m):
            vals[j] = d2[r, j] if first[j] else inf32
    else:
        for j in range(m):
            vals[j] = d2[r, j] if first[j] and g[j] != gi else inf32
    vals[i] = inf32  # its own column never
    for q in range(k):
        mins[q] = inf32
    for a in range(0, m, k):
        for q in range(min(k, m - a)):
            v = vals[a + q]
            if v < mins[q]:  # NaN never is: not a candidate
                mins[q] = v
    top = mins.max()
    n = 0
    for j in range(m):
        v = vals[j]
        if v <= top and v < inf32:
            buf[n] = v
            n += 1
    if n < k:
        return inf32
    return np.partition(buf[:n], k - 1)[k - 1]


@numba.njit(cache=True, nogil=True)
def _candidates(d2, r, i, g, first, searches, k, slack2r):  # pragma: no cover
    """Row r's candidates (columns ascending, their count) and which search each belongs to (S, m): every column
    within its search's k-th smallest float32 d2 (``_kth``) plus ``slack2r``."""
    S = searches.size
    m = d2.shape[1]
    inf32 = np.float32(np.inf)
    fmax = np.float32(np.finfo(np.float32).max)
    vals, mins, buf = np.empty(m, np.float32), np.empty(k, np.float32), np.empty(m, np.float32)
    thr = np.full(S, -inf32)
    for s in range(S):
        if searches[s] < 2 or first[i]:
            thr[s] = min(np.float32(_kth(d2, r, i, g, first, searches[s], k, vals, mins, buf) + slack2r), fmax)
    cj = np.empty(m, np.int64)
    member = np.zeros((S, m), np.bool_)
    n = 0
    tmax = thr.max()
    for j in range(m):
        v = d2[r, j]
        if not v <= tmax:
            continue
        hit = False
        for s in range(S):
            if v <= thr[s] and _allowed(searches[s], i, j, g, first):
                member[s, n] = True
                hit = True
        if hit:
            cj[n] = j
            n += 1
    return cj, n, member


@numba.njit(parallel=True, cache=True, nogil=True)
def knn_block(X32, at, d2, slack2, g, first, searches, dist, idx):  # pragma: no cover
    """Rows ``at`` (b) of X32 against every row (m): ``d2`` (b, m) their float32 Gram distances (non-finite entries are
    no candidates); ``searches`` (S,) the searches run (numbers 0–3 above); out ``dist``/``idx`` (S, b, k), filled
    ascending (float64 distance, then column) where a row has neighbours: the caller fills them with inf / −1 first."""
    S = searches.size
    b = d2.shape[0]
    k = dist.shape[2]
    for r in numba.prange(b):
        i = at[r]
        cj, n, member = _candidates(d2, r, i, g, first, searches, k, slack2[r])
        cd = np.empty(n)
        _distances(X32, i, cj, n, cd)
        for s in range(S):
            sel = np.flatnonzero(member[s, :n])
            order = np.argsort(cd[sel], kind="mergesort")  # stable: ties keep column order
            for q in range(min(k, order.size)):
                dist[s, r, q] = cd[sel[order[q]]]
                idx[s, r, q] = cj[sel[order[q]]]


@numba.njit(parallel=True, cache=True, nogil=True)
def shared_from(a, b, out):  # pragma: no cover
    """out[i, p] = max(p, q), q the rank in b[i] of a[i, p] (the first, a row holding each neighbour once), or
    K = a.shape[1] where it is absent or −1: a[i, p] is in both lists' first k exactly when out[i, p] < k
    (``stats.overlap.shared``)."""
    m, K = a.shape
    for i in numba.prange(m):
        for p in range(K):
            v = a[i, p]
            q = K
            if v >= 0:
                for t in range(K):
                    if b[i, t] == v:
                        q = t
                        break
            out[i, p] = max(p, q)


__all__ = ["knn_block", "shared_from"]
