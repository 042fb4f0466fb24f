"""The run without its first position (``pipeline/measures/position0.py``): in a real run of the tiny Llama decoder
over the shipped novels, ``layer_position0`` equals a float64 brute force over every counted embedding not at
position 0 (numpy's covariance and eigenvalues of exactly those rows), and the geometry's anisotropy the same over
every row; the backward Chan update equals the covariance of the rows kept, on rows whose first position is
10⁴ times larger than the rest (a decoder's attention sink); and the findings read both anisotropies from the
run. The contract (state round trip, merges, planned state, tables) is checked with every measure by the contract
test."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from recording import recorded_run

from normvar_core.config import RunConfig
from normvar_core.pipeline.measures.position0 import without_rows


def anisotropy(X: np.ndarray) -> float:
    lam = np.clip(np.linalg.eigvalsh(np.cov(X, rowvar=False, bias=True)), 0.0, None)
    return float(lam[-1] / lam.sum())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, tiny_models):
    from normvar_core.runs.reader import open_run

    cfg = RunConfig(model=str(tiny_models["llama"]), max_sentences=60, batch_size=8, name="p0", occurrences=0)
    path, source, measures = recorded_run(cfg, tmp_path_factory.mktemp("p0"))
    assert "position0" in measures
    return open_run(path), source.all_states(), source.all_positions()


def test_the_rest_equals_a_float64_brute_force(recorded):
    run, X, positions = recorded
    rest = positions != 0
    assert 0 < (~rest).sum() < rest.sum()
    got = run.table("layer_position0").sort_values("layer")
    geo = run.table("layer_geometry").set_index("layer")
    assert list(got["layer"]) == list(run.layers)
    assert (got["n_rest"] == rest.sum()).all() and (got["n_position0"] == (~rest).sum()).all()
    for (_, row), Xl in zip(got.iterrows(), X):
        R = Xl[rest]
        assert row["anisotropy_without_position0"] == pytest.approx(anisotropy(R), rel=1e-9)
        assert row["q_without_position0"] == pytest.approx(float((R * R).sum(1).mean()), rel=1e-9)
        assert geo.loc[row["layer"], "anisotropy"] == pytest.approx(anisotropy(Xl), rel=1e-9)


def test_the_backward_update_keeps_the_rest_exact_beside_a_massive_first_position():
    rng = np.random.default_rng(3)
    rest = rng.normal(size=(400, 16))
    first = rng.normal(size=(20, 16)) * 1e4 + 2e4  # the sink: 10⁴ times the rest's scale
    X = np.concatenate([first, rest])
    mean = torch.from_numpy(X.mean(0))
    scatter = torch.from_numpy((X - X.mean(0)).T @ (X - X.mean(0)))
    n_r, mean_r, scatter_r = without_rows(len(X), mean, scatter, torch.from_numpy(first))
    assert n_r == len(rest)
    np.testing.assert_allclose(mean_r.numpy(), rest.mean(0), atol=1e-9)
    want = (rest - rest.mean(0)).T @ (rest - rest.mean(0))
    # a few roundings of ε‖S‖ (‖S‖ ≈ 1e10 here) on entries of order 20 to 400 (a wrong term is off by ~1e8)
    np.testing.assert_allclose(scatter_r.numpy(), want, atol=64 * np.finfo(float).eps * np.abs(scatter.numpy()).max())


def test_the_findings_read_both_anisotropies(recorded):
    from normvar_core.stats.claims import RunView
    from normvar_core.stats.claims_geometry import position0_facts

    run, X, positions = recorded
    rv = RunView.of(run)
    layer = int(run.layers[-1])
    facts = position0_facts(rv, layer, share=0.5)
    want = anisotropy(X[-1][positions != 0])
    assert facts["anisotropy_without"] == pytest.approx(want, rel=1e-9)
    R = X[-1][positions != 0]
    assert facts["q_without"] == pytest.approx(float((R * R).sum(1).mean()), rel=1e-9)
    assert "without it" in facts["text"] and "not in this run" not in facts["text"]
