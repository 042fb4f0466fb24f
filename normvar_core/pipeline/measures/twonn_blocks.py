"""One Gram block of the streaming TwoNN search (``twonn_stream.NeighbourState._search``): a search's candidate
pairs, read from the block's float32 Gram product a·b (computed once, read by the batch's search and each
decimated subset's) — on the CPU by numba's passes over it (``stats.twonn_kernels``), elsewhere by torch ops over
the whole block, one search's lower bounds at a time — then their exact float64 distances and both sides' two
nearest updated.

A pair (row, column) is a candidate when its lower bound lo = d² − e (e = 2(d + 4) u (‖a‖² + ‖b‖²), the float32
Gram product's rounding) is at most the row's or the column's threshold: its current r₂² (1 + 1e-6), and for a row
(or a column without two neighbours yet) an upper bound of the block's second smallest d²; skipped rows and
columns (copies, rows below a decimated subset's level) are never pairs. So no pair that can be among a row's two
nearest is missed, and the result equals a brute-force float64 search.
"""

from __future__ import annotations

import numpy as np
import torch

PAIR_CHUNK = 1 << 16  # pairs re-ranked in float64 at a time
CPU_PAIR_CHUNK = 1 << 12  # the same on the CPU (a 12 MiB float64 buffer at d = 384)
CPU_ROW_PAIRS = 16  # room per row for a CPU block's candidates (≈ 4 a row measured on MiniLM)


def candidates_cpu(G, sqr, sqc, rskip, cskip, r, rows, cols, own, c):
    """(layer, row, column) of the block's candidate pairs for one search (``stats.twonn_kernels.block_candidates``;
    per pair lo = d² − e and hi = d² + e, e from its own norms, with the 1 % margin of the torch path's emax;
    rskip / cskip: the rows and columns it skips; r: its (r₁, r₂)). The small gathers in numpy: torch's two
    threads cost milliseconds per op on the shared cores."""
    from normvar_core.stats.twonn_kernels import block_candidates, block_pairs  # numba, on the CPU path only

    L, m = G.shape[0], rows.size
    sr, sc = sqr.numpy().astype(np.float64), sqc.numpy().astype(np.float64)
    br, bc, hr, hc = sr * (1 - c), sc * (1 - c), sr * (1 + 1.02 * c), sc * (1 + 1.02 * c)
    r2 = r.numpy()[:, :, 1]
    hc[cskip] = np.inf  # skipped columns (copies, rows below the level) are no neighbours
    cap = CPU_ROW_PAIRS * m + 16  # room for the pairs of most blocks (else ``block_pairs``)
    out_i, out_j = np.empty((L, cap), np.int64), np.empty((L, cap), np.int64)
    row_t, col_t, counts = block_candidates(
        G, br, bc, hr, hc, rskip, cskip, r2[:, rows], r2[:, cols], own, out_i, out_j
    )
    if counts.max() <= out_i.shape[1]:
        keep = np.arange(out_i.shape[1]) < counts[:, None]
        i, j = out_i[keep], out_j[keep]
    else:  # some did not fit: all of them, each layer's at its offset
        start = np.concatenate([[0], np.cumsum(counts)])
        i, j = np.empty(int(start[-1]), np.int64), np.empty(int(start[-1]), np.int64)
        block_pairs(G, br, bc, rskip, cskip, own, row_t, col_t, i, j, start)
    return np.repeat(np.arange(L), counts), i, j


def candidates_torch(rt, ct, G, sqr, sqc, rskip, cskip, r, own, c):
    """(layer, row, column) of the block's candidate pairs for one search, from torch ops over the whole block:
    G (L, rows, columns) the block's float32 Gram product a·b, computed once for all searches; this search's
    lower bounds lo = ‖a‖²(1 − c) + ‖b‖²(1 − c) − 2 a·b (one more block, freed on return) carry its own infinite
    biases for the rows and columns it skips."""
    emax = 2.02 * c * (sqr.amax() + sqc.amax())  # e's largest value in the block, its own margin 1 %
    m, n = rt.numel(), ct.numel()
    inf = float("inf")
    # skipped rows and columns (copies, rows below the level) are no neighbours: an infinite bias
    br = torch.where(rskip, inf, sqr * (1 - c))
    bc = torch.where(cskip, inf, sqc * (1 - c))
    lo = torch.add(bc[:, None, :], G, alpha=-2.0).add_(br[:, :, None])  # −2 a·b exact, then two float32 adds
    if own:
        i = torch.arange(own, device=G.device)
        lo[:, m - own + i, n - own + i] = inf
    # thresholds rounded up: 1e-6 above float32's relative rounding
    big = torch.finfo(torch.float32).max
    row_t = torch.minimum(_second(lo, 2) + emax, r[:, rt, 1].square().mul_(1 + 1e-6).float())
    col_t = r[:, ct, 1].square().mul_(1 + 1e-6).float()
    if own:  # the rows' own columns: their pairs are met in the rows already
        col_t[:, n - own :] = -inf
    if torch.isinf(col_t).any() and col_t.max() == inf:  # columns without two neighbours yet: the block's bound
        col_t = torch.minimum(_second(lo, 1) + emax, col_t)
    take = (lo <= row_t.clamp_max_(big)[:, :, None]) | (lo <= col_t.clamp_max_(big)[:, None, :])
    return torch.nonzero(take, as_tuple=True)


