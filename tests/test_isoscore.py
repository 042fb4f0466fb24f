"""IsoScore (Rudman, Gillman, Rayne & Eickhoff 2022) against independent ground truth.

* Closed forms: Σ = I gives ι = 1; k equal eigenvalues among d (the rest 0) give ι = (k − 1)/(d − 1); the
  score does not depend on the covariance's scale; NaN for d = 1 and an all-zero spectrum.
* Real MiniLM hidden states (150 sentences, every state kept in float64 here): the ``isoscore`` of every
  ``layer_geometry`` row, and of every ``halves_layer`` row (whole corpus, half A, half B), equals the paper's
  steps computed in this file from numpy's covariance of the brute-force states, to 1e-6; and equals the
  ``isoscore`` package of PyPI (v2.0.1, the authors' code: ``IsoScore.IsoScore(points)``, points (n, d)).
* A Gaussian null run file: its ``isoscore`` column equals the same steps on its stored spectrum.
* The findings row, the split-half rows of ``intervals``, the Geometry page's IsoScore tab (AppTest) and the
  deck's slide carry the run's values; a run file written before IsoScore opens, and the tab says to recompute.
"""

from __future__ import annotations

import math
import shutil

import duckdb
import numpy as np
import pytest
from dashboard_run import APP, RUN, arr, figure, open_section

from normvar_core.stats.isoscore import isoscore

TOL = 1e-6


def reference(lam) -> float:
    """The authors' rescaling, written out here from the paper: ((d − δ²(d − √d))² − d) / (d (d − 1))."""
    lam = np.clip(np.asarray(lam, np.float64), 0, None)
    d = lam.size
    hat = lam * math.sqrt(d) / math.sqrt(float(lam @ lam))
    delta = math.sqrt(float(((hat - 1) ** 2).sum())) / math.sqrt(2 * (d - math.sqrt(d)))
    return ((d - delta**2 * (d - math.sqrt(d))) ** 2 - d) / (d * (d - 1))


def brute_iso(X: np.ndarray) -> float:
    """ι of the float64 covariance (1/n) of the rows of X, numpy's eigvalsh."""
    return reference(np.linalg.eigvalsh(np.cov(np.asarray(X, np.float64), rowvar=False, ddof=0)))


