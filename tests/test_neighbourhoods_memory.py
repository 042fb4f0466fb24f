"""The geometry's and the neighbourhoods' results stay within the memory their classes plan for them
(``publish_bytes``): the peak of the host arrays that ``result()`` allocates (numpy's allocations, traced by
``tracemalloc``, every thread's) on a real MiniLM pass (150 sentences, a one-batch TwoNN sample of 600), and on a
one-batch sample holding copies, ties and long sentences (a decoder's pattern: the first position's state equal in
every sentence) — no phase holds more than half a B x B matrix per search (the Gram products, each pair's once), and
the plan covers what the search (the geometry's, after the pass: ``sample_lists``) really holds."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

pytestmark = pytest.mark.model


def _traced_peak(fn):
    """The traced peak of fn(), its search's numba kernel compiled first (numba's compiler allocates through Python:
    on a fresh clone, with no numba cache, the first search would count the compiler's memory as the search's)."""
    from normvar_core.stats import knn

    rng = np.random.default_rng(0)
    knn.searches(rng.random((40, 3)), 4, groups=rng.integers(0, 5, 40), first=rng.random(40) < 0.9)
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_neighbourhoods_and_the_geometrys_results_stay_within_their_plan(minilm_pass_150):
    measures = minilm_pass_150["measures"]
    geo, nb = measures["geometry"], measures["neighbourhoods"]
    ctx = nb.ctx
    searched, gpeak = _traced_peak(geo.result)
    gplan = type(geo).publish_bytes(ctx)
    assert 0 < gpeak <= gplan, (gpeak >> 10, gplan >> 10)
    assert gpeak > 0.4 * gplan  # the plan is the search's, not a loose bound that any result would meet
    nb.take_results({"geometry": searched})
    result, peak = _traced_peak(nb.result)
    assert result["gride"] and result["overlap"]
    assert 0 < peak <= type(nb).publish_bytes(ctx), (peak >> 10, type(nb).publish_bytes(ctx) >> 10)


def test_a_one_batch_sample_with_copies_is_searched_within_the_plan(minilm_pass_150):
    """The pass's sample made a decoder's: a fifth of the rows copies of others at every layer, ties (coarse
    values); the result still equals the brute force (``test_neighbourhoods``'s rule) and its
    traced peak is within ``publish_bytes``."""
    import torch
    from brute import knn_lists, overlap_by_sets

    measures = minilm_pass_150["measures"]
    geo, nb = measures["geometry"], measures["neighbourhoods"]
    saved = geo.sample.clone()
    try:
        rng = np.random.default_rng(3)
        K = saved.shape[1]
        src = rng.choice(K, K // 5, replace=False)
        dst = rng.choice(np.setdiff1d(np.arange(K), src), K // 5, replace=False)
        geo.sample[:, dst] = geo.sample[:, src]
        geo.sample[:, :20] = torch.round(geo.sample[:, :20])
        searched, peak = _traced_peak(geo.result)
        assert 0 < peak <= type(geo).publish_bytes(nb.ctx), (peak >> 10, type(geo).publish_bytes(nb.ctx) >> 10)
        assert all(r["twonn_duplicates"] >= K // 5 - 20 for r in searched["rows"])  # less the copies rounded
        nb.take_results({"geometry": searched})
        result, peak = _traced_peak(nb.result)
        assert 0 < peak <= type(nb).publish_bytes(nb.ctx), (peak >> 10, type(nb).publish_bytes(nb.ctx) >> 10)
        sent = np.asarray(geo.uplan.sentence)
        last = len(geo.layers) - 1
        X0, XL = geo.sample[0].numpy(), geo.sample[last].numpy()
        for masked in (False, True):
            _, a = knn_lists(X0, 10, sent if masked else None)
            _, b = knn_lists(XL, 10, sent if masked else None)
            want = overlap_by_sets(a, b, 10)
            row = [r for r in result["overlap"] if r["layer"] == int(geo.layers[0])][0]
            got = row["overlap_last_masked" if masked else "overlap_last"]
            assert got == pytest.approx(want, abs=1e-12), masked
    finally:
        geo.sample.copy_(saved)
