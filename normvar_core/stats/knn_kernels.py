"""numba kernel of the exact k-NN search (``stats.knn``): every search of one block of rows in one pass per row.

For row r of a block (sample row ``at[r]``) and its float32 Gram distances d2[r, :] to every row of the batch, up to
four searches are run at once, each over its own columns:

* 0 — every other row; 1 — the rows of other groups (``g[j] ≠ g[i]``);
* 2, 3 — the same over the rows with ``first[j]`` only (each distinct row's first copy), for rows i that are such a
  first copy themselves (the search on the distinct rows, as GRIDE and TwoNN drop copies).

Each search's threshold is a bound T on its k-th smallest d2 plus the row's rounding bound ``slack2[r]`` (float32 max
where fewer than k columns can be bounded: every column is a candidate). T is the k-th smallest of the minima of
G = 4k column groups (j mod G, ``_group_minima``: numpy's minimum over stretches of G columns, a vectorized loop),
found by bisection on the float32 bit patterns (``_kth``: branch-free counts). k groups hold a column at most T, so
T bounds the k-th smallest, and about k + k²/2G columns lie under it. A narrower search (own group masked, copies
dropped) takes the row with those columns set to inf only where one of them lies at or below the wider search's T
(``_bound``); otherwise its T is the wider one's, exactly. One branch-free pass codes every column with the searches
it is a candidate of. The union of the searches' candidates has its float64 distance computed once (the squares of
the float32 rows' float64 differences, summed in one vectorized loop: equal rows get equal bits), sorted once
(stable: ties by the smaller column) and dealt to the searches it belongs to, each keeping its k smallest. Blocks of
rows run in parallel, each on its own scratch arrays.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _distances(X32, i, cj, n, cd):  # pragma: no cover
    """cd[q] = ‖x_i − x_cj[q]‖ for q < n: the squares of the float64 differences summed in float64. One loop for every
    column, free to reassociate (``fastmath``: it vectorizes over the coordinates), so equal rows get equal bits and
    every sum is within float64 rounding (d·2⁻⁵³ relative) of a plain loop's."""
    a = X32[i]
    d = X32.shape[1]
    for q in range(n):
        b = X32[cj[q]]
        t = 0.0
        for e in range(d):
            w = np.float64(a[e]) - np.float64(b[e])
            t += w * w
        cd[q] = np.sqrt(t)


GROUPS_PER_K = 4  # a row's columns fall in GROUPS_PER_K · k groups (j mod that) for the bound of its k-th smallest


@numba.njit(cache=True, nogil=True)
def _kth(vals, keys, k):  # pragma: no cover
    """The k-th smallest (from 1) of ``vals`` (float32; NaN taken for inf), by bisection on the order-preserving
    integer keys of the float32 bit patterns (negative floats' magnitude bits flipped): 32 branch-free counts over
    the values, where a selection's swaps mispredict about every other comparison. ``keys`` (int64, as many) is
    scratch; inf where there are fewer than k values."""
    n = vals.size
    if n < k:
        return np.float32(np.inf)
    bits = vals.view(np.int32)
    for q in range(n):
        b = np.int64(bits[q]) if vals[q] == vals[q] else np.int64(0x7F800000)  # NaN: as inf
        keys[q] = b ^ ((b >> 31) & 0x7FFFFFFF)
    lo, hi = np.int64(-(2**31)), np.int64(2**31 - 1)
    while lo < hi:  # the smallest key with at least k values at or below it
        mid = (lo + hi) >> 1
        c = 0
        for q in range(n):
            c += keys[q] <= mid
        if c >= k:
            hi = mid
        else:
            lo = mid + 1
    for q in range(n):
        if keys[q] == lo:
            return vals[q] if vals[q] == vals[q] else np.float32(np.inf)  # a NaN's key is inf's
    return np.float32(np.inf)  # not reached


@numba.njit(cache=True, nogil=True)
def _group_minima(row, mins):  # pragma: no cover
    """mins[q] = the smallest row[j] over the columns j ≡ q (mod G = mins.size), inf where none (NaN where one is
    NaN: ``_kth`` takes it for inf). numpy's minimum over each stretch of G columns: a vectorized loop."""
    G = mins.size
    m = row.size
    mins[:] = np.inf
    full = m - m % G
    for a in range(0, full, G):
        np.minimum(mins, row[a : a + G], mins)
    if full < m:
        np.minimum(mins[: m - full], row[full:], mins[: m - full])


