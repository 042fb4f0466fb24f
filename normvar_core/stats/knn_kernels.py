"""numba kernel of the exact k-NN search (``stats.knn``): every search of one block of rows in one pass per row.

For row r of a block (sample row ``at[r]``) and its float32 Gram distances d2[r, :] to every row of the batch, up to
four searches are run at once, each over its own columns:

* 0 — every other row; 1 — the rows of other groups (``g[j] ≠ g[i]``);
* 2, 3 — the same over the rows with ``first[j]`` only (each distinct row's first copy), for rows i that are such a
  first copy themselves (the search on the distinct rows, as GRIDE and TwoNN drop copies).

Each search's threshold is its k-th smallest d2 plus the row's rounding bound ``slack2[r]`` (float32 max where there
are fewer than k columns: every column is a candidate). The searches' columns nest, so one bound on the k-th
smallest of the narrowest (``_bound``: the k-th smallest of 4k column groups' minima) and one pass keep the few
columns under it plus the slack, and each search's k-th smallest is an in-place selection among those (``_select``).
The union of the searches' candidates has its float64 distance computed once (the squares of the float32 rows'
float64 differences, summed in one vectorized loop: equal rows get equal bits), sorted once (stable: ties by the
smaller column) and dealt to the searches it belongs to, each keeping its k smallest. Blocks of rows run in
parallel, each on its own scratch arrays.
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


@numba.njit(cache=True, nogil=True)
def _select(a, n, k):  # pragma: no cover
    """The k-th smallest (from 0) of a[:n], no NaN among them, found in place (Hoare's selection, the median of three
    as the pivot): numpy's ``partition`` copies its input, which costs more than the selection on a row's few hundred
    values."""
    lo, hi = 0, n - 1
    while lo < hi:
        x, y, z = a[lo], a[(lo + hi) >> 1], a[hi]
        if (x <= y) == (y <= z):
            p = y
        elif (y <= x) == (x <= z):
            p = x
        else:
            p = z
        i, j = lo, hi
        while i <= j:
            while a[i] < p:
                i += 1
            while a[j] > p:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return a[k]
    return a[k]


GROUPS_PER_K = 4  # a row's columns fall in GROUPS_PER_K · k groups (j mod that) for the bound of its k-th smallest


@numba.njit(cache=True, nogil=True)
def _bound(d2, r, i, g, first, search, k, mins):  # pragma: no cover
    """An upper bound on the k-th smallest float32 d2[r, j] over the columns j of ``search`` (inf where there are
    fewer than k): the k-th smallest of the minima of G = ``mins.size`` column groups (j mod G), whose groups hold k
    distinct allowed columns at most that value. One pass over the row, the search's mask a select per column (no
    branch on the value), and a selection among the G minima; G = 4k leaves about k + k²/2G columns under the bound."""
    m = d2.shape[1]
    G = mins.size
    inf32 = np.float32(np.inf)
    gi = g[i]
    for q in range(G):
        mins[q] = inf32
    for a in range(0, m, G):
        for q in range(min(G, m - a)):
            j = a + q
            v = d2[r, j]
            if search == 1:
                v = v if g[j] != gi else inf32
            elif search == 2:
                v = v if first[j] else inf32
            elif search == 3:
                v = v if first[j] and g[j] != gi else inf32
            v = v if j != i else inf32
            if v < mins[q]:  # NaN never is: not a candidate
                mins[q] = v
    return _select(mins, G, k - 1)


@numba.njit(cache=True, nogil=True)
def _candidates(d2, r, i, g, first, searches, k, slack2r, mins, near, near_j, buf, thr, cj, bits):  # pragma: no cover
    """Row r's candidates into ``cj`` (columns ascending; their count returned) and ``bits`` (bit s set where the
    candidate belongs to search s of ``searches``): every allowed column within its search's k-th smallest float32
    d2 plus ``slack2r``. The searches' columns nest (3 within 1 and 2, each within 0), so the last search the row
    runs has the largest k-th smallest: one bound T of it (``_bound``) and one pass keep the columns ≤ T + slack2r
    (``near``, ``near_j``), and every search's k-th smallest is an in-place selection (``_select``) among its allowed
    columns of those.
    ``mins`` (``GROUPS_PER_K`` · k), ``near``, ``near_j``, ``buf`` (m) and ``thr`` (S) are scratch."""
    S = searches.size
    m = d2.shape[1]
    inf32 = np.float32(np.inf)
    fmax = np.float32(np.finfo(np.float32).max)
    last = 0
    for s in range(S):
        if searches[s] < 2 or first[i]:
            last = s
    top = min(np.float32(_bound(d2, r, i, g, first, searches[last], k, mins) + slack2r), fmax)
    n_near = 0
    for j in range(m):
        v = d2[r, j]
        if v <= top and j != i:  # inf and NaN never are
            near[n_near] = v
            near_j[n_near] = j
            n_near += 1
    thr[:] = -inf32
    for s in range(last + 1):
        n = 0
        for q in range(n_near):
            if _allowed(searches[s], i, near_j[q], g, first):
                buf[n] = near[q]
                n += 1
        thr[s] = min(np.float32(_select(buf, n, k - 1) + slack2r), fmax) if n >= k else fmax
    n = 0
    for q in range(n_near):
        v, j = near[q], near_j[q]
        hit = np.uint8(0)
        for s in range(last + 1):
            if v <= thr[s] and _allowed(searches[s], i, j, g, first):
                hit |= np.uint8(1 << s)
        if hit:
            cj[n] = j
            bits[n] = hit
            n += 1
    return n


ROWS_PER_TASK = 16  # rows of a block one thread takes at a time (sharing its scratch arrays)


@numba.njit(parallel=True, cache=True, nogil=True)
def knn_block(X32, at, d2, slack2, g, first, searches, dist, idx):  # pragma: no cover
    """Rows ``at`` (b) of X32 against every row (m): ``d2`` (b, m) their float32 Gram distances (non-finite entries are
    no candidates); ``searches`` (S,) the searches run (numbers 0–3 above); out ``dist``/``idx`` (S, b, k), filled
    ascending (float64 distance, then column) where a row has neighbours: the caller fills them with inf / −1 first.
    A row's candidates are sorted once (stable: ties keep column order) and dealt to the searches they belong to."""
    S = searches.size
    b, m = d2.shape
    k = dist.shape[2]
    for task in numba.prange((b + ROWS_PER_TASK - 1) // ROWS_PER_TASK):
        mins, near, near_j = np.empty(GROUPS_PER_K * k, np.float32), np.empty(m, np.float32), np.empty(m, np.int64)
        buf = np.empty(m, np.float32)
        cj, bits, cd = np.empty(m, np.int64), np.empty(m, np.uint8), np.empty(m)
        thr, filled = np.empty(S, np.float32), np.empty(S, np.int64)
        for r in range(task * ROWS_PER_TASK, min(b, (task + 1) * ROWS_PER_TASK)):
            i = at[r]
            n = _candidates(d2, r, i, g, first, searches, k, slack2[r], mins, near, near_j, buf, thr, cj, bits)
            _distances(X32, i, cj, n, cd)
            order = np.argsort(cd[:n], kind="mergesort")
            filled[:] = 0
            for q in range(n):
                c = order[q]
                for s in range(S):
                    if bits[c] >> s & 1 and filled[s] < k:
                        dist[s, r, filled[s]] = cd[c]
                        idx[s, r, filled[s]] = cj[c]
                        filled[s] += 1


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