def update_cpu(sample: torch.Tensor, found: list) -> None:
    """``update_torch`` on the CPU for the candidates of one block's searches, ``found`` [(r, nn, l, p, q)]: the same
    exact distances (``pair_squares`` then torch's sum, as ``exact_distance``), computed for all of them at once,
    then each search's two nearest updated pair by pair (``insert_pairs``: a neighbour already held is not
    taken twice, so a pair met twice counts once)."""
    from normvar_core.stats.twonn_kernels import insert_pairs, pair_squares  # numba, on the CPU path only

    l, p, q = (np.concatenate([f[i] for f in found]) for i in (2, 3, 4))
    if l.size == 0:
        return
    sample = sample.numpy()  # type: ignore[assignment]  # its numpy view from here on
    buf = np.empty((min(l.size, CPU_PAIR_CHUNK), sample.shape[2]))
    dist = np.empty(l.size)
    for a in range(0, l.size, CPU_PAIR_CHUNK):
        sq = buf[: min(CPU_PAIR_CHUNK, l.size - a)]
        pair_squares(sample, l[a : a + sq.shape[0]], p[a : a + sq.shape[0]], q[a : a + sq.shape[0]], sq)
        dist[a : a + sq.shape[0]] = torch.from_numpy(sq).sum(-1).sqrt_().numpy()
    at = 0
    for r, nn, fl, _, _ in found:
        n = fl.size
        insert_pairs(r.numpy(), nn.numpy(), l[at : at + n], p[at : at + n], q[at : at + n], dist[at : at + n])
        at += n


def update_torch(
    sample: torch.Tensor, l: torch.Tensor, p: torch.Tensor, q: torch.Tensor, r: torch.Tensor, nn: torch.Tensor
) -> None:
    """Exact float64 distances of the pairs (l, p, q), then both sides' two nearest (r, nn) updated."""
    if l.numel() == 0:
        return
    dist = torch.cat(
        [
            exact_distance(sample, l[a : a + PAIR_CHUNK], p[a : a + PAIR_CHUNK], q[a : a + PAIR_CHUNK])
            for a in range(0, l.numel(), PAIR_CHUNK)
        ]
    )
    L, K = r.shape[0], r.shape[1]
    point = torch.cat([l * K + p, l * K + q])
    other = torch.cat([q, p])
    dd = torch.cat([dist, dist])
    touched = torch.unique(point)
    tl, tp = touched // K, touched % K
    for s in range(2):  # the current two nearest of the touched points join the candidates
        point = torch.cat([point, touched])
        other = torch.cat([other, nn[tl, tp, s]])
        dd = torch.cat([dd, r[tl, tp, s]])
    ok = other >= 0
    point, other, dd = point[ok], other[ok], dd[ok]
    # one entry per (point, neighbour) — the same pair met twice has the same distance
    pair_key = point * K + other
    pair_key, first = _unique_first(pair_key)
    point, other, dd = point[first], other[first], dd[first]
    order = torch.argsort(dd, stable=True)
    order = order[torch.argsort(point[order], stable=True)]
    point, other, dd = point[order], other[order], dd[order]
    _, counts = torch.unique_consecutive(point, return_counts=True)
    start = torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
    rank = torch.arange(point.numel(), device=point.device) - start
    r_flat = r.view(L * K, 2)
    n_flat = nn.view(L * K, 2)
    r_flat[touched] = float("inf")
    n_flat[touched] = -1
    sel = rank < 2
    r_flat[point[sel], rank[sel]] = dd[sel]
    n_flat[point[sel], rank[sel]] = other[sel]


def _second(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The second smallest value of x along ``dim`` (inf where there are fewer than two)."""
    if x.shape[dim] < 2:
        return torch.full(x.shape[:dim] + x.shape[dim + 1 :], float("inf"), dtype=x.dtype, device=x.device)
    return torch.topk(x, 2, dim=dim, largest=False).values.select(dim, 1)


def _unique_first(key: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(unique keys, the index of one occurrence of each)."""
    uniq, inv = torch.unique(key, return_inverse=True)
    first = torch.full((uniq.numel(),), key.numel(), dtype=torch.int64, device=key.device)
    first.scatter_reduce_(0, inv, torch.arange(key.numel(), device=key.device), reduce="amin")
    return uniq, first


def exact_distance(sample: torch.Tensor, l: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """‖x_p − x_q‖ in float64 for the float32 rows of layer l: the same value whichever way round."""
    diff = sample[l, p].to(torch.float64) - sample[l, q].to(torch.float64)
    return diff.square_().sum(-1).sqrt_()


__all__ = ["candidates_cpu", "candidates_torch", "update_cpu", "update_torch", "exact_distance"]
