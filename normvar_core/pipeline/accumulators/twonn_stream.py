"""TwoNN's neighbour search during the pass (seed 004 §2.4; Facco et al. 2017), on the states' device.

The sample (``samples.plan_uniform``: the K positions with the smallest hashed (sentence, position)
keys, in key order, i.e. a seeded random order) is split before the pass into TwoNN batches of at least
``TWONN_BATCH`` rows (``stats.geometry.twonn_batch_of``: the rest joins the last batch). Neighbours
are searched within a batch. State per layer l and sample row i (registered on the geometry
accumulator, merged exactly):

* ``sample[l, i]`` — the float32 state; ``hash[l, i]`` — an exact integer hash of its bits (duplicates);
* ``dup[l, i]`` — the row is a copy of an identical row of its batch that is kept (the copies are
  counted, never searched: DADApy's ``remove_identical_points``, as ``stats.geometry.distinct_rows``);
* ``r[l, i] = (r₁, r₂)`` and ``nn[l, i]`` — the two smallest float64 distances to other kept rows of its
  batch that the row has been paired with so far, and those rows.

When rows arrive (a forward batch, or a partial state merged in), each TwoNN batch's new rows are
first checked for copies (hash, then exact equality), then searched blockwise against the kept rows of
their batch: squared distances from the float32 Gram product ‖a‖² + ‖b‖² − 2 a·b, with a rigorous bound
e = 2(d + 4) u (‖a‖² + ‖b‖²) on its rounding error (u = 2⁻²⁴, or TF32's 2⁻¹¹ where matmuls use it). A
pair is re-ranked in float64 (exact distance of the float32 rows) when its lower bound d² − e is at most
both sides' thresholds: the current r₂² and the second smallest upper bound d² + e in the block's row /
column — so no pair that can be among a row's two nearest is ever missed, and the result equals a
brute-force float64 search over all pairs, ties included, whatever the arrival order or the merge
order. Every pair of a batch is met exactly once: in the block of the later of its two rows, or in the
cross search of a merge.
"""
from __future__ import annotations

import numpy as np
import torch

from normvar_core.stats.geometry import twonn_batch_of

CHUNK = 1 << 22       # elements of one float32 (layers x rows x columns) block
PAIR_CHUNK = 1 << 16  # pairs re-ranked in float64 at a time
_HASH_MAX = 1 << 20   # hash multipliers < 2^20: Σ int32 bits x multipliers stays < 2^63 for d < 4096·2


def hash_multipliers(d: int, device) -> torch.Tensor:
    rng = np.random.default_rng(0x7F4A7C15)
    return torch.from_numpy(rng.integers(1, _HASH_MAX, size=d, dtype=np.int64)).to(device)


def row_hash(x: torch.Tensor, mult: torch.Tensor) -> torch.Tensor:
    """An exact integer hash of each float32 row's values (−0.0 as 0.0), no overflow: Σ bits_j · m_j."""
    bits = (x.to(torch.float32) + 0.0).contiguous().view(torch.int32).to(torch.int64)
    return (bits * mult).sum(-1)


def unit_roundoff(device) -> float:
    """u of the float32 matmul on ``device`` (TF32 where torch lets CUDA matmuls use it)."""
    if torch.device(device).type == "cuda" and torch.backends.cuda.matmul.allow_tf32:
        return 2.0 ** -11
    return 2.0 ** -24


