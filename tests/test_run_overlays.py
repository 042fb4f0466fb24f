"""Run overlays, the logic under the browser test (tests/test_browser_run_overlays.py): links that keep the overlaid
runs, pickers that list real runs before their nulls, the Outliers colour scale and distinct rows, the
Geometry figures with nulls (log axes, power-of-ten ticks, titles that do not collide), Compare's shared
ranges, and the Geometry page under AppTest drawing the null of every overlaid run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from normvar_core.viz import geometry_figures as GF
from normvar_core.viz.overlay import null_kind, null_source, runs_in_order
from normvar_core.viz.shared_axes import share_ranges
from normvar_core.viz.viewstate import ViewState


# ---------------------------------------------------------------------------- links
def test_overlay_and_relative_depth_round_trip_through_the_url():
    v = ViewState(run="a", page="geometry", overlay=["b", "a__null-isotropic-s0"], relative=False, null="x")
    q = v.to_query()
    assert q["overlay"] == "b,a__null-isotropic-s0" and q["rel"] == "0"
    assert ViewState.from_query(q) == v
    assert ViewState.from_query({"overlay": " b , b,,c "}).overlay == ["b", "c"]
    assert ViewState.from_query({}).relative is None and "rel" not in ViewState().to_query()


# ---------------------------------------------------------------------------- run order
def test_real_runs_first_each_null_under_its_run():
    table = pd.DataFrame(
        {
            "name": ["b__null-isotropic-s0", "a__null-offset-s1", "b", "gone__null-isotropic-s0", "a"],
            "source": ["null:isotropic:b", "null:offset:a", "model", "null:isotropic:gone", "model"],
        }
    )
    assert runs_in_order(table) == ["b", "b__null-isotropic-s0", "a", "a__null-offset-s1", "gone__null-isotropic-s0"]
    assert null_source("null:matched:my-run") == "my-run" and null_source("model") is None
    assert null_kind("a__null-offset-s1") == "offset" and null_kind("Gaussian null (matched)") == "matched"


# ---------------------------------------------------------------------------- outliers
def test_outlier_colour_scale_is_set_by_the_bulk():
    rng = np.random.default_rng(0)
    L, d = 7, 384
    max_abs = rng.uniform(1.0, 2.0, size=(L, d))
    max_abs[-1, :3] = 1e-30  # three dead dimensions of the last layer: log10 ≈ −30
    max_abs[:, 7] *= 60.0  # the outlier dimension the page exists for
    ds = pd.DataFrame(
        {"layer": np.repeat(np.arange(L), d), "dim": np.tile(np.arange(d), L), "max_abs": max_abs.reshape(-1)}
    )
    hm = GF.outlier_heatmap(ds).data[0]
    z = np.log10(max_abs / np.median(max_abs, axis=1, keepdims=True))
    bulk = z[np.isfinite(z) & (z > -5)]
    assert hm.zmin > -1 and hm.zmin <= np.percentile(bulk, 5)  # not stretched down to −30
    assert hm.zmax == pytest.approx(z[np.isfinite(z)].max())
    assert np.all((z[:, 7] - hm.zmin) / (hm.zmax - hm.zmin) > 0.75)  # the outlier column: top quarter of the scale
    # the ordinary dims' 5th–95th percentile covers > 10 % of the scale (of the min..max scale: < 1 %)
    ordinary = np.delete(z, 7, axis=1)[:-1]
    span = np.percentile(ordinary, 95) - np.percentile(ordinary, 5)
    assert span / (hm.zmax - hm.zmin) > 0.1 and span / (z.max() - z.min()) < 0.01
    np.testing.assert_allclose(np.asarray(hm.customdata), 10**z, rtol=1e-12)  # the hover keeps the truth
    # the colour bar reads as ratios (no negative numbers): each tick's text is 10 ** its value, and 1× is there
    ticks = dict(zip(hm.colorbar.tickvals, hm.colorbar.ticktext))
    assert 2 <= len(ticks) <= 8 and "1×" in ticks.values() and "log₁₀" not in hm.colorbar.title.text
    assert all(hm.zmin <= v <= hm.zmax and float(t.removesuffix("×")) == pytest.approx(10**v) for v, t in ticks.items())


def test_largest_activations_table_has_distinct_keys():
    rows = pd.DataFrame(
        {
            "layer": 0,
            "rank": range(5),
            "value": [9.0, 9.0, -8.0, 7.0, 9.0],
            "dim": [3, 3, 3, 1, 3],
            "token_id": [101, 101, 7, 101, 101],
            "token": "x",
            "sentence_id": [4, 2, 5, 1, 9],
            "position": [0, 0, 3, 0, 0],
        }
    )
    out = GF.distinct_top(rows)
    assert list(zip(out["token_id"], out["position"], out["dim"])) == [(101, 0, 3), (7, 3, 3), (101, 0, 1)]
    assert out["sentence_id"].iloc[0] == 2 and list(out["rank"]) == [1, 2, 3]


# ---------------------------------------------------------------------------- geometry figures
def _geo(layers, scale):
    n = len(layers)
    return pd.DataFrame(
        {
            "layer": layers,
            "anisotropy": np.linspace(0.05, 0.08, n) * scale,
            "anisotropy_batch_mean": 0.1,
            "anisotropy_batch_std": 0.01,
            "twonn_id": np.linspace(4, 10, n) * scale,
            "twonn_id_std": 0.5,
            "participation_ratio": np.linspace(50, 90, n) * scale,
            "mean_cosine": 0.1,
        }
    )


def test_geometry_with_nulls_uses_log_axes_and_keeps_titles_apart():
    fig = GF.geometry_profiles(
        {"a": _geo(range(7), 1), "b": _geo(range(13), 1)},
        relative=True,
        num_hidden_states={"a": 7, "b": 13, "a · null": 7, "b · null": 13},
        null_curves={"a · null": _geo(range(7), 30), "b · null": _geo(range(13), 30)},
        null_of={"a · null": "a", "b · null": "b"},
    )
    lay = fig.layout
    assert lay.yaxis2.type == "log" and lay.yaxis3.type == "log" and lay.yaxis.type != "log"
    assert lay.yaxis2.exponentformat == "power"
    # each null in its run's colour, dashed
    colors = {t.name: t.line.color for t in fig.data if t.name in ("a", "b", "a · null", "b · null") and t.xaxis == "x"}
    assert colors["a · null"] == colors["a"] and colors["b · null"] == colors["b"] and colors["a"] != colors["b"]
    # x titles only under the bottom row: nothing between the top row and the lower subplot titles
    assert not lay.xaxis.title.text and not lay.xaxis2.title.text and lay.xaxis3.title.text == "relative depth"
    titles = [a.text for a in lay.annotations]
    assert all("_" not in t and "{" not in t and "$" not in t for t in titles)
    assert not GF.geometry_profiles({"a": _geo(range(7), 1)}).layout.yaxis2.type == "log"


def test_spectra_of_every_run_with_power_ticks():
    def spec(scale):
        return pd.DataFrame({"layer": 3, "k": range(384), "eigenvalue": np.geomspace(5, 1e-7, 384) * scale})

    fig = GF.spectra_figure(
        {"a": (spec(1), 3), "b": (spec(2), 3), "a · null": (spec(0.1), 3)},
        nulls=["a · null"],
        null_of={"a · null": "a"},
    )
    lines = [t for t in fig.data if t.xaxis in (None, "x")]
    assert [t.name for t in lines] == ["a · layer 3", "b · layer 3", "a · null · layer 3"]
    assert lines[2].line.dash == "dash" and lines[2].line.color == lines[0].line.color
    for ax in (fig.layout.xaxis, fig.layout.yaxis, fig.layout.xaxis2):
        assert ax.type == "log" and ax.exponentformat == "power"  # 10⁻⁶, never 1µ
    for t in [fig.layout.yaxis.title.text, fig.layout.yaxis2.title.text] + [a.text for a in fig.layout.annotations]:
        assert "_" not in t and "{" not in t


# ---------------------------------------------------------------------------- compare
def test_compare_scatters_share_axes_and_colours():
    def scatter(x, y, c):
        return go.Figure(
            [
                go.Scattergl(x=x, y=y, mode="markers", marker=dict(color=c, cmin=min(c), cmax=max(c))),
                go.Scatter(x=[0, 1], y=[0, 1], mode="lines"),
            ]
        )

    f1 = scatter([1.0, 5.0], [10.0, 20.0], [1.2, 2.7])
    f2 = scatter([3.0, 9.0], [-5.0, 2.0], [1.0, 4.1])
    got = share_ranges([f1, f2])
    for f in (f1, f2):
        assert list(f.layout.xaxis.range) == got["x"] and list(f.layout.yaxis.range) == got["y"]
        assert (f.data[0].marker.cmin, f.data[0].marker.cmax) == (1.0, 5.0)
    assert got["x"][0] < 1.0 and got["x"][1] > 9.0 and got["y"][0] < -5.0 and got["y"][1] > 20.0


# ---------------------------------------------------------------------------- the pages under AppTest
@pytest.fixture(scope="module")
def items_dir(items_data):
    return items_data


@pytest.fixture
def items_app(items_dir, monkeypatch):
    from dashboard_run import APP
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("NORMVAR_DATA", str(items_dir))
    return AppTest.from_file(APP, default_timeout=120)


@pytest.mark.slow
def test_geometry_page_draws_the_null_of_every_overlaid_run(items_app, items_dir):
    from dashboard_run import RUN, arr, figure, figures_of, ok, open_section
    from run_overlays_data import UPLOAD_RUN, null_of

    from normvar_core.runs.reader import open_run

    at = items_app
    at.query_params.update({"run": RUN, "null": null_of(RUN), "overlay": UPLOAD_RUN, "rel": "0", "layer": "2"})
    at.run()
    at.switch_page("views/geometry.py").run()
    ok(at)
    assert at.multiselect(key="w_geo_runs").value == [RUN, UPLOAD_RUN]
    assert at.toggle(key="w_geo_relative").value is False
    fig = figure(at, "Layer geometry")
    by_name = {t["name"]: t for t in fig["data"] if t.get("xaxis") == "x2"}  # the ID panel
    for name in (RUN, UPLOAD_RUN):
        null = open_run(items_dir / "runs" / f"{null_of(name)}.duckdb").table("layer_geometry").sort_values("layer")
        got = by_name[f"{name} · Gaussian null (isotropic)"]
        np.testing.assert_allclose(arr(got["y"]), null["twonn_id"].to_numpy())
    assert fig["layout"]["yaxis2"]["type"] == "log"
    assert len(figures_of(at)) == 1  # the spectrum: its own tab, with the layer slider
    spec = figure(open_section(at, "geometry", "Covariance spectrum"), "Covariance spectrum")
    assert at.select_slider(key="w_layer").value == 2
    names = [t["name"] for t in spec["data"] if t.get("xaxis") in (None, "x")]
    assert names == [
        f"{RUN} · layer 2",
        f"{RUN} · Gaussian null (isotropic) · layer 2",
        f"{UPLOAD_RUN} · layer 2",
        f"{UPLOAD_RUN} · Gaussian null (isotropic) · layer 2",
    ]
    lam = open_run(items_dir / "runs" / f"{UPLOAD_RUN}.duckdb").table("layer_spectrum").query("layer == 2")
    np.testing.assert_allclose(np.sort(arr(spec["data"][4]["y"])), np.sort(lam["eigenvalue"].to_numpy()))
    # the link written back keeps the overlay, the null and the toggle
    assert at.query_params["overlay"] in ([UPLOAD_RUN], UPLOAD_RUN) and at.query_params["rel"] in (["0"], "0")


# ---------------------------------------------------------------------------- dropped sentences
def test_sentences_dropped_by_the_word_limit_are_kept_as_examples():
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.corpus.select import KEEP_TOO_LONG, Selection

    sel = Selection(RunConfig(max_words=5))
    long = [" ".join(["w"] * (5 + i)) for i in range(KEEP_TOO_LONG + 5)]
    sel.add(["a b c", long[0], "", "d e"])
    sel.add(long[1:])
    got = sel.result(name="x", path=__import__("pathlib").Path("x.txt"), sha256="", fmt=".txt", column=None)
    assert got.n_too_long == len(long) and len(got.too_long) == KEEP_TOO_LONG
    assert got.too_long[:2] == [f"[5 words] {long[0]}", f"[6 words] {long[1]}"]  # in file order, with their length
    assert got.sentences == ["a b c", "d e"]
