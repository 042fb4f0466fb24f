"""The footnote-7 pooling toggle ("##ing" with "ing"): on Trade-off, Layers, Decomposition and Frequency the
plotted types and fits are those of ``analyses.merge_by_key`` over the stripped keys — exact pooled moments
checked against a float64 brute force in test_analyses — and the toggle lives in the URL (?pool=1)."""

from __future__ import annotations

import numpy as np
from dashboard_run import arr, figure, open_page, trace

from normvar_core.stats import analyses


def _pooled(run):
    keys = [analyses.strip_prefix(t) for t in run.tokens()["token"].astype(str)]
    return analyses.merge_by_key(run.stats(), keys)


def test_pooling_toggle_plots_the_pooled_types(app, run):
    merged, keys = _pooled(run)
    assert len(keys) < run.stats().num_types  # MiniLM's WordPiece has "##x" next to "x" in this corpus
    at = open_page(app, "tradeoff", layer="3", pool="1")
    assert at.toggle(key="w_pool").value is True
    pts = trace(figure(at, "layer 3"), "token types")
    li = merged.layer(3)
    keep = (merged.n >= 10) & (merged.n <= 1e5)
    assert len(arr(pts["x"])) == int(keep.sum())
    np.testing.assert_allclose(np.sort(arr(pts["x"])), np.sort(merged.m[li, keep]), rtol=1e-9)
    want = analyses.tradeoff(merged, 10, 1e5).set_index("layer")

    at.switch_page("views/layers.py").run()
    assert not at.exception and at.toggle(key="w_pool").value is True  # the toggle carries over
    slope = [t for t in figure(at, "")["data"] if t.get("mode") == "lines+markers"][1]
    np.testing.assert_allclose(arr(slope["y"]), want.sort_index()["slope"].to_numpy(), rtol=1e-9)

    at.toggle(key="w_pool").set_value(False).run()
    slope = [t for t in figure(at, "")["data"] if t.get("mode") == "lines+markers"][1]
    raw = analyses.tradeoff(run.stats(), 10, 1e5).sort_values("layer")["slope"].to_numpy()
    np.testing.assert_allclose(arr(slope["y"]), raw, rtol=1e-9)
    assert "pool" not in at.query_params
