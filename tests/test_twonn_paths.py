"""The other paths of ``twonn_stream``'s search, checked on the CPU against the same float64 brute force as
the default path (tests/test_twonn_stream.py): the torch search a GPU runs, and the CPU kernels' second pass
(``block_pairs``, taken when a block's candidates overflow the room kept for them) — the batch's search and each
decimated subset's."""

from __future__ import annotations

import numpy as np
import pytest
from brute import twonn_radii
from twonn_cases import decimated_equal_brute_force, streamed, twonn_case

from normvar_core.pipeline.measures import twonn_blocks
from normvar_core.pipeline.measures.twonn_stream import NeighbourState
from normvar_core.stats import layer_geometry as G


@pytest.mark.parametrize("path", ["torch", "overflow"])
@pytest.mark.parametrize("trial", range(6))
def test_other_search_paths_equal_brute_force(trial, path, monkeypatch):
    if path == "torch":
        monkeypatch.setattr(NeighbourState, "cpu_kernels", False)
    else:  # room for 16 pairs a layer only: most blocks' pairs go through block_pairs
        monkeypatch.setattr(twonn_blocks, "CPU_ROW_PAIRS", 0)
    rng = np.random.default_rng(300 + trial)
    X, batch = twonn_case(rng, trial)
    L, K, _ = X.shape
    want, copies = twonn_radii(X, G.twonn_batch_of(K, batch))
    got = streamed(X, batch, rng.permutation(K), int(rng.integers(1, 4)), rng, lambda n: range(n))
    dup = got.dup.numpy()
    np.testing.assert_array_equal(dup.sum(1), copies)
    for l in range(L):
        np.testing.assert_array_equal(got.r[l].numpy()[~dup[l]], want[l][~dup[l]])
    decimated_equal_brute_force(got, X, G.twonn_batch_of(K, batch))
