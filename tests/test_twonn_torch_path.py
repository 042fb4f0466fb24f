"""The torch search of ``twonn_stream`` (the one a GPU runs), checked on the CPU against the same float64
brute force as the numba passes the CPU runs by default (tests/test_twonn_stream.py)."""
from __future__ import annotations

import numpy as np
import pytest

from normvar_core.pipeline.accumulators.twonn_stream import NeighbourState
from normvar_core.stats import geometry as G
from test_twonn_stream import _case, _streamed, brute_force


@pytest.mark.parametrize("trial", range(6))
def test_torch_search_equals_brute_force(trial, monkeypatch):
    monkeypatch.setattr(NeighbourState, "cpu_kernels", False)
    rng = np.random.default_rng(300 + trial)
    X, batch = _case(rng, trial)
    L, K, _ = X.shape
    want, copies = brute_force(X, G.twonn_batch_of(K, batch))
    got = _streamed(X, batch, rng.permutation(K), int(rng.integers(1, 4)), rng, lambda n: range(n))
    dup = got.dup.numpy()
    np.testing.assert_array_equal(dup.sum(1), copies)
    for l in range(L):
        np.testing.assert_array_equal(got.r[l].numpy()[~dup[l]], want[l][~dup[l]])