@numba.njit(cache=True, nogil=True)
def _any_at_most(row, cols, t):  # pragma: no cover
    """Whether some column of ``cols`` has row[j] ≤ t."""
    for j in cols:
        if row[j] <= t:
            return True
    return False


@numba.njit(cache=True, nogil=True)
def _bound(row, drop, t_wide, buf, mins, keys, k):  # pragma: no cover
    """T of ``row`` without the columns ``drop`` (their entries inf, in ``buf``): the k-th smallest of the G group
    minima (``_group_minima``, ``_kth``). Where no dropped column lies at or below ``t_wide`` (T of ``row`` itself)
    it is ``t_wide``: every group whose minimum is at most ``t_wide`` keeps it, so the k-th smallest is unchanged
    (``buf`` is not written then). Returns (T, the row without ``drop``: ``buf`` or ``row``)."""
    if not _any_at_most(row, drop, t_wide):
        return t_wide, row
    buf[:] = row
    buf[drop] = np.float32(np.inf)
    _group_minima(buf, mins)
    return _kth(mins, keys, k), buf


@numba.njit(cache=True, nogil=True)
def _candidates(d2, r, i, own, copies, g, searches, k, s2, mins, keys, masked, codes, cj, bits):  # pragma: no cover
    """Row r's candidates into ``cj`` (columns ascending; their count returned) and ``bits`` (bit t set where the
    candidate belongs to search type t): per search type t the row runs (those of ``searches``; types 2 and 3 only
    from a first copy, ``copies`` not holding i), every allowed finite column with d2 ≤ T_t + ``s2``, T_t the
    k-th smallest of the type's G = ``GROUPS_PER_K`` · k group minima (``_group_minima``, ``_kth``): at least k
    allowed columns lie at or below T_t, so T_t bounds the type's k-th smallest d2, and about k + k²/2G columns lie
    under it (float32 max where fewer than k groups hold one: every allowed column).
    A type's columns are the row with the others set to inf: its own column i (in ``d2`` itself, which this
    writes), the columns of ``own`` (i's group, by the group numbers ``g``) for types 1 and 3, ``copies`` for types
    2 and 3 (``_bound``: a type's minima are only taken again where a dropped column could change them).
    ``mins`` (G), ``keys`` (G), ``masked`` (2, m) and ``codes`` (m) are scratch."""
    fmax = np.float32(np.finfo(np.float32).max)
    row = d2[r]
    row[i] = np.float32(np.inf)
    run1 = run2 = run3 = False
    for s in range(searches.size):
        t = searches[s]
        if t == 1:
            run1 = True
        elif t >= 2 and not _holds(copies, i):
            run2 = True
            run3 = run3 or t == 3
    _group_minima(row, mins)
    T0 = _kth(mins, keys, k)
    T1 = T2 = T3 = T0
    if run1:
        T1 = _bound(row, own, T0, masked[0], mins, keys, k)[0]
    if run2:
        T2, distinct = _bound(row, copies, T0, masked[1], mins, keys, k)
        if run3:
            T3 = _bound(distinct, own, T2, masked[0], mins, keys, k)[0]
    none = np.float32(-np.inf)  # a type the row does not run: no column
    t0 = min(np.float32(T0 + s2), fmax)
    t1 = min(np.float32(T1 + s2), fmax) if run1 else none
    t2 = min(np.float32(T2 + s2), fmax) if run2 else none
    t3 = min(np.float32(T3 + s2), fmax) if run3 else none
    gi = g[i]
    nc = copies.size
    for j in range(row.size):  # types 2 and 3 first as if every column were a first copy
        v = row[j]
        o = g[j] != gi
        c = np.uint8(v <= t0) | (np.uint8(o & (v <= t1)) << 1) | (np.uint8(v <= t2) << 2)
        codes[j] = c | (np.uint8(o & (v <= t3)) << 3)
    for q in range(nc):  # the copies are in no type 2 or 3
        codes[copies[q]] &= np.uint8(3)
    n = 0
    for j in range(row.size):
        if codes[j]:
            cj[n] = j
            bits[n] = codes[j]
            n += 1
    return n


