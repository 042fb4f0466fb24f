"""Gaussian null runs (seed 003): shapes equal to the source run's; the sufficient-statistic draws equal
brute-force simulation in distribution; the isotropic null's closed forms; the CLI."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from normvar_core.errors import NormvarError
from normvar_core.pipeline.execute.null_run import write_null_run
from normvar_core.pipeline.measures import MEASURES
from normvar_core.pipeline.measures.base import Measure
from normvar_core.runs.reader import list_runs, open_run
from normvar_core.service import cli
from normvar_core.stats import analyses
from normvar_core.stats.null import draw_type_moments, null_stats
from normvar_core.stats.tokenstats import TokenStats

NO_NULL = Measure.null_tables.__func__  # the base class's: a measure without a Gaussian null


def _qmv(mean, S, n):
    m = (mean**2).sum(-1)
    v = S / n
    return m + v, m, v


@pytest.mark.parametrize("n,d", [(2, 8), (5, 8), (30, 3)])
def test_sufficient_statistics_equal_brute_force_in_distribution(n, d):
    rng = np.random.default_rng(0)
    reps = 4000
    mu = np.linspace(-1, 2, d)
    s2 = 0.7
    # brute force: n draws of N(mu, s2 I), per repetition
    X = mu + np.sqrt(s2) * rng.standard_normal((reps, n, d))
    xbar = X.mean(1)
    bq, bm, bv = _qmv(xbar, ((X - xbar[:, None]) ** 2).sum((1, 2)), n)
    mean, S = draw_type_moments(np.tile(mu, (reps, 1)), s2, np.full(reps, n), rng)
    q, m, v = _qmv(mean, S, n)
    for a, b in ((q, bq), (m, bm), (v, bv)):
        se = np.sqrt(a.var() / reps + b.var() / reps)
        assert abs(a.mean() - b.mean()) < 4.5 * se, (a.mean(), b.mean(), se)
        assert abs(a.var() / b.var() - 1) < 0.12  # spreads agree too
    # closed forms: E[V] = s2 d (n-1)/n, E[M] = |mu|^2 + s2 d / n
    assert abs(v.mean() - s2 * d * (n - 1) / n) < 4.5 * v.std() / np.sqrt(reps)
    assert abs(m.mean() - (mu @ mu + s2 * d / n)) < 4.5 * m.std() / np.sqrt(reps)


def test_isotropic_closed_forms():
    rng = np.random.default_rng(1)
    T, d = 3000, 256
    n = np.unique(np.round(10 ** rng.uniform(1, 4, T)).astype(np.int64))
    T = n.size
    base = TokenStats.from_moments(np.arange(T), n, np.zeros((1, T, d)), np.full((1, T), d * 1.0) * n)
    totals = pd.DataFrame({"layer": [0], "q": [float(d)], "m": [0.0], "v": [float(d)]})
    st = null_stats("isotropic", base, totals, seed=3)
    cv = st.q[0].std() / st.q[0].mean()
    assert cv == pytest.approx(np.sqrt(2 / d * np.mean(1 / n)), rel=0.1)  # seed 003: concentration
    slope = np.polyfit(np.log10(n), np.log10(st.m[0]), 1)[0]
    assert slope == pytest.approx(-1.0, abs=0.05)  # M ~ 1/n_t
    assert np.median(st.m[0] / st.v[0] * n) == pytest.approx(1.0, rel=0.1)  # M/V ~ 1/n_t


def test_null_run_has_the_shape_of_its_source(tmp_path, written_run_path):
    run = open_run(written_run_path)
    for kind in ("isotropic", "offset", "matched"):
        path = write_null_run(run, kind, tmp_path / f"n-{kind}.duckdb", seed=2)
        null = open_run(path)
        assert null.meta["source"] == f"null:{kind}:{run.name}" and null.meta["notes"]["null"]["seed"] == 2
        # the measures of the run that declare a Gaussian null (override Measure.null_tables), in registry order
        declared = [c.name for c in MEASURES if c.name in run.measures and c.null_tables.__func__ is not NO_NULL]
        assert null.layers == run.layers and null.dim == run.dim and null.measures == declared
        assert declared[:2] == ["moments", "geometry"]
        geo = null.table("layer_geometry")
        assert geo["layer"].tolist() == run.layers and (geo["n"] == run.layer_stats()["n"].to_numpy()).all()
        assert set(run.table("layer_geometry").columns) == set(geo.columns)
        # the trace of the null's covariance is its V(X) (eq. 6): the within part was rescaled to Σ S_t
        np.testing.assert_allclose(geo["trace"], null.layer_stats()["v"], rtol=1e-9)
        for layer in run.layers:
            a, b = run.token_table(layer), null.token_table(layer)
            assert a["token_id"].tolist() == b["token_id"].tolist() and a["token"].tolist() == b["token"].tolist()
            assert a["n"].tolist() == b["n"].tolist()
        st = null.stats()
        np.testing.assert_allclose(st.q, st.m + st.v, rtol=1e-12)
        ls = null.layer_stats()
        if kind == "offset":  # the same Q(X) and M(X) as the source, up to sampling error
            src = run.layer_stats()
            np.testing.assert_allclose(ls["q"], src["q"], rtol=0.15)
    with pytest.raises(NormvarError, match="itself a null run"):
        write_null_run(open_run(path), "isotropic", tmp_path / "x.duckdb")


def test_null_cli(tmp_path, capsys, written_run_path):
    data = tmp_path / "data"
    (data / "runs").mkdir(parents=True)
    import shutil

    shutil.copy(written_run_path, data / "runs" / "g.duckdb")
    assert cli.main(["null", "g", "--kind", "matched", "--seed", "1", "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out.strip()
    assert out.endswith("g__null-matched-s1.duckdb")
    runs = list_runs(data).set_index("name")
    assert runs.loc["g__null-matched-s1", "source"] == "null:matched:g"
    assert cli.main(["null", "g", "--kind", "matched", "--seed", "1", "--data-dir", str(data)]) == 2  # taken
    assert cli.main(["null", "nope", "--data-dir", str(data)]) == 2
    assert cli.main(["null", "g", "--seed", "-3", "--data-dir", str(data)]) == 2
    tr = analyses.tradeoff(open_run(out).stats(), 1, 1e9)
    assert len(tr) == len(open_run(out).layers)


def test_every_page_overlays_the_gaussian_null(tmp_path, monkeypatch, data_dir):
    """Runs page button queues the null (a worker job); Layers, Decomposition, Frequency, Trade-off and Geometry overlay
    it (dashed grey lines, a grey cloud behind scatters) with the null run's own values; the choice
    carries from page to page and into the URL."""
    import shutil

    from dashboard_run import APP, RUN, arr, figure, figures_of, open_section
    from streamlit.testing.v1 import AppTest

    from normvar_core.viz.overlay import NULL_CLOUD

    data = tmp_path / "data"
    shutil.copytree(data_dir / "runs", data / "runs")
    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"run": RUN})
    at.run()
    at.switch_page("views/runs.py").run()
    at.selectbox(key="w_null_kind").set_value("offset")
    at.button(key="w_null_go").click().run()
    assert not at.exception and any("Queued job" in s.value for s in at.success)
    from normvar_core.service import jobs as J
    from normvar_core.service import worker as W

    W.Worker(data, poll_s=0.05).run(once=True, install_signals=False)  # the worker draws it
    [job] = J.JobStore(data).list()
    assert job.task == "null" and job.state == "done", job
    # the progress line ends on "done", and the Runs page keeps it, full, for a while
    assert job.progress["phase"] == "done" and J.progress_text(job.progress, job.task).startswith("null · done")
    at.switch_page("views/runs.py").run()
    # a finished job is a green line naming its last progress, not a full (red) bar
    done = [x.value for x in at.success if "null · done" in x.value]
    assert done and not [b for b in at.get("progress") if "null · done" in str(b.proto.text)], [
        x.value for x in at.success
    ]
    null_name = f"{RUN}__null-offset-s0"
    null = open_run(data / "runs" / f"{null_name}.duckdb")
    assert null.has("layer_geometry")

    def dashed(fig):
        return [t for t in fig["data"] if (t.get("line") or {}).get("dash") == "dash" and "Gaussian null" in t["name"]]

    at.switch_page("views/layers.py").run()
    at.selectbox(key="w_null").set_value(null_name).run()
    assert not at.exception and null_name in str(at.query_params["null"])
    lines = dashed(figure(at, ""))
    assert len(lines) == 3
    want = analyses.tradeoff(null.stats(), 10, 1e5)
    np.testing.assert_allclose(arr(lines[1]["y"]), want.sort_values("layer")["slope"].to_numpy(), rtol=1e-9)

    at.switch_page("views/decomposition.py").run()  # the pick carries over
    assert not at.exception and at.selectbox(key="w_null").value == null_name
    ratios = figure(open_section(at, "decomposition", "Ratios"), "Ratios to Q(X)")
    want = analyses.decomposition(null.stats(), 10, 1e5).sort_values("layer")
    np.testing.assert_allclose(arr(dashed(ratios)[0]["y"]), want["m_over_q"].to_numpy(), rtol=1e-9)
    assert len(dashed(figure(open_section(at, "decomposition", "Raw values"), "Raw values"))) == 5

    at.switch_page("views/frequency.py").run()
    assert not at.exception
    slopes = figure(open_section(at, "frequency", "Slopes"), "Slope on")
    want = analyses.frequency_regressions(null.stats(), 10, 1e5)
    want_m = want[want["quantity"] == "M"].sort_values("layer")["slope"].to_numpy()
    np.testing.assert_allclose(arr(dashed(slopes)[1]["y"]), want_m, rtol=1e-9)

    at.switch_page("views/tradeoff.py").run()
    assert not at.exception
    layer = at.select_slider(key="w_layer").value
    cloud = [t for t in figure(at, "token types with")["data"] if (t.get("marker") or {}).get("color") == NULL_CLOUD]
    t = null.token_table(layer)
    t = t[(t.n >= 10) & (t.n <= 1e5)]
    assert len(cloud) == 1 and sorted(arr(cloud[0]["x"])) == pytest.approx(sorted(t["m"].to_numpy()), rel=1e-9)

    at.switch_page("views/geometry.py").run()
    assert not at.exception
    geo = figure(at, "Layer geometry")
    ng = null.table("layer_geometry").sort_values("layer")
    np.testing.assert_allclose(arr(dashed(geo)[0]["y"]), ng["anisotropy"].to_numpy(), rtol=1e-9)
    assert len(figures_of(at)) == 1  # the spectrum when its tab is opened
    spec = figure(open_section(at, "geometry", "Covariance spectrum"), "Covariance spectrum")
    assert any("Gaussian null" in (t.get("name") or "") for t in spec["data"])


def test_highdim_page_puts_the_run_next_to_its_nulls(tmp_path, monkeypatch, data_dir, dashboard_null):
    """High-dimensional geometry: the run's norm spread, mean cosine and n·M/V per layer are its own
    tables'; the isotropic null sits at seed 003's closed forms (1/√(2d), 1); the pair-cosine histogram
    holds the run's sampled pairs."""
    import shutil

    from dashboard_run import APP, RUN, arr, figure, figures_of, open_section, trace
    from streamlit.testing.v1 import AppTest

    from normvar_core.stats.highdim import highdim_table

    data = tmp_path / "data"
    shutil.copytree(data_dir / "runs", data / "runs")
    run = open_run(data / "runs" / f"{RUN}.duckdb")
    shutil.copy(dashboard_null, data / "runs" / f"{RUN}__null-isotropic-s0.duckdb")  # write_null_run's, once
    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"run": RUN})
    at.run()
    at.switch_page("views/highdim.py").run()
    assert not at.exception and not at.error
    fig = figure(at, "the high-dimensional baseline's checks")
    want = highdim_table(run.layer_stats(), run.table("layer_geometry"), run.stats(), 10, 1e5)
    mine = [t for t in fig["data"] if t.get("name") == RUN]
    np.testing.assert_allclose(arr(mine[0]["y"]), want["norm_cv"].to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(arr(mine[1]["y"]), want["mean_cosine"].to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(arr(mine[2]["y"]), want["n_m_over_v"].to_numpy(), rtol=1e-9)
    null = [t for t in fig["data"] if t.get("name") == "Gaussian null (isotropic)"]
    np.testing.assert_allclose(arr(null[0]["y"]), 1 / np.sqrt(2 * run.dim), rtol=0.05)  # radii concentrate
    np.testing.assert_allclose(arr(null[2]["y"]), 1.0, rtol=0.1)  # M/V ≈ 1/(n−1)
    assert np.abs(arr(null[1]["y"])).max() < 0.01  # near-orthogonal
    assert (want["n_m_over_v"] > 10 * arr(null[2]["y"])).all()  # MiniLM: means far larger than random draws give
    assert len(figures_of(at)) == 1 and not at.dataframe  # the profiles first, the rest when opened
    cos = figure(open_section(at, "highdim", "Random-pair cosines"), "random pairs")
    hist = [t for t in cos["data"] if t.get("name") == RUN][0]
    layer = at.select_slider(key="w_layer").value  # the slider sits in the tabs that use it
    assert len(arr(hist["x"])) == len(run.table("pair_cosines").query("layer == @layer"))
    mv = figure(open_section(at, "highdim", "M/V"), "against nₜ")
    band = run.token_table(layer).query("n >= 10 and n <= 1e5 and v > 0")
    np.testing.assert_allclose(np.sort(arr(trace(mv, RUN)["y"])), np.sort(band["m"] / band["v"]), rtol=1e-9)
