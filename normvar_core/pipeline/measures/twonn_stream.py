"""TwoNN's neighbour search during the pass (Razzhigaev et al. 2024 §2.4; Facco et al. 2017), on the states' device.

The sample (``samples.plan_uniform``: the K positions with the smallest hashed (sentence, position)
keys, in key order, i.e. a seeded random order) is split before the pass into TwoNN batches of at least
``TWONN_BATCH`` rows (``stats.layer_geometry.twonn_batch_of``: the rest joins the last batch). Neighbours
are searched within a batch. State per layer l and sample row i (registered on the geometry
measure, merged exactly):

* ``sample[l, i]`` — the float32 state; ``hash[l, i]`` — an exact integer hash of its bits (duplicates);
* ``dup[l, i]`` — the row is a copy of an identical row of its batch that is kept (the copies are
  counted, never searched: DADApy's ``remove_identical_points``, as ``stats.layer_geometry.distinct_rows``);
* ``r[l, i] = (r₁, r₂)`` and ``nn[l, i]`` — the two smallest float64 distances to other kept rows of its
  batch that the row has been paired with so far, and those rows;
* the decimation (Facco et al. 2017's check that an estimate is stable in scale): before the pass each TwoNN
  batch's rows are put in a seeded random order whose first m/2, m/4 and m/8 rows are its nested subsets
  (``stats.twonn_context.subset_levels``); ``level[l, i]`` is the largest k whose subset holds row i or one of
  its copies (a copy arriving later raises its kept row's level), and ``r2, nn2``, ``r4, nn4``, ``r8, nn8``
  hold each kept row's two nearest among the kept rows of level ≥ k — the subset decimated, then its copies
  dropped. These are met in the same Gram blocks as the batch's own search (the rows and columns below the
  level skipped), not searched again after the pass; a kept row whose level rises is searched again against
  its batch for the new levels (a pair met twice counts once).

When rows arrive (a forward batch, or a partial state merged in), each TwoNN batch's new rows are
first checked for copies (hash, then exact equality), then searched blockwise against the kept rows of
their batch: squared distances from the float32 Gram product ‖a‖² + ‖b‖² − 2 a·b, with a rigorous bound
e = 2(d + 4) u (‖a‖² + ‖b‖²) on its rounding error (u = 2⁻²⁴, or TF32's 2⁻¹¹ where matmuls use it). A
pair is re-ranked in float64 (exact distance of the float32 rows) when its lower bound d² − e is at most
both sides' thresholds: the current r₂² and an upper bound of the second smallest d² in the block's row /
column — so no pair that can be among a row's two nearest is ever missed, and the result equals a
brute-force float64 search over all pairs, ties included, whatever the arrival order or the merge
order. Every pair of a batch is met exactly once: in the block of the later of its two rows, or in the
cross search of a merge. A block's float32 Gram product is computed once and read by the batch's search and
each decimated subset's: on the CPU by numba (``stats.twonn_kernels``: thresholds from each row's own second
smallest upper bound, the candidates taken while the row is in cache), elsewhere by torch ops over the whole
block, each search's lower bounds built from the product in turn (the product and one search's bounds held: two
blocks of at most ``CHUNK`` elements); each stored row's ‖x‖² is kept beside the sample, and each TwoNN batch
gathered once per arrival.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from normvar_core.constants import TWONN_BATCH
from normvar_core.pipeline.measures.twonn_blocks import candidates_cpu, candidates_torch, update_cpu, update_torch
from normvar_core.stats.layer_geometry import twonn_batch_of
from normvar_core.stats.twonn_context import DECIMATION, subset_levels

CHUNK = 1 << 22  # elements of one float32 (layers x rows x columns) block
_HASH_MAX = 1 << 16  # hash multipliers < 2^16: |Σ int32 bits x multipliers| < 2^47 d, below 2^62 up to d = 2^15
_NO_HASH = torch.iinfo(torch.int64).max  # stands for a copy's hash in the matching (no real hash reaches it)


def hash_multipliers(d: int, device) -> torch.Tensor:
    rng = np.random.default_rng(0x7F4A7C15)
    return torch.from_numpy(rng.integers(1, _HASH_MAX, size=d, dtype=np.int64)).to(device)


def row_hash(x: torch.Tensor, mult: torch.Tensor) -> torch.Tensor:
    """An exact integer hash of each float32 row's values (−0.0 as 0.0), no overflow: Σ bits_j · m_j. Rows of
    (L, m, d) states are hashed one layer at a time (the int64 products: 20·m·d bytes, not 20·L·m·d)."""
    if x.dim() == 3:
        return (
            torch.stack([row_hash(layer, mult) for layer in x])
            if x.shape[0]
            else x.new_zeros(x.shape[:2], dtype=torch.int64)
        )
    bits = (x.to(torch.float32) + 0.0).contiguous().view(torch.int32).to(torch.int64)
    return (bits * mult).sum(-1)


def unit_roundoff(device) -> float:
    """u of the float32 matmul on ``device`` (TF32 where torch lets CUDA matmuls use it)."""
    if torch.device(device).type == "cuda" and torch.backends.cuda.matmul.allow_tf32:
        return 2.0**-11
    return 2.0**-24


class NeighbourState:
    """The registered state of the streaming search (on ``holder``: the geometry measure) and its updates."""

    cpu_kernels = True  # on the CPU, the numba passes (``stats.twonn_kernels``); False: the torch ops there too

    def __init__(
        self, holder, num_layers: int, size: int, dim: int, device, *, batch: int | None = None, streamed: bool = True
    ):
        self.holder = holder
        self.streamed = streamed  # False: the rows are only kept; their search is after the pass (``sample_lists``)
        self.tb = twonn_batch_of(size, batch or TWONN_BATCH)  # ``batch``: smaller batches for tests only
        self.device = torch.device(device)
        self.base_level = torch.as_tensor(subset_levels(self.tb), device=self.device)  # (K,) int8: 1, 2, 4 or 8
        self.mult = hash_multipliers(dim, self.device)
        self._sq: torch.Tensor
        self._sq_of: Any
        self._sq, self._sq_of = None, None  # type: ignore[assignment]  # the stored rows' squared norms (``_norms``)
        L, K = num_layers, size
        holder._add_state("sample", torch.zeros((L, K, dim), dtype=torch.float32, device=self.device), merge=self)
        if not streamed:
            holder._add_state("filled", np.zeros(K, bool), merge="or", per_layer=False)
            return
        # kept rows whose level rose in this arrival or merge, searched again at its end (``search_risen``): until
        # then the subsets' searches skip them (their subset neighbours are not searched yet)
        self.pending = torch.zeros((L, K), dtype=torch.bool, device=self.device)
        holder._add_state("hash", torch.zeros((L, K), dtype=torch.int64, device=self.device), merge="pooled")
        holder._add_state("dup", torch.zeros((L, K), dtype=torch.bool, device=self.device), merge="pooled")
        holder._add_state(
            "r", torch.full((L, K, 2), float("inf"), dtype=torch.float64, device=self.device), merge="pooled"
        )
        holder._add_state("nn", torch.full((L, K, 2), -1, dtype=torch.int64, device=self.device), merge="pooled")
        holder._add_state("level", torch.ones((L, K), dtype=torch.int8, device=self.device), merge="pooled")
        for k in DECIMATION[1:]:  # the decimated subsets' two nearest
            holder._add_state(
                f"r{k}", torch.full((L, K, 2), float("inf"), dtype=torch.float64, device=self.device), merge="pooled"
            )
            holder._add_state(
                f"nn{k}", torch.full((L, K, 2), -1, dtype=torch.int64, device=self.device), merge="pooled"
            )
        holder._add_state("filled", np.zeros(K, bool), merge="or", per_layer=False)

    @staticmethod
    def planned(num_layers: int, size: int, dim: int, streamed: bool = True) -> dict:
        """{key: (shape, dtype)} of the registered state for K = ``size`` rows: the float32 sample (L, K, d), per
        row and layer its hash (int64), copy flag (bool), decimation level (int8), (r₁, r₂) (float64) and their
        rows (int64) in the batch and in each of the 3 decimated subsets, and the filled flags (K,):
        L·K·(4·d + 138) + K bytes; not ``streamed``, the sample and the flags alone: 4·L·K·d + K bytes."""
        L, K = int(num_layers), int(size)
        if not streamed:
            return {"sample": ((L, K, int(dim)), np.float32), "filled": ((K,), np.bool_)}
        subsets = {}
        for k in DECIMATION[1:]:
            subsets.update({f"r{k}": ((L, K, 2), np.float64), f"nn{k}": ((L, K, 2), np.int64)})
        return {
            "sample": ((L, K, int(dim)), np.float32),
            "hash": ((L, K), np.int64),
            "dup": ((L, K), np.bool_),
            "r": ((L, K, 2), np.float64),
            "nn": ((L, K, 2), np.int64),
            "level": ((L, K), np.int8),
            **subsets,
            "filled": ((K,), np.bool_),
        }

    def trackers(self) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
        """[(k, r, nn)]: the batch's search (k = 1) and each decimated subset's, in ``DECIMATION`` order."""
        h = self.holder
        return [(1, h.r, h.nn)] + [(k, getattr(h, f"r{k}"), getattr(h, f"nn{k}")) for k in DECIMATION[1:]]

    def _names(self) -> tuple[str, ...]:
        """The per-row states a merge copies in."""
        if not self.streamed:
            return ("sample",)
        return (
            "sample",
            "hash",
            "dup",
            "r",
            "nn",
            "level",
            *(f"{x}{k}" for k in DECIMATION[1:] for x in "r nn".split()),
        )

    # ------------------------------------------------------------------ arrivals
    def _step(self, cols: int) -> int:
        return max(1, CHUNK // max(1, self.holder.sample.shape[0] * cols))

    def arrive(self, picks: np.ndarray, X: torch.Tensor, rows: np.ndarray | None = None) -> None:
        """Rows ``picks`` (plan indices, not filled yet) arrive with states X (L, m, d), or with ``rows``: rows
        ``rows`` of the batch's states X (L, N, d), taken one layer at a time (no L x m copy); a large arrival
        is taken a block of rows at a time, each a later arrival than the one before. Each TwoNN batch's
        kept rows are gathered once per arrival (its blocks read prefixes of that copy). Not ``streamed``: the rows
        are only stored."""
        h = self.holder
        p = torch.as_tensor(picks, device=self.device)
        r = None if rows is None else torch.as_tensor(rows, device=X.device)
        if not self.streamed:
            for l in range(X.shape[0]):
                h.sample[l, p] = (X[l] if r is None else X[l].index_select(0, r)).to(self.device, torch.float32)
            h.filled[picks] = True
            return
        sq = self._norms()
        for l in range(X.shape[0]):  # one layer's rows at a time: stored, their norms and their hashes
            x = (X[l] if r is None else X[l].index_select(0, r)).to(self.device, torch.float32)
            h.sample[l, p] = x
            sq[l, p] = torch.einsum("lkd,lkd->lk", x[None], x[None])[0]
            h.hash[l, p] = row_hash(x, self.mult)
        h.level[:, p] = self.base_level[p]
        for t in np.unique(self.tb[picks]):
            new = picks[self.tb[picks] == t]
            old = np.flatnonzero(h.filled & (self.tb == t))
            step = self._step(old.size + new.size)
            cols = np.concatenate([old, new])
            Xc, sqc = self._gather(cols)
            for a in range(0, new.size, step):
                k0, k1 = old.size + a, min(old.size + a + step, cols.size)
                with one_thread(self.device):
                    self.mark_copies(cols[k0:k1], cols[:k0], within=True)
                self._search(cols[k0:k1], cols[:k1], Xc[:, k0:k1], Xc[:, :k1], sqc[:, k0:k1], sqc[:, :k1], own=k1 - k0)
        h.filled[picks] = True
        self.search_risen()

    # ------------------------------------------------------------------ squared norms, computed once per row
    def _norms(self) -> torch.Tensor:
        """‖x‖² (float32, L x K) of every stored row, kept beside the sample (recomputed only when the sample
        tensor itself was replaced: a state loaded, a move to another device)."""
        h = self.holder
        if self._sq_of is None or self._sq_of() is not h.sample:
            self._sq = torch.einsum("lkd,lkd->lk", h.sample, h.sample)
            self._sq_of = weakref.ref(h.sample)
        return self._sq

    def _set_norms(self, p: torch.Tensor, X: torch.Tensor) -> None:
        self._norms()[:, p] = torch.einsum("lkd,lkd->lk", X, X)

    def _gather(self, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        t = torch.as_tensor(idx, device=self.device)
        return self.holder.sample[:, t], self._norms()[:, t]

    def merge(self, holder, name: str, reader) -> None:
        """The merge rule of the registered ``sample`` (its neighbour state's entries are ``"pooled"``: merged here):
        ``merge_reader``."""
        self.merge_reader(reader)

    def merge_reader(self, reader) -> None:
        """Merge another partial state (its rows disjoint from ours), read through ``reader``: its sampled
        rows and their neighbour state copied in, then the pairs between its rows and ours searched
        (``merge_in``) — the same result as one stream."""
        h = self.holder
        theirs = np.asarray(reader.get("filled"), bool) & ~h.filled
        if not theirs.any():
            return
        idx = np.flatnonzero(theirs)
        t = torch.as_tensor(idx, device=self.device)
        for name in self._names():  # one layer block at a time
            for li, block in enumerate(reader.blocks(name)):
                getattr(h, name)[li, t] = torch.as_tensor(np.asarray(block)[idx]).to(self.device)
        if not self.streamed:
            return
        self._set_norms(t, h.sample[:, t])
        self.merge_in(idx, np.flatnonzero(h.filled))

    def merge_in(self, theirs: np.ndarray, mine: np.ndarray) -> None:
        """After the other state's rows ``theirs`` were copied in: their copies of our kept rows marked
        (and their rows' neighbours renamed to ours), then the cross pairs searched."""
        for t in np.unique(self.tb[theirs]):
            new = theirs[self.tb[theirs] == t]
            old = mine[self.tb[mine] == t]
            if old.size:
                self.mark_copies(new, old, within=False)
                step = self._step(old.size)
                for a in range(0, new.size, step):
                    self.search(new[a : a + step], old, own=0)
        self.search_risen(also=theirs)

    # ------------------------------------------------------------------ duplicates
    def mark_copies(self, new: np.ndarray, old: np.ndarray, *, within: bool) -> None:
        """dup[l, u] for each new kept row u identical to a kept old row (or, ``within``, to an earlier
        new row); where a new kept row is a copy of an old one, the new rows' neighbours named u are
        renamed to the old row (a merge: their distances are the same). Rows are matched by hash
        (sorted, per layer), then compared exactly; a copy raises its kept row's decimation level
        (``raise_levels``)."""
        h = self.holder
        nt = torch.as_tensor(new, device=self.device)
        hn = torch.where(h.dup[:, nt], _NO_HASH, h.hash[:, nt])
        pairs = []
        if old.size:
            ot = torch.as_tensor(old, device=self.device)
            ho, order = torch.where(h.dup[:, ot], _NO_HASH, h.hash[:, ot]).sort(dim=1)
            at = torch.searchsorted(ho, hn).clamp_max_(old.size - 1)
            hit = (torch.gather(ho, 1, at) == hn) & (hn != _NO_HASH)
            l, i = torch.nonzero(hit, as_tuple=True)
            pairs.append((l, nt[i], ot[order[l, at[l, i]]]))
        if within and new.size > 1:
            hs, order = hn.sort(dim=1, stable=True)
            l, i = torch.nonzero((hs[:, 1:] == hs[:, :-1]) & (hs[:, 1:] != _NO_HASH), as_tuple=True)
            pairs.append((l, nt[order[l, i + 1]], nt[order[l, i]]))
        found = []
        for l, a, b in pairs:
            same = (h.sample[l, a] == h.sample[l, b]).all(-1)  # a hash match is checked exactly
            l, a, b = l[same], a[same], b[same]
            if l.numel() == 0:
                continue
            h.dup[l, a] = True
            found.append((l, a, b))
            if not within:  # a merge: the incoming rows' neighbours named a are renamed b
                rename = torch.arange(h.nn.shape[1], device=self.device).expand(h.nn.shape[0], -1).clone()
                rename[l, a] = b
                for _, _, nn in self.trackers():
                    block = nn[:, nt]
                    named = torch.gather(rename, 1, block.clamp_min(0).reshape(block.shape[0], -1)).reshape(block.shape)
                    nn[:, nt] = torch.where(block >= 0, named, block)
        self.raise_levels(found)

    def raise_levels(self, found: list) -> None:
        """Each copy (l, a) of a kept row (l, b) — [(l, a, b) tensors]; b may itself be a copy found in the same
        call, followed to the kept row it copies — gives that kept row its level if higher: a subset holds a
        distinct row when it holds one of its copies; the kept rows whose level rose are marked ``pending``."""
        if not found:
            return
        h = self.holder
        L, K = h.level.shape
        l, a, b = (torch.cat(x) for x in zip(*found))
        parent = torch.arange(L * K, device=self.device)
        parent[l * K + a] = l * K + b
        while True:  # a chain of copies (a run of equal rows in one arrival) to its kept row
            up = parent[parent]
            if torch.equal(up, parent):
                break
            parent = up
        src = l * K + a
        root = parent[src]
        flat = h.level.view(-1)
        before = flat[root]
        flat.scatter_reduce_(0, root, flat[src], reduce="amax")
        rose = torch.unique(root[flat[root] > before])
        self.pending.view(-1)[rose] = True  # searched again at the end of the arrival or merge (``search_risen``)

    def search_risen(self, also: np.ndarray | None = None) -> None:
        """The kept rows whose level rose (``pending``, marked by ``raise_levels``) searched again against every
        filled row of their batch (and ``also``: rows being merged in), at those layers and for the subsets only:
        their pairs with rows met before the rise are met again at the new level (a pair met twice counts once). A
        row of the set that did not rise at a layer is still a neighbour there: the pairs within the set are searched
        apart, in full."""
        if not bool(self.pending.any()):
            return
        h = self.holder
        mask = self.pending.clone()
        self.pending.zero_()
        rows_all = torch.nonzero(mask.any(0)).reshape(-1).cpu().numpy()
        filled = h.filled.copy()
        if also is not None:
            filled[also] = True
        for t in np.unique(self.tb[rows_all]):
            rows = rows_all[self.tb[rows_all] == t]
            others = np.setdiff1d(np.flatnonzero(filled & (self.tb == t)), rows)
            step = self._step(max(others.size, rows.size))  # blocks of at most CHUNK elements, as an arrival's
            for a in range(0, rows.size, step):
                part = rows[a : a + step]
                self.search(part, others, own=0, only=mask[:, torch.as_tensor(part, device=self.device)])
                # their pairs among themselves (every search, at every layer): each pair in the block of its later row
                self.search(part, rows[: a + part.size], own=part.size)

    # ------------------------------------------------------------------ search
    def search(self, rows: np.ndarray, cols: np.ndarray, *, own: int, only: torch.Tensor | None = None) -> None:
        """Every pair (row, column) of kept rows, in one block (``_search``, the rows and columns gathered)."""
        Xr, sqr = self._gather(rows)
        Xc, sqc = self._gather(cols)
        self._search(rows, cols, Xr, Xc, sqr, sqc, own=own, only=only)

    def _search(self, rows, cols, Xr, Xc, sqr, sqc, *, own: int, only: torch.Tensor | None = None) -> None:
        """Every pair (row, column) of kept rows, in one block; ``own``: the rows are the last ``own``
        columns too (their pairs among themselves met once each way). Lower bounds lo = d² − e of the
        float32 Gram distances; a pair is re-ranked in float64 when lo is at most the row's or the
        column's threshold: its current r₂², and for a row (or a column without two neighbours yet) an
        upper bound of the block's second smallest d² (the second smallest lo + e's largest value).
        The batch's search and each decimated subset's (``trackers``: the rows and columns below its level
        skipped) read the same Gram block, computed once. ``only`` (L, rows): a search again of rows whose level
        rose — the subsets' searches only, those rows at those layers only.
        On the CPU the thresholds and the candidates come from numba passes over each row
        (``stats.twonn_kernels``); elsewhere from torch ops over the whole block, one search's lower bounds at a
        time (``candidates_torch``: the Gram block with that search's infinite biases for the rows and columns it
        skips)."""
        if rows.size == 0 or cols.size == 0:
            return
        h = self.holder
        d = Xr.shape[2]
        c = 2.0 * (d + 4) * unit_roundoff(self.device) * 1.01
        cpu = self.device.type == "cpu" and self.cpu_kernels
        if cpu:  # the masks in numpy (torch's small ops cost milliseconds each on shared cores), one Gram block
            dup, level, pend = h.dup.numpy(), h.level.numpy(), self.pending.numpy()
            masks = (
                dup[:, rows],
                dup[:, cols],
                level[:, rows],
                level[:, cols],
                pend[:, rows],
                pend[:, cols],
                None if only is None else only.numpy(),
            )
        else:
            rt = torch.as_tensor(rows, device=self.device)
            ct = torch.as_tensor(cols, device=self.device)
            masks = (  # type: ignore[assignment]  # torch masks here, numpy above
                h.dup[:, rt],
                h.dup[:, ct],
                h.level[:, rt],
                h.level[:, ct],
                self.pending[:, rt],
                self.pending[:, ct],
                only,
            )
        dup_r, dup_c, lev_r, lev_c, pend_r, pend_c, only = masks  # type: ignore[assignment]
        G, found = None, []
        for k, r, nn in self.trackers():
            if only is not None and k == 1:
                continue
            rskip = dup_r | (lev_r < k)
            cskip = dup_c | (lev_c < k)
            if only is not None:
                rskip |= ~only
            elif k > 1:  # rows whose level rose wait for their search again (``search_risen``)
                rskip |= pend_r
                cskip |= pend_c
            if bool(rskip.all()) or bool(cskip.all()):
                continue
            if G is None:  # one float32 Gram block for every search
                G = torch.bmm(Xr, Xc.transpose(1, 2))
            if cpu:
                l, i, j = candidates_cpu(G.numpy(), sqr, sqc, rskip, cskip, r, rows, cols, own, c)
                found.append((r, nn, l, rows[i], cols[j]))
            else:
                l, i, j = candidates_torch(rt, ct, G, sqr, sqc, rskip, cskip, r, own, c)
                update_torch(h.sample, l, rt[i], ct[j], r, nn)
        if found:
            with one_thread(self.device):
                update_cpu(h.sample, found)

    # ------------------------------------------------------------------ result
    def batch_distances(self, li: int, t: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(r₁, r₂) of the kept rows of TwoNN batch t at layer li, and the number of copies dropped."""
        h = self.holder
        rows = torch.as_tensor(np.flatnonzero(self.tb == t), device=self.device)
        keep = ~h.dup[li, rows]
        r = h.r[li, rows][keep].cpu().numpy()
        return r[:, 0], r[:, 1], int((~keep).sum())


@contextmanager
def one_thread(device):
    """On the CPU, torch's sorts and index ops of a few thousand entries run single-threaded (measured
    4-50x faster than two threads on the shared cores); elsewhere nothing changes."""
    if torch.device(device).type != "cpu":
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


__all__ = ["NeighbourState", "row_hash", "unit_roundoff", "one_thread", "CHUNK"]
