"""numba kernels of the statistics (compiled on first use; cached on disk).

Imported lazily: reading a run (``normvar show``, the dashboard) imports this module only when a
frequency band is first asked for, never at import time of ``normvar_core.stats``.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(parallel=True, cache=True, nogil=True, fastmath=True)
def update_kernel(X, order, starts, rows, n_new, mean, s_out, bounds):  # pragma: no cover
    """One pass over a batch. X (L,N,d) f32/f64; ``order`` sorts the N embeddings by type,
    group g owns order[starts[g]:starts[g+1]] and table row rows[g]; n_new[g] = n' (eq. above).
    Threads take contiguous ranges of groups (``bounds``, balanced by work) and whole rows.
    Updates ``mean`` in place; s_out[l, g] = ss - ||s1||^2 / n'. All arithmetic in float64;
    the column loops are independent lanes, so they vectorise."""
    L, N, d = X.shape
    n_chunks = bounds.shape[0] - 1
    for task in numba.prange(L * n_chunks):
        l = task // n_chunks
        ch = task % n_chunks
        s1 = np.empty(d, dtype=np.float64)
        s2 = np.empty(d, dtype=np.float64)
        for g in range(bounds[ch], bounds[ch + 1]):
            mrow = mean[l, rows[g]]
            inv_n = 1.0 / n_new[g]
            k0 = starts[g]
            k1 = starts[g + 1]
            measure = 0.0
            if k1 - k0 == 1:  # a type seen once in this batch: one fused loop
                xrow = X[l, order[k0]]
                for j in range(d):
                    dv = np.float64(xrow[j]) - np.float64(mrow[j])
                    measure += dv * dv * (1.0 - inv_n)
                    mrow[j] = np.float64(mrow[j]) + dv * inv_n
            else:
                for j in range(d):
                    s1[j] = 0.0
                    s2[j] = 0.0
                for k in range(k0, k1):
                    xrow = X[l, order[k]]
                    for j in range(d):
                        dv = np.float64(xrow[j]) - np.float64(mrow[j])
                        s1[j] += dv
                        s2[j] += dv * dv
                for j in range(d):
                    v = s1[j]
                    measure += s2[j] - v * v * inv_n
                    mrow[j] = np.float64(mrow[j]) + v * inv_n
            s_out[l, g] = measure


@numba.njit(parallel=True, cache=True, nogil=True)
def block_kernel(mean, order, n_sorted, n_orig, nb, block, c, bvec, bdev):  # pragma: no cover
    """Per layer: c = mu(X) over all types, then per block of ``block`` count-sorted types
    bvec[b+1] = sum n_t (mu_t - c) and bdev[b+1] = sum n_t ||mu_t - c||^2 (not yet cumulated)."""
    L, T, d = mean.shape
    N = 0.0
    for t in range(T):
        N += n_sorted[t]
    for l in numba.prange(L):
        for t in range(T):  # sequential rows: c = sum_t p_t mu_t (eq. 14)
            row = mean[l, t]
            w = n_orig[t] / N
            for j in range(d):
                c[l, j] += w * np.float64(row[j])
        for b in range(nb):
            measure = 0.0
            for k in range(b * block, (b + 1) * block):
                row = mean[l, order[k]]
                w = n_sorted[k]
                dev = 0.0
                for j in range(d):
                    dv = np.float64(row[j]) - c[l, j]
                    bvec[l, b + 1, j] += w * dv
                    dev += dv * dv
                measure += w * dev
            bdev[l, b + 1] = measure


@numba.njit(parallel=True, cache=True, nogil=True, fastmath=True)
def unit_sum_kernel(X, order, starts, rows, sum_u, bounds):  # pragma: no cover
    """Self-similarity's scatter-add in one pass, grouped like ``update_kernel``: for group g (the
    embeddings order[starts[g]:starts[g+1]] of table row rows[g]) sum_u[l, rows[g]] += Σ x / ‖x‖
    (zero vectors add nothing). ‖x‖ and the sum in float64, whatever X's dtype; threads own whole rows."""
    L, N, d = X.shape
    n_chunks = bounds.shape[0] - 1
    for task in numba.prange(L * n_chunks):
        l = task // n_chunks
        ch = task % n_chunks
        for g in range(bounds[ch], bounds[ch + 1]):
            srow = sum_u[l, rows[g]]
            for k in range(starts[g], starts[g + 1]):
                xrow = X[l, order[k]]
                sq = 0.0
                for j in range(d):
                    v = np.float64(xrow[j])
                    sq += v * v
                if sq > 0.0:
                    w = 1.0 / np.sqrt(sq)
                    for j in range(d):
                        srow[j] += np.float64(xrow[j]) * w


@numba.njit(parallel=True, cache=True, nogil=True, fastmath=True)
def row_sq_kernel(x, out):  # pragma: no cover
    """out[i] = ‖x_i‖² = Σ_j x_ij² for the rows of x (N, d) f32/f64, in float64, read in place (no
    float64 copy of x)."""
    N, d = x.shape
    for i in numba.prange(N):
        measure = 0.0
        for j in range(d):
            v = np.float64(x[i, j])
            measure += v * v
        out[i] = measure


@numba.njit(cache=True, nogil=True)
def abs_at_least_kernel(x, tau, max_abs, out):  # pragma: no cover
    """One pass over x (N, d) f32/f64, read in place (no |x| copy): max_abs[j] = max(max_abs[j],
    max_i |x_ij|) in float64, NaN once any |x_ij| or max_abs[j] is NaN (as torch.maximum); the flat
    indices i·d + j of the entries with |x_ij| >= tau go to ``out`` while it has room. Returns their
    count (> len(out): call again with a larger ``out``; max_abs is idempotent)."""
    N, d = x.shape
    cap = out.shape[0]
    col_max = np.zeros(d, dtype=np.float64)
    col_nan = np.zeros(d, dtype=np.bool_)
    count = 0
    for i in range(N):
        for j in range(d):
            v = abs(np.float64(x[i, j]))
            if v > col_max[j]:
                col_max[j] = v
            elif v != v:
                col_nan[j] = True
            if v >= tau:
                if count < cap:
                    out[count] = i * d + j
                count += 1
    for j in range(d):
        if col_nan[j]:
            max_abs[j] = np.nan
        elif col_max[j] > max_abs[j]:
            max_abs[j] = col_max[j]
    return count


def type_groups(ids: np.ndarray, n_threads: int | None = None):
    """The grouping both kernels take: ``order`` (a stable sort of ``ids``), group ``starts`` (G + 1),
    the sorted unique ids and ``bounds``: contiguous ranges of groups per thread, balanced by work
    (rows + one per group), two per thread."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    first = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    uniq = sorted_ids[first]
    starts = np.append(first, ids.size).astype(np.int64)
    counts = np.diff(starts)
    work = np.cumsum(counts + 1)
    n_chunks = max(1, min((n_threads or numba.get_num_threads()) * 2, uniq.size))
    cuts = np.searchsorted(work, np.linspace(0, work[-1], n_chunks + 1)[1:-1])
    bounds = np.concatenate(([0], cuts, [uniq.size])).astype(np.int64)
    return order, starts, uniq, bounds
