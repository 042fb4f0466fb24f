"""The TwoNN sample's one exact neighbour search after the pass, when the neighbourhoods are on: each position's
128 nearest positions of its TwoNN batch, read by both measures that need neighbours.

Per (layer, TwoNN batch) of the geometry's sample, ``stats.knn.searches`` (``knn_device.searches`` where the sample is
on a device) ranks, exactly (float64 distances of the float32 rows, ties by the smaller row), every position's
``gride.NEIGHBOURS`` = 128 nearest other positions, over all positions and over those of other sentences; where
the batch holds copies (rows equal bit for bit, −0.0 as 0.0), both again over its distinct rows, for its distinct
rows (the copy of smallest sample index stands for its copies, as DADApy's ``remove_identical_points``). From
those lists:

* the neighbourhoods' overlap lists (each position's 64 nearest, unmasked and masked) and GRIDE curves on the
  distinct rows (``neighbourhood_part``);
* the geometry's TwoNN (``twonn_part``, Razzhigaev et al. 2024 §2.4): a distinct row's r₁, r₂ are the first two
  distances of its distinct-rows list, its cross-context r₁, r₂ the first two of its masked one; each decimated
  subset's (Facco et al. 2017: the batch's first m/2, m/4, m/8 rows in a seeded order, ``subset_levels``; a
  distinct row is in it when one of its copies is) are the first two entries of the row's lists that the subset
  holds. A list holds a row's 128 nearest in the order (distance, row), so the first two of its subset members
  are the subset's two nearest whenever the list holds two; a row whose full list holds fewer (about 1 in 10⁶ for
  the eighth) is searched apart over its subset (``twonn_context.pair_distance``). The result is the streamed
  search's (``twonn_stream``, ``--no-neighbourhoods``) — the same exact protocol — without that search during the
  pass.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from normvar_core.constants import TWONN_BATCH
from normvar_core.pipeline.measures.knn_device import canonical_rows
from normvar_core.pipeline.measures.knn_device import searches as device_searches
from normvar_core.pipeline.measures.layerview import layer_threads
from normvar_core.pipeline.measures.twonn_stream import unit_roundoff
from normvar_core.stats import gride, knn, overlap, twonn_context
from normvar_core.stats.layer_geometry import twonn_from_distances
from normvar_core.stats.twonn_context import DECIMATION

LIST_DEPTH = max(overlap.KS)  # the overlap lists kept per position (unmasked and masked)


def first_copies(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(canon, firsts) of the rows of X, equal rows (bit for bit) being copies: ``canon[i]`` the number of row i's
    distinct row, numbered in order of first appearance, and ``firsts`` the row where each first appears — what
    ``np.unique(X, axis=0)`` gives once renumbered, by one dict over the rows' bytes instead of a sort of them.

    >>> first_copies(np.array([[1.0], [2.0], [1.0], [3.0]], np.float32))
    (array([0, 1, 0, 2]), array([0, 1, 3]))
    """
    seen: dict = {}
    X = np.ascontiguousarray(X)
    canon = np.fromiter((seen.setdefault(row.tobytes(), len(seen)) for row in X), np.int64, len(X))
    before = np.maximum.accumulate(np.r_[-1, canon[:-1]])  # the largest number given before each row
    return canon, np.flatnonzero(canon > before)  # a row is new exactly when it gets the next number


@dataclass
class BatchLists:
    """One (layer, TwoNN batch)'s search: ``canon``, ``firsts`` (``first_copies`` of its rows, −0.0 as 0.0) and
    ``dist``, ``idx`` (S, B, 128) of ``knn.searches``: [0] every row over all rows, [1] over other sentences, and
    with copies [2], [3] the same over the distinct rows (rows of the batch, −1 / inf past the rows there are)."""

    canon: np.ndarray
    firsts: np.ndarray
    dist: np.ndarray
    idx: np.ndarray

    @property
    def copies(self) -> bool:
        return self.firsts.size < self.canon.size

    def distinct(self, masked: bool) -> tuple[np.ndarray, np.ndarray]:
        """(dist, idx) (m, 128) of the distinct rows among themselves, neighbours numbered as distinct rows."""
        s = (2 if self.copies else 0) + int(masked)
        idx = self.idx[s, self.firsts]
        return self.dist[s, self.firsts], np.where(idx >= 0, self.canon[np.maximum(idx, 0)], -1)


def search_batch(X, sentences: np.ndarray) -> BatchLists:
    """The batch's searches (``BatchLists``) of its rows X: a float32 numpy array (−0.0 as 0.0), or a tensor on the
    sample's device (searched there, its copies found there: its rows never come to the host)."""
    on_device = isinstance(X, torch.Tensor)
    canon, firsts = canonical_rows(X) if on_device else first_copies(X)
    first = np.zeros(canon.size, bool)
    first[firsts] = True
    distinct = first if firsts.size < canon.size else None  # copies: the searches over the distinct rows too
    if on_device:
        dist, idx = device_searches(X, gride.NEIGHBOURS, groups=sentences, first=distinct, u=unit_roundoff(X.device))
    else:
        dist, idx = knn.searches(X, gride.NEIGHBOURS, groups=sentences, first=distinct)
    return BatchLists(canon, firsts, dist, idx)


def neighbourhood_part(b: BatchLists, rows: np.ndarray, lists: np.ndarray) -> tuple:
    """The neighbourhoods' share of one batch (its sample positions ``rows``): its overlap lists written into the
    layer's ``lists`` (2, K, 64) at ``rows`` (sample positions, −1 where none; unmasked, masked), and its GRIDE
    curves on the distinct rows returned (unmasked, masked)."""
    for v in (0, 1):
        ix = b.idx[v, :, : lists.shape[-1]]
        lists[v, rows] = np.where(ix >= 0, rows[np.maximum(ix, 0)], -1)
    return gride.batch_curve(b.distinct(False)[0]), gride.batch_curve(b.distinct(True)[0])


