"""The manual's walk-through measure, the effective rank of every layer (``examples/effective_rank.py``), registered
with one line (``MEASURES + (EffectiveRankMeasure,)``) in a real run of the tiny BERT over the shipped novels:
its values equal a float64 brute force over every counted embedding (numpy's covariance and eigenvalues of the
states the source gave), and the run file carries its curve, which the Geometry page draws as a tab and the deck
as a slide. The contract itself (state round trip, two partial states merged equal to one stream, the planned
state) is checked with every other measure by ``tests/test_measure_contract.py``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from recording import recorded_run

from examples.effective_rank import EffectiveRankMeasure, effective_rank
from normvar_core.pipeline.measures import MEASURES

REGISTRY = MEASURES + (EffectiveRankMeasure,)  # the one line that registers it


@pytest.fixture(scope="module")
def run_path(tmp_path_factory, tiny_models) -> tuple[Path, list[np.ndarray]]:
    """(the published run with the measure, [(L, N_b, d) float64 states of every batch]) over 300 sentences."""
    from normvar_core.config import RunConfig

    cfg = RunConfig(model=str(tiny_models["bert"]), max_sentences=300, batch_size=32, name="erank")
    path, source, _ = recorded_run(cfg, tmp_path_factory.mktemp("erank"), registry=REGISTRY)
    return path, source.states


def test_the_effective_rank_equals_a_float64_brute_force(run_path):
    from normvar_core.runs.reader import open_run

    path, states = run_path
    X = np.concatenate(states, axis=1)  # (L, N, d): every counted embedding of the run
    run = open_run(path)
    got = run.table("layer_effective_rank").sort_values("layer")
    assert list(got["layer"]) == list(run.layers) and X.shape[1] == run.meta["n_embeddings"]
    want = [effective_rank(np.linalg.eigvalsh(np.cov(X[l], rowvar=False, bias=True))) for l in range(X.shape[0])]
    # the same covariance by two float64 routes (Chan's pooling over batches vs numpy's centred product of all
    # rows): 1e-9 relative; the values are well inside (1, d)
    np.testing.assert_allclose(got["effective_rank"].to_numpy(), want, rtol=1e-9)
    assert all(1.0 < v < X.shape[2] for v in want)
    # the definition itself: erank = d for a covariance with equal eigenvalues, 1 for a rank-one one
    assert effective_rank(np.full(7, 2.5)) == pytest.approx(7.0) and effective_rank(np.r_[3.0, np.zeros(5)]) == 1.0


def test_geometry_and_the_deck_show_it(run_path, monkeypatch):
    from dashboard_run import APP, arr, figure, ok, open_section
    from streamlit.testing.v1 import AppTest

    from normvar_core.report.slides import build_slides
    from normvar_core.runs.reader import open_run

    path, _ = run_path
    run = open_run(path)
    (curve,) = EffectiveRankMeasure.curves
    assert run.curves == tuple(c for cls in REGISTRY if cls.name in run.measures for c in cls.curves)
    assert curve in run.curves
    monkeypatch.setenv("NORMVAR_DATA", str(path.parent.parent))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"run": "erank"})
    at.run()
    at.switch_page("views/geometry.py").run()
    ok(at)
    fig = figure(open_section(at, "geometry", curve.title), curve.title)
    [line] = [t for t in fig["data"] if t.get("name") == "erank"]
    want = run.table(curve.table).sort_values("layer")
    np.testing.assert_array_equal(arr(line["y"]), want[curve.column].to_numpy())  # the table's values, as stored
    titles = [s.title for s in build_slides([run])]
    assert any(curve.title in t for t in titles), titles