class NeighbourState:
    """The registered state of the streaming search (on ``holder``: the geometry accumulator) and its updates."""

    def __init__(self, holder, num_layers: int, size: int, dim: int, device, *, batch: int | None = None):
        self.holder = holder
        self.tb = twonn_batch_of(size, batch) if batch else twonn_batch_of(size)
        self.device = torch.device(device)
        self.mult = hash_multipliers(dim, self.device)
        L, K = num_layers, size
        holder._add_state("sample", torch.zeros((L, K, dim), dtype=torch.float32, device=self.device),
                          merge="custom")
        holder._add_state("hash", torch.zeros((L, K), dtype=torch.int64, device=self.device), merge="pooled")
        holder._add_state("dup", torch.zeros((L, K), dtype=torch.bool, device=self.device), merge="pooled")
        holder._add_state("r", torch.full((L, K, 2), float("inf"), dtype=torch.float64, device=self.device),
                          merge="pooled")
        holder._add_state("nn", torch.full((L, K, 2), -1, dtype=torch.int64, device=self.device), merge="pooled")
        holder._add_state("filled", np.zeros(K, bool), merge="or")

    # ------------------------------------------------------------------ arrivals
    def arrive(self, picks: np.ndarray, X: torch.Tensor) -> None:
        """Rows ``picks`` (plan indices, not filled yet) arrive with states X (L, m, d)."""
        h = self.holder
        p = torch.as_tensor(picks, device=self.device)
        X = X.to(self.device, torch.float32)
        h.sample[:, p] = X
        h.hash[:, p] = row_hash(X, self.mult)
        for t in np.unique(self.tb[picks]):
            new = picks[self.tb[picks] == t]
            old = np.flatnonzero(h.filled & (self.tb == t))
            self.mark_copies(new, old, within=True)
            self.search(new, np.concatenate([old, new]))
        h.filled[picks] = True

    def merge_in(self, theirs: np.ndarray, mine: np.ndarray) -> None:
        """After the other state's rows ``theirs`` were copied in: their copies of our kept rows marked
        (and their rows' neighbours renamed to ours), then the cross pairs searched."""
        for t in np.unique(self.tb[theirs]):
            new = theirs[self.tb[theirs] == t]
            old = mine[self.tb[mine] == t]
            if old.size:
                self.mark_copies(new, old, within=False)
                self.search(new, old)

    # ------------------------------------------------------------------ duplicates
    def mark_copies(self, new: np.ndarray, old: np.ndarray, *, within: bool) -> None:
        """dup[l, u] for each new kept row u identical to a kept old row (or, ``within``, to an earlier
        new row); where a new kept row is a copy of an old one, the new rows' neighbours named u are
        renamed to the old row (a merge: their distances are the same)."""
        h = self.holder
        nt = torch.as_tensor(new, device=self.device)
        ot = torch.as_tensor(old, device=self.device)
        hn = h.hash[:, nt]
        keep_n = ~h.dup[:, nt]
        pairs = []
        if old.size:
            step = max(1, CHUNK // max(1, h.hash.shape[0] * old.size))
            ho, keep_o = h.hash[:, ot], ~h.dup[:, ot]
            for a in range(0, new.size, step):
                eq = (hn[:, a:a + step, None] == ho[:, None, :]) & keep_o[:, None, :] & keep_n[:, a:a + step, None]
                l, i, j = torch.nonzero(eq, as_tuple=True)
                pairs.append((l, nt[a + i], ot[j]))
        if within and new.size > 1:
            eq = (hn[:, :, None] == hn[:, None, :]) & torch.ones(new.size, new.size, dtype=torch.bool,
                                                                  device=self.device).tril(-1)
            l, i, j = torch.nonzero(eq & keep_n[:, :, None] & keep_n[:, None, :], as_tuple=True)
            pairs.append((l, nt[i], nt[j]))
        for l, a, b in pairs:
            same = (h.sample[l, a] == h.sample[l, b]).all(-1)  # a hash match is checked exactly
            l, a, b = l[same], a[same], b[same]
            if l.numel() == 0:
                continue
            h.dup[l, a] = True
            if not within:  # a merge: the incoming rows' neighbours named a are renamed b
                rename = torch.arange(h.nn.shape[1], device=self.device).expand(h.nn.shape[0], -1).clone()
                rename[l, a] = b
                block = h.nn[:, nt]
                ok = block >= 0
                named = torch.gather(rename, 1, block.clamp_min(0).reshape(block.shape[0], -1)).reshape(block.shape)
                h.nn[:, nt] = torch.where(ok, named, block)

    # ------------------------------------------------------------------ search
    def search(self, rows: np.ndarray, cols: np.ndarray) -> None:
        """Every pair (row, column) of kept rows (rows ⊂ cols allowed: pairs within rows once each way),
        blockwise; candidates re-ranked in float64 and both sides' (r₁, r₂) updated."""
        h = self.holder
        if rows.size == 0 or cols.size == 0:
            return
        L, d = h.sample.shape[0], h.sample.shape[2]
        c_err = 2.0 * (d + 4) * unit_roundoff(self.device) * 1.01
        ct = torch.as_tensor(cols, device=self.device)
        Xc = h.sample[:, ct]
        sqc = torch.einsum("lcd,lcd->lc", Xc, Xc)
        keep_c = ~h.dup[:, ct]
        r2c = h.r[:, ct, 1].square() * (1 + 1e-9)  # before this arrival: an upper bound of the final r₂²
        step = max(1, CHUNK // max(1, L * cols.size))
        found = []
        for a in range(0, rows.size, step):
            rt = torch.as_tensor(rows[a:a + step], device=self.device)
            Xr = h.sample[:, rt]
            sqr = torch.einsum("lrd,lrd->lr", Xr, Xr)
            d2 = torch.baddbmm(sqr[:, :, None] + sqc[:, None, :], Xr, Xc.transpose(1, 2), alpha=-2.0)
            err = (sqr[:, :, None] + sqc[:, None, :]).mul_(c_err)
            bad = ~(keep_c[:, None, :] & ~h.dup[:, rt][:, :, None]) | (rt[:, None] == ct[None, :])[None]
            up = (d2 + err).masked_fill_(bad, float("inf"))
            lo = (d2 - err).masked_fill_(bad, float("inf"))
            row_t = torch.minimum(_second(up, 2), h.r[:, rt, 1].square() * (1 + 1e-9))
            col_t = torch.minimum(_second(up, 1), r2c)
            take = (lo <= row_t[:, :, None]) | (lo <= col_t[:, None, :])
            l, i, j = torch.nonzero(take & ~bad, as_tuple=True)
            found.append((l, rt[i], ct[j]))
        l = torch.cat([f[0] for f in found])
        p = torch.cat([f[1] for f in found])
        q = torch.cat([f[2] for f in found])
        self.update(l, p, q)

    def update(self, l: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> None:
        """Exact float64 distances of the pairs (l, p, q), then both sides' two nearest updated."""
        h = self.holder
        if l.numel() == 0:
            return
        dist = torch.cat([exact_distance(h.sample, l[a:a + PAIR_CHUNK], p[a:a + PAIR_CHUNK], q[a:a + PAIR_CHUNK])
                          for a in range(0, l.numel(), PAIR_CHUNK)])
        L, K = h.r.shape[0], h.r.shape[1]
        point = torch.cat([l * K + p, l * K + q])
        other = torch.cat([q, p])
        dd = torch.cat([dist, dist])
        touched = torch.unique(point)
        tl, tp = touched // K, touched % K
        for s in range(2):  # the current two nearest of the touched points join the candidates
            point = torch.cat([point, touched])
            other = torch.cat([other, h.nn[tl, tp, s]])
            dd = torch.cat([dd, h.r[tl, tp, s]])
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
        r_flat = h.r.view(L * K, 2)
        n_flat = h.nn.view(L * K, 2)
        r_flat[touched] = float("inf")
        n_flat[touched] = -1
        sel = rank < 2
        r_flat[point[sel], rank[sel]] = dd[sel]
        n_flat[point[sel], rank[sel]] = other[sel]

    # ------------------------------------------------------------------ result
    def batch_distances(self, li: int, t: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(r₁, r₂) of the kept rows of TwoNN batch t at layer li, and the number of copies dropped."""
        h = self.holder
        rows = torch.as_tensor(np.flatnonzero(self.tb == t), device=self.device)
        keep = ~h.dup[li, rows]
        r = h.r[li, rows][keep].cpu().numpy()
        return r[:, 0], r[:, 1], int((~keep).sum())


def _second(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The second smallest value of x along ``dim`` (inf where there are fewer than two)."""
    if x.shape[dim] < 2:
        return torch.full(x.shape[:dim] + x.shape[dim + 1:], float("inf"), dtype=x.dtype, device=x.device)
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


__all__ = ["NeighbourState", "row_hash", "exact_distance", "unit_roundoff", "CHUNK"]
