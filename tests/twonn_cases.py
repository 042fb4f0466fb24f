"""The streaming TwoNN search fed as the pass feeds it: ``Holder`` (a neighbour state alone), ``twonn_case``
(seeded points, ties and identical rows included) and ``streamed`` (the points in shards and pieces, merged)."""
from __future__ import annotations

import numpy as np
import torch

from normvar_core.pipeline.measures.state import DictReader, Stateful
from normvar_core.pipeline.measures.twonn_stream import NeighbourState


class Holder(Stateful):
    """The neighbour state alone, registered as the geometry measure registers it."""

    def __init__(self, L, K, d, batch):
        self.neighbours = NeighbourState(self, L, K, d, "cpu", batch=batch)

    def merge_sample(self, reader):
        self.neighbours.merge_reader(reader)


def twonn_case(rng, trial):
    """Points (2, K, d) in float32, integer grids (ties, identical rows) on odd trials, and a TwoNN batch size."""
    L, K, d = 2, int(rng.integers(5, 160)), int(rng.integers(2, 9))
    if trial % 2:  # small integer grid: many exact ties, many identical rows
        X = rng.integers(-2, 3, size=(L, K, d)).astype(np.float32)
    else:          # general position, with a fifth of the rows repeated
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
