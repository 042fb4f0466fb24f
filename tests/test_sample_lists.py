"""The TwoNN sample's search after the pass (``pipeline.measures.sample_lists``), which the geometry reads its TwoNN
from when the neighbourhoods are on: a subset's two nearest read from the 128-NN lists (a row whose list holds fewer
than two of the subset searched apart) equal a float64 brute force, and on real MiniLM states the geometry's every
TwoNN number (per batch, cross-context, same-sentence share, decimation curve) equals the streamed search's
(``twonn_stream``, the path of ``--no-neighbourhoods``) to float64 rounding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from normvar_core.pipeline.measures.sample_lists import nearest_members
from normvar_core.stats import knn
from normvar_core.stats.twonn_context import pair_distance


@pytest.mark.parametrize("masked", [False, True])
def test_a_subsets_two_nearest_from_short_lists_equal_the_brute_force(masked):
    """Lists 6 deep and a subset of an eighth of the rows: most rows' lists hold fewer than two of the subset and are
    searched apart; every row's two nearest in the subset (over other sentences when masked) are the brute force's."""
    rng = np.random.default_rng(5)
    X = (rng.standard_normal((300, 4)) @ rng.standard_normal((4, 12))).astype(np.float32)
    X[40:44] = X[40:44].round(0)  # ties
    sent = rng.integers(0, 50, 300)
    member = rng.random(300) < 1 / 8
    dist, idx = knn.searches(X, 6, groups=sent)
    d, i = dist[int(masked)], idx[int(masked)]
    apart = []

    def search(r: int) -> np.ndarray:
        apart.append(r)
        ok = member.copy()
        ok[r] = False
        if masked:
            ok &= sent != sent[r]
        return pair_distance(X[[r]], X[ok])

    got = nearest_members(d, i, member, search)
    D = np.sqrt(np.square(X[:, None].astype(np.float64) - X[None].astype(np.float64)).sum(-1))
    np.fill_diagonal(D, np.inf)
    D[:, ~member] = np.inf
    if masked:
        D[sent[:, None] == sent[None, :]] = np.inf
    want = np.sort(D, axis=1)[:, :2]
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)
    assert 100 < len(apart) < 300  # most rows searched apart, and rows whose list held two were not


@pytest.mark.model
def test_the_twonn_read_from_the_lists_equals_the_streamed_search(minilm_path):
    """MiniLM over 300 sentences (one TwoNN batch of 4,096; layer 0 holds copies; many same-sentence neighbours at the
    last layer): the geometry with the neighbourhoods on (TwoNN from the search after the pass) and off (the search
    during the pass) give the same ``layer_geometry`` rows and decimation rows, to float64 rounding."""
    from test_twonn_stream import geometry_pass

    lists, _ = geometry_pass(300, 4096, True)
    streamed, _ = geometry_pass(300, 4096, False)
    assert not hasattr(lists, "r") and hasattr(streamed, "r")  # the stream's state is not kept with the lists
    a, b = lists.result(), streamed.result()
    assert "lists" in a and "lists" not in b
    assert a["rows"][0]["twonn_duplicates"] > 0 and a["rows"][-1]["same_sentence_nn"] > 0.2
    for got, want in [*zip(a["rows"], b["rows"]), *zip(a["decimation"], b["decimation"])]:
        assert got.keys() == want.keys()
        for key, v in want.items():
            if isinstance(v, float) and math.isnan(v):
                assert math.isnan(got[key]), key
            else:  # a std of nearly equal estimates cancels: its absolute error is the estimates' rounding
                assert got[key] == pytest.approx(v, rel=1e-12, abs=1e-13), (want["layer"], key)
