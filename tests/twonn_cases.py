"""The streaming TwoNN search fed as the pass feeds it: ``Holder`` (a neighbour state alone), ``twonn_case``
(seeded points, ties and identical rows included), ``streamed`` (the points in shards and pieces, merged) and
``decimated_equal_brute_force`` (the decimated subsets' search against a brute force)."""

from __future__ import annotations

import numpy as np
import torch
from brute import twonn_radii

from normvar_core.pipeline.measures.state import DictReader, Stateful
from normvar_core.pipeline.measures.twonn_stream import NeighbourState


class Holder(Stateful):
    """The neighbour state alone, registered as the geometry measure registers it."""

    def __init__(self, L, K, d, batch):
        self.neighbours = NeighbourState(self, L, K, d, "cpu", batch=batch)


def twonn_case(rng, trial):
    """Points (2, K, d) in float32, integer grids (ties, identical rows) on odd trials, and a TwoNN batch size."""
    L, K, d = 2, int(rng.integers(5, 160)), int(rng.integers(2, 9))
    if trial % 2:  # small integer grid: many exact ties, many identical rows
        X = rng.integers(-2, 3, size=(L, K, d)).astype(np.float32)
    else:  # general position, with a fifth of the rows repeated
        X = rng.standard_normal((L, K, d)).astype(np.float32)
        X[:, rng.integers(0, K, K // 5)] = X[:, rng.integers(0, K, K // 5)]
    return X, int(rng.integers(3, 60))


def streamed(X, batch, order, n_shards, rng, merge_order):
    """The neighbour state of ``X``: ``order`` in ``n_shards`` shards fed in pieces, merged in ``merge_order``."""
    L, K, d = X.shape
    parts = []
    for shard in np.array_split(order, n_shards):
        h = Holder(L, K, d, batch)
        for piece in np.array_split(shard, max(1, shard.size // int(rng.integers(1, 12)))):
            if piece.size:
                h.neighbours.arrive(piece, torch.from_numpy(X[:, piece]))
        parts.append(h)
    parts = [parts[i] for i in merge_order(len(parts))]
    out = parts[0]
    for p in parts[1:]:
        out.merge_from(DictReader(p.state_dict()))
    return out


def decimated_equal_brute_force(got, X, tb):
    """Each decimated subset (the batch's rows of level ≥ k, drawn before the pass; then its copies dropped): a
    kept row has level ≥ k exactly when the subset holds it or one of its copies, and its streamed (r₁, r₂) in the
    subset are the brute force's over the distinct rows of the subset."""
    from normvar_core.stats.twonn_context import DECIMATION, subset_levels

    base = subset_levels(tb)
    L = X.shape[0]
    for k in DECIMATION[1:]:
        inside = np.flatnonzero(base >= k)
        want, _ = twonn_radii(X[:, inside], tb[inside])
        r_k = getattr(got, f"r{k}").numpy()
        for l in range(L):
            of = {(int(tb[i]), X[l, i].tobytes()): want[l, a] for a, i in enumerate(inside)}
            for i in np.flatnonzero(~got.dup[l].numpy()):
                key = (int(tb[i]), X[l, i].tobytes())
                assert (int(got.level[l, i]) >= k) == (key in of), (k, l, i)
                if key in of:
                    np.testing.assert_array_equal(r_k[l, i], of[key], err_msg=f"k={k} layer {l} row {i}")