def nearest_members(
    dist: np.ndarray,
    idx: np.ndarray,
    member: np.ndarray,
    search: Callable[[int], np.ndarray],
) -> np.ndarray:
    """(m, 2): each row's two smallest listed distances to rows j with ``member[j]`` (inf where there are fewer),
    from its list (``dist``, ``idx`` (m, k): the row's k nearest in the order (distance, row), −1 past the rows there
    are). A row whose list is full (k entries) but holds fewer than two members may have members beyond it:
    ``search(i)`` gives its distances to every member it may pair with, whose two smallest are taken.

    >>> d = np.array([[1.0, 2.0, 3.0], [1.0, 4.0, np.inf], [2.0, 3.0, 5.0]])
    >>> i = np.array([[1, 2, 3], [0, 2, -1], [0, 1, 3]])
    >>> nearest_members(d, i, np.array([True, True, False, False]), lambda i: np.array([1.0, 7.0]))
    array([[ 1.,  7.],
           [ 1., inf],
           [ 2.,  3.]])
    """
    ok = (idx >= 0) & member[np.maximum(idx, 0)]
    count = np.cumsum(ok, axis=1)
    out = np.full((idx.shape[0], 2), np.inf)
    for s in (0, 1):
        has = np.flatnonzero(count[:, -1] > s)
        at = np.argmax(count[has] > s, axis=1)  # the first place the count reaches s + 1
        out[has, s] = dist[has, at]
    for i in np.flatnonzero((count[:, -1] < 2) & (idx[:, -1] >= 0)):  # a full list short of two members
        out[i] = np.sort(np.r_[search(int(i)), np.inf, np.inf])[:2]
    return out


def twonn_part(b: BatchLists, sentences: np.ndarray, levels: np.ndarray, t: int, rows_of: Callable) -> tuple:
    """The geometry's share of one batch: (TwoNN's fit, the copies dropped, its context measures
    ``twonn_context.batch_context``) from its lists; ``sentences`` and ``levels`` (each row's decimation level,
    ``subset_levels``) of its rows, ``rows_of(j)`` the float32 distinct rows j on the host (for a row searched
    apart: ``nearest_members``)."""
    m = b.firsts.size
    sent = sentences[b.firsts]
    level = np.zeros(m, levels.dtype)
    np.maximum.at(level, b.canon, levels)  # a distinct row is in a subset when one of its copies is
    lists = [b.distinct(False), b.distinct(True)]

    def nearest(member: np.ndarray, masked: bool) -> np.ndarray:
        def search(i: int) -> np.ndarray:  # row i's distances to every member it may pair with
            others = member.copy()
            others[i] = False
            if masked:
                others &= sent != sent[i]
            j = np.flatnonzero(others)
            return twonn_context.pair_distance(rows_of(np.array([i])), rows_of(j)) if j.size else np.zeros(0)

        return nearest_members(*lists[int(masked)], member, search)

    every = nearest(np.ones(m, bool), False)
    r1, r2 = every[:, 0], every[:, 1]
    fit = twonn_from_distances(r1, r2)[0] if m >= 3 else float("nan")
    subsets, cross = {}, {}
    for k in DECIMATION[1:]:
        inside = level >= k
        subsets[k] = (inside, nearest(inside, False), None)
        cross[k] = nearest(inside, True)
    full = nearest(np.ones(m, bool), True)

    def masked(at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # the batch's or a subset's, as batch_context asks
        if at.size == m:
            return every, full
        inside = np.zeros(m, bool)
        inside[at] = True  # a subset's rows (subsets holding the same rows have the same neighbours)
        k = next(k for k in DECIMATION[1:] if np.array_equal(subsets[k][0], inside))
        return subsets[k][1][at], cross[k][at]

    context = twonn_context.batch_context(
        b.firsts,
        sent,
        every,
        None,  # type: ignore[arg-type]  # no per-row neighbours: ``masked`` gives the searches
        t,
        rows=int(b.canon.size),
        subsets=subsets,
        masked=masked,
    )
    return fit, int(b.canon.size - m), context


def publish_bytes(L: int, K: int, d: int, B: int, device) -> int:
    """What the search adds at publish beside the state, for K positions per layer in TwoNN batches of at most B:
    the overlap lists kept until the neighbourhoods take them (512·L·K: 64 int32 neighbours, unmasked and masked)
    and, per (layer, batch) search run at once (``layer_threads``: one per core on the CPU), the batch's float32 copy
    (8·B·d with its copies' row keys) and the larger of Razzhigaev et al.'s anisotropy of the batch, before the
    search (16·B·d + 24·d²), and the search: the four searches' lists with the kernel's scratch
    (``knn.search_bytes``) and the larger of the float32 Gram products (``knn.gram_bytes``, freed when the lists are
    done) and the TwoNN reads of the lists (``twonn_part``: the distinct rows' lists renumbered, their member masks
    and counts, about 8 KiB a row)."""
    cores = os.cpu_count() or 1
    search = knn.search_bytes(B, gride.NEIGHBOURS, cores) + max(knn.gram_bytes(B), 8192 * B)
    work = 8 * B * d + max(16 * B * d + 24 * d * d, search)
    threads = layer_threads(L * max(K // TWONN_BATCH, 1), parallel=torch.device(device).type == "cpu")
    return int(512 * L * K + threads * work)


__all__ = [
    "BatchLists",
    "LIST_DEPTH",
    "first_copies",
    "nearest_members",
    "neighbourhood_part",
    "publish_bytes",
    "search_batch",
    "twonn_part",
]