@numba.njit(cache=True, nogil=True)
def _holds(sorted_cols, j):  # pragma: no cover
    """Whether the ascending array ``sorted_cols`` holds j (bisection)."""
    p = np.searchsorted(sorted_cols, j)
    return p < sorted_cols.size and sorted_cols[p] == j


ROWS_PER_TASK = 16  # rows of a block one thread takes at a time (sharing its scratch arrays)


@numba.njit(parallel=True, cache=True, nogil=True)
def knn_block(X32, at, d2, slack2, own_order, own_start, g, copies, searches, dist, idx):  # pragma: no cover
    """Rows ``at`` (b) of X32 against every row (m): ``d2`` (b, m) their float32 Gram distances (scratch: each row's
    own column is set to inf; non-finite entries are no candidates); ``g`` (m,) each row's group number from 0, with
    ``own_order`` the rows in group order and ``own_start`` each group's start in it (group h's rows:
    own_order[own_start[h]:own_start[h + 1]]); ``copies`` the rows that are not a first copy, ascending;
    ``searches`` (S,) the searches run (numbers 0–3 above); out ``dist``/``idx`` (S, b, k), filled
    ascending (float64 distance, then column) where a row has neighbours: the caller fills them with inf / −1 first.
    A row's candidates are sorted once (stable: ties keep column order) and dealt to the searches they belong to."""
    S = searches.size
    b, m = d2.shape
    k = dist.shape[2]
    G = GROUPS_PER_K * k
    for task in numba.prange((b + ROWS_PER_TASK - 1) // ROWS_PER_TASK):
        mins, keys, masked = np.empty(G, np.float32), np.empty(G, np.int64), np.empty((2, m), np.float32)
        codes = np.empty(m, np.uint8)
        cj, bits, cd = np.empty(m, np.int64), np.empty(m, np.uint8), np.empty(m)
        out_d, out_i = np.empty((S, k)), np.empty((S, k), np.int32)
        for r in range(task * ROWS_PER_TASK, min(b, (task + 1) * ROWS_PER_TASK)):
            i = at[r]
            own = own_order[own_start[g[i]] : own_start[g[i] + 1]]
            n = _candidates(d2, r, i, own, copies, g, searches, k, slack2[r], mins, keys, masked, codes, cj, bits)
            _distances(X32, i, cj, n, cd)
            order = np.argsort(cd[:n], kind="mergesort")
            for s in range(S):  # each search's first k of the sorted candidates of its type
                t, f = searches[s], 0
                for q in range(n):
                    c = order[q]
                    if bits[c] >> t & 1:
                        out_d[s, f] = cd[c]
                        out_i[s, f] = cj[c]
                        f += 1
                        if f == k:
                            break
                dist[s, r, :f] = out_d[s, :f]
                idx[s, r, :f] = out_i[s, :f]


SHARED_ROWS_PER_TASK = 512  # rows of ``shared_from`` one thread takes at a time (sharing its rank table)


@numba.njit(parallel=True, cache=True, nogil=True)
def shared_from(a, b, out):  # pragma: no cover
    """out[i, p] = max(p, q), q the rank in b[i] of a[i, p] (the first, a row holding each neighbour once), or
    K = a.shape[1] where it is absent or −1: a[i, p] is in both lists' first k exactly when out[i, p] < k
    (``stats.overlap.shared``). Row i's ranks go into a table indexed by the neighbour (one per block of rows, as
    large as the largest neighbour number), read for a[i] and reset: O(K) per row, not a scan of b[i] per entry."""
    m, K = a.shape
    top = 0
    for i in range(m):
        for t in range(K):
            top = max(top, a[i, t], b[i, t])
    for task in numba.prange((m + SHARED_ROWS_PER_TASK - 1) // SHARED_ROWS_PER_TASK):
        rank = np.full(top + 1, K, np.int32)
        for i in range(task * SHARED_ROWS_PER_TASK, min(m, (task + 1) * SHARED_ROWS_PER_TASK)):
            for t in range(K - 1, -1, -1):  # backwards: the first rank of a neighbour listed twice stays
                v = b[i, t]
                if v >= 0:
                    rank[v] = t
            for p in range(K):
                v = a[i, p]
                out[i, p] = max(p, rank[v] if v >= 0 else K)
            for t in range(K):
                v = b[i, t]
                if v >= 0:
                    rank[v] = K


__all__ = ["knn_block", "shared_from"]
