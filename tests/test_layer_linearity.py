"""The layer linearity measure (``pipeline/measures/layer_linearity.py``; formulas ``stats/layer_linearity.py``): in a
real run of the tiny BERT over the shipped novels, linear CKA and the linearity score of every pair of consecutive
hidden states — and both on the residual-free difference h_l+1 − h_l — equal a float64 brute force over every
counted embedding (CKA from the n × n Gram matrices, the score from numpy's least squares of X̃A ≈ Ỹ), on the whole
run and on each split half; a run interrupted and resumed from its checkpoint, and a run sharded over Ray actors,
equal the single-process run; the claim's verdict follows its interval against a closed-form case."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from recording import recorded_run

from normvar_core.config import RunConfig
from normvar_core.pipeline.measures.halves import half_of
from normvar_core.stats import layer_linearity as LL
from normvar_core.stats.bootstrap import T1_95


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, tiny_models):
    """(the published run, (L, N, d) float64 states of every counted embedding, their sentence ids)."""
    from normvar_core.runs.reader import open_run

    cfg = RunConfig(
        model=str(tiny_models["bert"]),
        max_sentences=150,
        batch_size=16,
        name="lin",
        geometry=False,
        layer_linearity=True,
        halves=False,
        occurrences=0,
    )  # the measure alone streams its halves: the others left out
    path, source, measures = recorded_run(cfg, tmp_path_factory.mktemp("lin"))
    assert LL.MEASURE in measures
    return open_run(path), source.all_states(), source.all_sentences()


def brute_cka(X: np.ndarray, Y: np.ndarray) -> float:
    """Linear CKA from the n × n Gram matrices of the centred rows: ⟨K, L⟩_F / (‖K‖_F ‖L‖_F) (Kornblith et al.
    2019, eq. 4 with linear kernels: HSIC's centring is the rows' centring)."""
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    K, L = Xc @ Xc.T, Yc @ Yc.T
    return float(np.sum(K * L) / (np.linalg.norm(K) * np.linalg.norm(L)))


def brute_linearity(X: np.ndarray, Y: np.ndarray) -> float:
    """1 − min_A ‖X̃A − Ỹ‖²_F by numpy's least squares on the centred, unit-Frobenius-norm layers (singular values of
    X̃ below √RCOND of the largest dropped, as the measure's pseudo-inverse drops the scatter's eigenvalues)."""
    Xt = (X - X.mean(0)) / np.linalg.norm(X - X.mean(0))
    Yt = (Y - Y.mean(0)) / np.linalg.norm(Y - Y.mean(0))
    A = np.linalg.lstsq(Xt, Yt, rcond=np.sqrt(LL.RCOND))[0]
    return float(1.0 - np.sum(np.square(Xt @ A - Yt)))


def brute_fold(Xtr, Ytr, Xte, Yte) -> tuple[float, float]:
    """(RSS, TSS) of numpy's least squares with an intercept fitted on the training rows, predicting the test rows
    (TSS about the test rows' mean); singular values below √RCOND of the largest dropped, as the measure's."""
    mx, my = Xtr.mean(0), Ytr.mean(0)
    A = np.linalg.lstsq(Xtr - mx, Ytr - my, rcond=np.sqrt(LL.RCOND))[0]
    pred = (Xte - mx) @ A + my
    return float(np.sum(np.square(Yte - pred))), float(np.sum(np.square(Yte - Yte.mean(0))))


def brute_cross_fitted(X, Y, half) -> dict[str, float]:
    """The cross-fitted score by brute force: fitted on one half's embeddings, scored on the other's, both ways."""
    a, b = half == 0, half == 1
    rab, tb = brute_fold(X[a], Y[a], X[b], Y[b])
    rba, ta = brute_fold(X[b], Y[b], X[a], Y[a])
    return {"xfit": 1 - (rab + rba) / (ta + tb), "xfit_ab": 1 - rab / tb, "xfit_ba": 1 - rba / ta}


def brute(X: np.ndarray, Y: np.ndarray) -> dict[str, float]:
    return {
        "cka": brute_cka(X, Y),
        "linearity": brute_linearity(X, Y),
        "cka_residual_free": brute_cka(X, Y - X),
        "linearity_residual_free": brute_linearity(X, Y - X),
    }


def test_cka_and_the_linearity_score_equal_a_float64_brute_force_over_every_embedding(recorded):
    run, X, sentences = recorded
    got = run.table(LL.TABLE).sort_values("layer")
    L = X.shape[0]
    assert X.shape[1] == run.meta["n_embeddings"] and list(got["layer"]) == list(run.layers[:-1])
    assert list(got["next_layer"]) == list(run.layers[1:]) and (got["n"] == X.shape[1]).all()
    half = half_of(sentences)
    for j in range(L - 1):
        row = got.iloc[j]
        for tag, rows in (("", slice(None)), ("_a", half == 0), ("_b", half == 1)):
            want = brute(X[j, rows], X[j + 1, rows])
            for q in LL.QUANTITIES:
                # the same quantity by two float64 routes (streamed, Chan-pooled scatters vs every embedding at once)
                assert row[q + tag] == pytest.approx(want[q], rel=1e-9, abs=1e-12), (j, q + tag)
        for q in LL.QUANTITIES:  # the split-half interval: θ ± t₁ |θ_A − θ_B| / 2
            w = T1_95 * abs(row[q + "_a"] - row[q + "_b"]) / 2
            assert row[q + "_low"] == pytest.approx(max(row[q] - w, 0.0), abs=1e-15)
            assert row[q + "_high"] == pytest.approx(min(row[q] + w, 1.0), abs=1e-15)
        for q, target in (("linearity", X[j + 1]), ("linearity_residual_free", X[j + 1] - X[j])):
            want = brute_cross_fitted(X[j], target, half)
            for k, v in want.items():
                assert row[f"{q}_{k}"] == pytest.approx(v, rel=1e-8, abs=1e-10), (j, q, k)
            w = T1_95 * abs(row[f"{q}_xfit_ab"] - row[f"{q}_xfit_ba"]) / 2
            assert row[f"{q}_xfit_low"] == pytest.approx(row[f"{q}_xfit"] - w, abs=1e-12)
            assert row[f"{q}_xfit_high"] == pytest.approx(min(row[f"{q}_xfit"] + w, 1.0), abs=1e-12)
            assert row[f"{q}_xfit"] < row[q]  # fitted on half the data and scored out of sample: lower
        assert row["dim"] == X.shape[2]
    # not a degenerate case: values inside (0, 1), the residual-free ones differing, and the two halves differing
    values = got[list(LL.QUANTITIES)].to_numpy()
    assert ((values > 0.05) & (values < 0.9999)).all(), values
    assert (got["linearity_a"] != got["linearity_b"]).all()
    assert (got["linearity_residual_free"] != got["linearity"]).all()


def test_the_pseudo_inverse_leaves_out_only_rounding():
    """A post-LayerNorm layer lies in a hyperplane: its scatter's smallest eigenvalue is rounding. The score is the
    regression's R² on the other directions, and a direction with real variance 1e-8 of the largest is kept."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 6))
    X[:, 5] = -X[:, :5].sum(1)  # the rows sum to 0: rank 5 in exact arithmetic
    X[:, 0] *= 1e-4  # a real direction with 1e-8 of the largest variance
    Y = X @ rng.standard_normal((6, 6)) + 0.3 * rng.standard_normal((500, 6))
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    got = LL.linearity_score(Xc.T @ Xc, Yc.T @ Yc, Xc.T @ Yc)
    Q = np.linalg.svd(Xc, full_matrices=False)[0][:, :5]  # the column space of X: 5 directions
    assert got == pytest.approx(np.sum(np.square(Q.T @ Yc)) / np.sum(Yc * Yc), rel=1e-9)
    # CKA of a layer with itself is 1, the score of a layer on itself 1 (and 0 for the residual-free difference)
    v = LL.pair_values(Xc.T @ Xc, Xc.T @ Xc, Xc.T @ Xc)
    assert v["cka"] == pytest.approx(1.0) and v["linearity"] == pytest.approx(1.0)
    assert np.isnan(v["cka_residual_free"]) and v["linearity_residual_free"] != v["linearity_residual_free"]


def _compute(cfg, root, **kw):
    from normvar_core.pipeline.execute.local import compute_run
    from normvar_core.runs.reader import open_run

    return open_run(compute_run(cfg, root, **kw))


@pytest.fixture(scope="module")
def base(tiny_models, corpus40) -> RunConfig:
    return RunConfig(
        model=str(tiny_models["bert"]),
        corpus=str(corpus40),
        batch_size=4,
        samples_per_token=2,
        id_sample=64,
        occurrences=0,
        geometry=False,
        halves=False,
        layer_linearity=True,
        name="one",
    )


@pytest.fixture(scope="module")
def one(base, tmp_path_factory):
    """The single-process run the others must equal."""
    return _compute(base, tmp_path_factory.mktemp("one"))


def _same_table(a, b, rtol: float) -> None:
    x, y = (r.table(LL.TABLE).sort_values("layer").reset_index(drop=True) for r in (a, b))
    assert list(x.columns) == list(y.columns) and len(x) == len(y) > 0
    pd.testing.assert_frame_equal(x, y, check_exact=False, rtol=rtol, atol=1e-12)


def test_a_run_interrupted_and_resumed_from_its_checkpoint_equals_one_pass(base, one, tmp_path):
    from normvar_core.errors import CancelledError

    ckpt = tmp_path / "ck" / "r.ckpt"
    with pytest.raises(CancelledError):  # stopped once the first checkpoint is written
        _compute(base, tmp_path / "a", checkpoint=ckpt, checkpoint_every_s=0.0, should_cancel=ckpt.exists)
    assert ckpt.exists() and not list((tmp_path / "a").rglob("*.duckdb"))
    resumed = _compute(base, tmp_path / "a", checkpoint=ckpt)
    assert resumed.meta["notes"]["resumed_from_batch"] > 0
    _same_table(resumed, one, rtol=1e-10)  # the same states, pooled in another grouping: rounding only


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_ray_run_equals_one_process(base, one, tmp_path, monkeypatch):
    import shutil
    import tempfile
    from pathlib import Path

    import ray

    ray_tmp = Path(tempfile.mkdtemp(prefix="nvray", dir="/tmp"))
    monkeypatch.setenv("RAY_TMPDIR", str(ray_tmp))
    try:
        sharded = _compute(base.replace(executor="ray", workers=2), tmp_path / "r")
    finally:
        ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert sharded.meta["notes"]["executor"] == "ray" and sharded.meta["notes"]["shards"] >= 2
    _same_table(sharded, one, rtol=1e-5)  # the actors' forward passes run in other processes: float32 rounding


class _Run:
    """A run file's view for the claim: its table and its name."""

    def __init__(self, table: pd.DataFrame):
        self.table_names, self._t = (LL.TABLE,), table

    def table(self, name):
        return self._t


def _view(ins, xfit=None, decoder: bool = True, n: int = 100_000, dim: int = 100, drop=()):
    """A RunView of 9 hidden states whose pairs' in-sample scores on the halves are ``ins`` = (a, b) and whose
    cross-fitted folds are ``xfit`` = (a→b, b→a) (the middle pairs carry them, the outer pairs 0.1); ``drop``:
    columns left out of the table."""
    from normvar_core.stats.claims import RunView

    outer = [0.1, 0.1]  # pairs 0→1, 1→2 and 6→7, 7→8 must not count

    def col(v):
        return np.asarray(outer + [v] * 4 + outer, float)

    a, b = col(ins[0]), col(ins[1])
    cols = {
        "layer": np.arange(8),
        "next_layer": np.arange(1, 9),
        "n": np.full(8, n),
        "dim": np.full(8, dim),
        "linearity": (a + b) / 2,
        "linearity_a": a,
        "linearity_b": b,
        "linearity_residual_free": (a + b) / 4,
    }
    if xfit is not None:
        ab, ba = col(xfit[0]), col(xfit[1])
        cols.update(linearity_xfit=(ab + ba) / 2, linearity_xfit_ab=ab, linearity_xfit_ba=ba)
    t = pd.DataFrame({k: v for k, v in cols.items() if k not in drop})
    return RunView(
        name="x",
        layers=list(range(9)),
        num_hidden_states=9,
        is_decoder=decoder,
        norm_placement="",
        is_null=False,
        exclude_position0=False,
        token_ids=np.zeros(0, np.int64),
        n=np.zeros(0, np.int64),
        q=np.zeros((0, 0)),
        m=np.zeros((0, 0)),
        v=np.zeros((0, 0)),
        layer_stats=pd.DataFrame(),
        halves=None,
        geometry=None,
        outliers=None,
        run=_Run(t),
    )


def test_the_claim_decides_on_the_cross_fitted_score_between_the_two_scores():
    # 9 hidden states (0..8): the middle half is relative depth [1/4, 3/4] = layers 2..6, so pairs 2→3 .. 5→6
    assert list(LL.middle_pairs(_view((0, 0)).run.table(LL.TABLE), 9)["layer"]) == [2, 3, 4, 5]
    # in-sample 0.986 (halves 0.985 / 0.987), cross-fitted 0.976 (folds 0.975 / 0.977): the interval runs from the
    # cross-fitted low end 0.976 − t₁ · 0.001 to the in-sample high end 0.986 + t₁ · 0.001, above 0.95
    f = LL.layers_linear(_view((0.985, 0.987), (0.975, 0.977), decoder=True))
    assert f.verdict == "holds" and f.value == pytest.approx(0.976)
    assert f.interval == pytest.approx([0.976 - T1_95 * 0.001, 0.986 + T1_95 * 0.001])
    assert f.details["in_sample"] == pytest.approx(0.986) and f.details["per_dim"] == pytest.approx(1000)
    assert "cross-fitted" in f.why and "in-sample score 0.986" in f.why and "1e+03 embeddings per dimension" in f.why
    # the same numbers in an encoder: it should be lower, and is not
    assert LL.layers_linear(_view((0.985, 0.987), (0.975, 0.977), decoder=False)).verdict == "fails"
    # a small corpus: in-sample 0.961 (the protocol's score, above 0.95) but cross-fitted 0.901: the two bracket
    # 0.95, and the finding says the sample size is why
    f = LL.layers_linear(_view((0.96, 0.962), (0.9, 0.902), decoder=False, n=3605, dim=384))
    assert f.verdict == "cannot tell" and f.interval[0] < LL.LINEAR_MIN < f.interval[1]
    assert "3,605 / 384 = 9.39 embeddings per dimension" in f.why and "more sentences narrow the gap" in f.why
    # an encoder well below: holds; a decoder well below: fails
    assert LL.layers_linear(_view((0.6, 0.62), (0.58, 0.6), decoder=False)).verdict == "holds"
    assert LL.layers_linear(_view((0.6, 0.62), (0.58, 0.6), decoder=True)).verdict == "fails"


def test_the_claim_cannot_tell_on_too_few_embeddings_or_an_incomplete_table():
    # 5 embeddings of 384 dimensions (a one-sentence run): any map fits a half exactly
    f = LL.layers_linear(_view((1.0, 1.0), (0.2, 0.3), decoder=True, n=5, dim=384))
    assert f.verdict == "cannot tell" and f.value is None and "no more embeddings than dimensions" in f.why
    # a run file written before the cross-fitted score: the in-sample score alone cannot decide
    f = LL.layers_linear(_view((0.985, 0.987)))
    assert f.verdict == "cannot tell" and "no cross-fitted score" in f.why
    # a table missing a column the claim reads: untestable, naming it, no KeyError
    f = LL.layers_linear(_view((0.985, 0.987), (0.975, 0.977), drop=("linearity_b",)))
    assert f.verdict == "untestable" and "lacks linearity_b" in f.why


def test_the_run_file_declares_its_curves_and_the_findings_state_the_claim(recorded):
    from normvar_core.stats.findings import findings

    run = recorded[0]
    from normvar_core.pipeline.measures.layer_linearity import LayerLinearityMeasure

    assert set(LayerLinearityMeasure.curves) <= set(run.curves)
    f = next(f for f in findings(run, resamples=50) if f.id == "layers_linear")
    # 3 hidden states: the middle half [0.5, 1.5] of depth holds no pair of consecutive hidden states
    assert f.verdict == "untestable" and "middle half" in f.why


def test_the_gaussian_null_has_the_table_with_independent_layers_at_chance(recorded, tmp_path):
    """The isotropic null draws every layer independently: the regression of one layer on the other explains
    d / (N − 1) of it by chance (each output's R² is Beta(d/2, (N − 1 − d)/2)), and CKA ≈ d / N."""
    from normvar_core.pipeline.execute.null_run import write_null_run
    from normvar_core.runs.reader import open_run

    run = recorded[0]
    null = open_run(write_null_run(run, "isotropic", tmp_path / "null.duckdb", seed=1))
    t, real = null.table(LL.TABLE), run.table(LL.TABLE)
    assert list(t.columns) == list(real.columns) and list(t["layer"]) == list(real["layer"])
    assert LL.MEASURE in null.meta["accumulators"]
    N, d = int(run.meta["n_embeddings"]), int(run.dim)
    np.testing.assert_allclose(t["linearity"], d / (N - 1), rtol=0.2)
    np.testing.assert_allclose(t["cka"], d / N, rtol=0.3)
    assert (t["linearity"] < 0.1 * real["linearity"]).all()  # the real layers are far from independent


def test_the_curve_draws_the_tables_own_interval_as_its_band(recorded):
    """The declared curve's figure (the Geometry page's tab and the deck's slide) takes the band from the table's
    ``<column>_low`` and ``<column>_high`` when the run's ``intervals`` table has no rows of the column."""
    from normvar_core.pipeline.measures.layer_linearity import LayerLinearityMeasure
    from normvar_core.viz.curve_figures import layer_curve_figure

    table = recorded[0].table(LL.TABLE).sort_values("layer")
    curve = LayerLinearityMeasure.curves[0]
    fig = layer_curve_figure({"lin": table}, curve=curve, relative=False)
    [band] = [t for t in fig.data if t.fill == "tonexty"]
    [upper] = [t for t in fig.data if t.name == "lin: 95 % split-half interval (upper edge)"]
    np.testing.assert_array_equal(band.y, table["linearity_low"])
    np.testing.assert_array_equal(upper.y, table["linearity_high"])
    [line] = [t for t in fig.data if t.name == "lin"]
    np.testing.assert_array_equal(line.y, table["linearity"])


def test_the_deck_draws_the_cross_fitted_score_and_states_the_claim(one):
    """The declared curves' slides: the cross-fitted score has its own, drawn from the table's column, and every
    linearity slide states the verdict of ``layers_linear`` (with its reason)."""
    from normvar_core.report.slides import declared_slides

    slides = {s.title: s for s in declared_slides([one])}
    xf = slides["Linearity, cross-fitted"]
    [line] = [t for t in xf.figure.data if t.name == one.name]
    np.testing.assert_allclose(line.y, one.table(LL.TABLE).sort_values("layer")["linearity_xfit"], atol=1e-12)
    for title in (
        "Linearity between consecutive layers",
        "Linearity, cross-fitted",
        "Linear CKA between consecutive layers",
    ):
        assert "claim layers_linear — " in slides[title].takeaway, title
