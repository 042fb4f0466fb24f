"""Figure builders (the normvar_core.viz figure modules, clouds, viewstate) on synthetic TokenStats: the figures
draw exactly what the library computed, and nothing else."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from figure_stats import synthetic_stats, table

from normvar_core.stats import analyses
from normvar_core.stats.tokenstats import TokenStats
from normvar_core.viz import clouds, depth, viewstate
from normvar_core.viz.cloud_figures import clouds_figure
from normvar_core.viz.decomposition_figures import decomposition_bars, decomposition_ratios, decomposition_raw
from normvar_core.viz.figure_export import export_image, figure_data, to_csv, to_image
from normvar_core.viz.frequency_figures import frequency_scatter, frequency_slopes, histograms_figure
from normvar_core.viz.selection import downsample, find_tokens, fit_row, tradeoff_points
from normvar_core.viz.theme import SVG_MAX_POINTS
from normvar_core.viz.tradeoff_figures import layers_figure, tradeoff_scatter


@pytest.fixture(scope="module")
def stats() -> TokenStats:
    return synthetic_stats()


def test_tradeoff_scatter_draws_the_band_and_the_library_fit(stats):
    tab = table(stats, 2)
    pts = tradeoff_points(tab, 10, 1e5)
    assert len(pts) == int(stats.band(10, 1e5).sum())
    fit = fit_row(analyses.tradeoff(stats, 10, 1e5), layer=2)
    fig = tradeoff_scatter(pts, fit, highlight=tab.iloc[[0, 3]])
    scatter, line, hl = fig.data
    assert isinstance(scatter, go.Scatter if len(pts) <= SVG_MAX_POINTS else go.Scattergl) and len(scatter.x) == len(
        pts
    )
    np.testing.assert_array_equal(np.asarray(scatter.x), pts["m"].to_numpy())
    np.testing.assert_array_equal(np.asarray(scatter.y), pts["v"].to_numpy())
    np.testing.assert_allclose(np.asarray(scatter.marker.color), np.log10(pts["n"]))
    slope = (line.y[1] - line.y[0]) / (line.x[1] - line.x[0])
    assert slope == pytest.approx(fit["slope"], rel=1e-9)
    assert f"slope = {fit['slope']:.3f}" in fig.layout.annotations[0].text
    assert list(hl.text) == ["tok0", "tok3"]
    assert "%{text}" in scatter.hovertemplate and list(scatter.text[:2]) == pts["token"].tolist()[:2]


def test_downsample_caps_points_with_a_notice(stats):
    pts = tradeoff_points(table(stats, 0), 1, 1e9)
    drawn, total = downsample(pts, 100)
    assert total == len(pts) and len(drawn) == 100
    fig = tradeoff_scatter(drawn, None, total=total)
    assert any(f"100 of {total:,}" in a.text for a in fig.layout.annotations)
    same, n = downsample(pts, 10**6)
    assert same is pts and n == len(pts)


def test_find_tokens_matches_subword_prefixes():
    tab = pd.DataFrame(
        {
            "token_id": [1, 2, 3, 4],
            "token": ["the", "##ing", "Ġonce", "##the"],
            "n": [5, 6, 7, 8],
            "q": [1.0, 2, 3, 4],
            "m": [0.5, 1, 1, 1],
            "v": [0.5, 1, 2, 3],
        }
    )
    hit, missing = find_tokens(tab, ["ing", "once", "nope", "the"])
    assert hit["token_id"].tolist() == [2, 3, 1]  # an exact match wins over "##the"
    assert find_tokens(tab, ["THE"])[0]["token_id"].tolist() == [1, 4]
    assert missing == ["nope"]


def test_layers_and_decomposition_figures_carry_the_library_values(stats):
    tr = analyses.tradeoff(stats, 10, 1e5)
    fig = layers_figure({"a": tr}, relative=True, num_hidden_states={"a": 5})
    cv, slope, r2 = fig.data[:3]
    np.testing.assert_allclose(cv.y, tr["cv_q"])
    np.testing.assert_allclose(slope.y, tr["slope"])
    np.testing.assert_allclose(r2.y, tr["r2"])
    np.testing.assert_allclose(cv.x, tr["layer"] / 4)
    dec = analyses.decomposition(stats, 10, 1e5)
    bars = decomposition_bars(dec)
    stacked = np.sum([np.asarray(b.y) for b in bars.data if b.type == "bar"], axis=0)
    np.testing.assert_allclose(stacked, 1.0, rtol=1e-9)  # M/Q + V_B/Q + V_W/Q = 1 (eqs. 9, 13)
    np.testing.assert_allclose(bars.data[3].y, dec["v_w_over_v"])
    raw = decomposition_raw(dec, log_y=True)
    np.testing.assert_allclose(raw.data[0].y, dec["q"])


def test_frequency_figures(stats):
    regs = analyses.frequency_regressions(stats, 10, 1e5)
    pts = tradeoff_points(table(stats, 1), 10, 1e5)
    fig = frequency_scatter(pts, regs, layer=1, log_y=True)
    qpts, qline = fig.data[0], fig.data[1]
    np.testing.assert_allclose(qpts.y, np.log10(1 + pts["q"]))
    row = fit_row(regs, layer=1, quantity="Q")
    assert (qline.y[1] - qline.y[0]) / (qline.x[1] - qline.x[0]) == pytest.approx(row["slope"], rel=1e-9)
    slopes = frequency_slopes(regs)
    np.testing.assert_allclose(slopes.data[1].y, regs.loc[regs.quantity == "M"].sort_values("layer")["slope"])
    hist = analyses.histograms(stats, 1, bins=20, n_min=10, n_max=1e5)
    h = histograms_figure(hist)
    assert sum(np.asarray(t.y).sum() for t in h.data) == 3 * len(pts)


def test_pca_cloud_puts_the_origin_at_zero():
    rng = np.random.default_rng(1)
    d = 12
    centers = {7: rng.normal(3, 1, d), 9: rng.normal(-2, 1, d), 11: rng.normal(0, 1, d)}
    rows = [
        (t, f"t{t}", c + rng.normal(0, s, d)) for (t, c), s in zip(centers.items(), (0.2, 0.5, 1.0)) for _ in range(40)
    ]
    samples = pd.DataFrame(rows, columns=["token_id", "token", "vector"])
    cloud = clouds.pca_cloud(samples, {7: 100, 9: 20, 11: 3})
    X = np.stack(samples["vector"])
    # PCA on centred data, origin projected and subtracted <=> a pure projection of the raw vectors
    Xc = X - X.mean(0)
    _, _, vt = np.linalg.svd(Xc, full_matrices=False)
    expect = X @ vt[:2].T
    got = cloud.coords[["pc1", "pc2"]].to_numpy()
    signs = np.sign(np.sum(got * expect, axis=0))
    np.testing.assert_allclose(got, expect * signs, atol=1e-9)
    assert cloud.coords["n"].tolist()[:1] == [100]
    assert 0 < cloud.explained[1] <= cloud.explained[0] < 1
    fig = clouds_figure(cloud.coords, explained=cloud.explained)
    origin = [t for t in fig.data if t.name == "origin"][0]
    assert (origin.x[0], origin.y[0]) == (0, 0)


def test_viewstate_round_trip_and_forgiving_parse():
    v = viewstate.ViewState(
        run="r1",
        page="tradeoff",
        layer=3,
        band=(1.5, 4.0),
        tokens=["the", "once"],
        presentation=True,
        run2="r2",
        depth=0.25,
    )
    q = v.to_query()
    assert q == {
        "run": "r1",
        "page": "tradeoff",
        "layer": "3",
        "band": "1.5,4",
        "tokens": "the,once",
        "present": "1",
        "run2": "r2",
        "depth": "0.25",
    }
    assert viewstate.ViewState.from_query(q) == v
    bad = viewstate.ViewState.from_query({"layer": "x", "band": "nonsense", "page": "../etc", "depth": "9"})
    assert bad.layer is None and bad.band == viewstate.DEFAULT_BAND and bad.page is None and bad.depth == 1.0
    assert viewstate.ViewState().to_query() == {}
    assert viewstate.parse_band("5,1") == (1.0, 5.0)
    assert viewstate.parse_tokens("a, b,a,,c") == ["a", "b", "c"]
    assert viewstate.band_counts((1, 5)) == (10.0, 100000.0)
    assert depth.nearest_layer([0, 2, 4, 6], 3) == 2 and depth.nearest_layer([0, 2, 4], None) == 2
    assert depth.layer_at_depth([0, 2, 4, 6], 0.5, 7) == 2
    assert depth.layer_at_depth(list(range(13)), 0.5, 13) == 6


def test_presentation_theme_enlarges_fonts(stats):
    dec = analyses.decomposition(stats, 10, 1e5)
    small = decomposition_ratios(dec)
    big = decomposition_ratios(dec, presentation=True)
    assert big.layout.font.size > small.layout.font.size
    assert big.layout.plot_bgcolor == "white" and big.layout.paper_bgcolor == "white"


@pytest.mark.subprocess
def test_static_export_png_svg_and_csv(stats):
    """kaleido + Debian's chromium: the PNG/SVG download buttons' bytes."""
    fig = decomposition_bars(analyses.decomposition(stats, 10, 1e5))
    png = to_image(fig, "png", width=600, height=300, scale=1)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    svg = to_image(fig, "svg", width=600, height=300)
    assert b"<svg" in svg[:400]
    csv = to_csv(pd.DataFrame({"a": [1, 2]}))
    assert csv.decode().splitlines() == ["a", "1", "2"]
    assert len(figure_data(fig)) == sum(len(t.x) for t in fig.data)


@pytest.mark.subprocess
def test_presentation_downloads_are_16_9_slides(stats):
    """In presentation mode a figure's PNG/SVG is a slide: 1600 x 900 (x the PNG scale), whatever its
    on-screen height; otherwise it keeps its own size."""
    import io
    import re

    from PIL import Image

    fig = decomposition_bars(analyses.decomposition(stats, 10, 1e5), presentation=True)
    w, h = Image.open(io.BytesIO(export_image(fig, "png", presentation=True))).size
    assert (w, h) == (3200, 1800)
    svg = export_image(fig, "svg", presentation=True).decode()
    assert re.search(r'<svg[^>]*width="1600"[^>]*height="900"', svg)
    w, h = Image.open(io.BytesIO(export_image(fig, "png"))).size
    assert h / w != 900 / 1600 and h == 2 * (fig.layout.height or 500)