@pytest.mark.parametrize("d", [2, 3, 10, 384, 1024])
def test_closed_forms(d):
    assert isoscore(np.ones(d)) == pytest.approx(1.0, abs=1e-12)  # Σ = I
    assert isoscore(np.linalg.eigvalsh(np.eye(d) * 7.5)) == pytest.approx(1.0, abs=1e-12)
    for k in sorted({1, 2, d // 3 or 1, d - 1, d}):
        lam = np.r_[np.full(k, 3.0), np.zeros(d - k)]
        assert isoscore(lam) == pytest.approx((k - 1) / (d - 1), abs=1e-12), (d, k)
    lam = np.random.default_rng(d).gamma(0.3, size=d)
    assert isoscore(lam) == pytest.approx(isoscore(1e-9 * lam), abs=1e-12) == pytest.approx(reference(lam), abs=1e-12)


def test_undefined_cases_are_nan():
    assert math.isnan(isoscore([4.0])) and math.isnan(isoscore(np.zeros(5))) and math.isnan(isoscore([]))
    assert isoscore([1.0, -1e-18, 1.0]) == pytest.approx(isoscore([1.0, 0.0, 1.0]))  # rounding below 0 clipped


@pytest.fixture(scope="module")
def minilm_pass(minilm_pass_150):
    """(measures, states X, sentence ids) of the session's MiniLM pass (tests/conftest.py)."""
    return tuple(minilm_pass_150[k] for k in ("measures", "X", "sid"))


def test_layer_geometry_and_halves_equal_brute_force_and_the_isoscore_package(minilm_pass):
    from IsoScore import IsoScore as package  # the authors' code, PyPI isoscore==2.0.1

    from normvar_core.pipeline.measures.halves import half_of

    measures, X, sid = minilm_pass
    rows = measures["geometry"].result()["rows"]
    halves = measures["halves"].result()["halves_layer"]
    half = half_of(sid)
    got, want = [], []
    for li, row in enumerate(rows):
        truth = brute_iso(X[li])
        got.append(row["isoscore"])
        want.append(truth)
        assert abs(row["isoscore"] - truth) < TOL, (li, row["isoscore"], truth)
        assert abs(float(package.IsoScore(X[li])) - truth) < TOL  # points (n, d), its np.cov ddof=1
        for tag, rows_of in (("all", np.ones_like(half, bool)), ("a", half == 0), ("b", half == 1)):
            at = np.flatnonzero((halves["half"] == tag) & (halves["layer"] == row["layer"]))
            assert abs(halves["isoscore"][at[0]] - brute_iso(X[li][rows_of])) < TOL, (li, tag)
    print(
        "MiniLM IsoScore per layer:",
        np.round(got, 6).tolist(),
        "max |run − brute| =",
        float(np.max(np.abs(np.subtract(got, want)))),
    )
    assert 0 < min(got) and max(got) < 0.5  # far from isotropic


def test_the_gaussian_null_carries_isoscore_and_is_drawn_dashed(run, dashboard_null, tmp_path, monkeypatch):
    """The isotropic null ``write_null_run`` draws (``dashboard_null``, once per session) holds each layer's
    IsoScore of its own spectrum, above the run's, and the Geometry page overlays it dashed."""
    from streamlit.testing.v1 import AppTest

    from normvar_core.runs.null import null_name
    from normvar_core.runs.reader import open_run

    (tmp_path / "runs").mkdir()
    shutil.copy(run.path, tmp_path / "runs" / f"{RUN}.duckdb")
    name = null_name(run, "isotropic", 0)
    null = open_run(shutil.copy(dashboard_null, tmp_path / "runs" / f"{name}.duckdb"))
    geo = null.table("layer_geometry").sort_values("layer")
    spec = null.table("layer_spectrum")
    for layer, iso in zip(geo["layer"], geo["isoscore"]):
        lam = spec[spec["layer"] == layer].sort_values("k")["eigenvalue"].to_numpy()
        assert lam.size == run.dim and abs(iso - reference(lam)) < TOL
    print("isotropic null IsoScore per layer:", np.round(geo["isoscore"].to_numpy(), 4).tolist())
    assert (geo["isoscore"] > run.table("layer_geometry").sort_values("layer")["isoscore"].to_numpy()).all()
    # the Geometry page's IsoScore tab overlays the null picked in the sidebar, dashed
    monkeypatch.setenv("NORMVAR_DATA", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"page": "geometry", "run": RUN, "null": name})
    at = open_section(at.run(), "geometry", "IsoScore")
    dashed = [t for t in figure(at, "IsoScore")["data"] if (t.get("line") or {}).get("dash") == "dash"]
    assert len(dashed) == 1 and "Gaussian null" in dashed[0]["name"]
    np.testing.assert_allclose(arr(dashed[0]["y"]), geo["isoscore"].to_numpy())


def test_findings_and_split_half_rows(run):
    from normvar_core.stats.findings import findings

    geo = run.table("layer_geometry").set_index("layer")["isoscore"]
    iv = run.table("intervals")
    rows = iv[iv["quantity"] == "isoscore"].set_index("layer")
    assert list(rows.index) == list(geo.index) and (rows["method"] == "split-half").all()
    np.testing.assert_allclose(rows["value"], geo.loc[rows.index], rtol=1e-12)
    assert (rows["low"] <= rows["value"]).all() and (rows["value"] <= rows["high"]).all()
    f = {x.id: x for x in findings(run)}["isoscore_low"]
    past = geo[geo.index > 0]
    assert f.value == pytest.approx(past.max(), rel=1e-12) and f.layer == int(past.idxmax())
    assert f.verdict == "holds" and f.interval is not None


def old_run_file(run, root):
    """A copy of ``run`` as a normvar without IsoScore wrote it: no column, no interval rows."""
    (root / "runs").mkdir(parents=True)
    path = root / "runs" / f"{RUN}.duckdb"
    shutil.copy(run.path, path)
    with duckdb.connect(str(path)) as con:
        con.execute("ALTER TABLE layer_geometry DROP COLUMN isoscore")
        con.execute("ALTER TABLE halves_layer DROP COLUMN isoscore")
        con.execute("DELETE FROM intervals WHERE quantity = 'isoscore'")
    return path


def test_an_old_run_file_opens_without_isoscore(run, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from normvar_core.report.slides import build_slides
    from normvar_core.runs.reader import open_run
    from normvar_core.stats.findings import findings

    old = open_run(old_run_file(run, tmp_path))
    assert "isoscore" not in old.table("layer_geometry")
    f = {x.id: x for x in findings(old)}["isoscore_low"]
    assert f.verdict == "untestable" and "recompute" in f.why
    assert "IsoScore per layer" not in [s.title for s in build_slides([old])]
    monkeypatch.setenv("NORMVAR_DATA", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"page": "geometry", "run": RUN})
    at = open_section(at.run(), "geometry", "IsoScore")
    assert not at.exception
    assert any("Recompute" in i.value and "IsoScore" in i.value for i in at.info)


def test_geometry_page_isoscore_tab_and_deck_slide(run, data_dir, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from normvar_core.report.slides import build_slides

    monkeypatch.setenv("NORMVAR_DATA", str(data_dir))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"page": "geometry", "run": RUN})
    at = open_section(at.run(), "geometry", "IsoScore")
    assert not at.exception
    fig = figure(at, "IsoScore")
    geo = run.table("layer_geometry").sort_values("layer")
    line = [t for t in fig["data"] if t.get("name") == RUN][0]
    np.testing.assert_allclose(arr(line["y"]), geo["isoscore"].to_numpy())
    iv = run.table("intervals").query("quantity == 'isoscore'").sort_values("layer")
    band = [t for t in fig["data"] if "split-half" in str(t.get("name")) and t.get("fill") == "tonexty"][0]
    np.testing.assert_allclose(arr(band["y"]), iv["low"].to_numpy())
    slides = build_slides([run])
    titles = [s.title for s in slides]
    assert (
        titles.index("IsoScore per layer")
        == titles.index("Layer geometry (Razzhigaev et al. 2024 protocol, Fig. 1)") + 1
    )
    slide = slides[titles.index("IsoScore per layer")]
    assert f"{geo['isoscore'].max():.3f}" in slide.takeaway and "claim isoscore_low" in slide.takeaway
