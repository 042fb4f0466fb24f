"""Figure layout: labels that do not overlap, axes that the data sets, legends and notes off the
data, tick labels that read as numbers. Each test builds the figure from the library's builders and reads
the figure JSON back."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from figure_stats import synthetic_stats, table

from normvar_core.stats import analyses
from normvar_core.viz.decomposition_figures import decomposition_bars, decomposition_raw
from normvar_core.viz.frequency_figures import frequency_scatter
from normvar_core.viz.geometry_figures import spectra_figure
from normvar_core.viz.highdim_figures import highdim_profiles, mv_scatter
from normvar_core.viz.labels import CORNERS, label_box, place_labels
from normvar_core.viz.selection import fit_row, tradeoff_points
from normvar_core.viz.tradeoff_figures import tradeoff_scatter


@pytest.fixture(scope="module")
def stats():
    return synthetic_stats()


def _overlaps(boxes) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i in range(len(boxes))
        for j in range(i + 1, len(boxes))
        if min(boxes[i][2], boxes[j][2]) > max(boxes[i][0], boxes[j][0])
        and min(boxes[i][3], boxes[j][3]) > max(boxes[i][1], boxes[j][1])
    ]


def test_labels_of_a_tight_cluster_do_not_overlap():
    rng = np.random.default_rng(1)
    px, py = 300 + rng.normal(0, 6, 9), 200 + rng.normal(0, 6, 9)  # nine points within a few pixels
    texts = ["the", "of", "and", "Elizabeth", "said", "her", "ship", "Mr", "very"]
    offs = place_labels(px, py, texts, size=(800, 420))
    boxes = [label_box(x + ax, y + ay, t, 13.0) for x, y, t, (ax, ay) in zip(px, py, texts, offs)]
    assert _overlaps(boxes) == []
    # the labels as they were (each centred 15 px above its point) overlapped
    old = [label_box(x, y - 15, t, 13.0) for x, y, t in zip(px, py, texts)]
    assert _overlaps(old)


def test_tradeoff_highlight_labels_do_not_overlap_and_axes_follow_the_data(stats):
    tab = table(stats, 2)
    pts = tradeoff_points(tab, 10, 1e5)
    fit = fit_row(analyses.tradeoff(stats, 10, 1e5), layer=2)
    hl = tab.sort_values("n", ascending=False).head(8)  # the most frequent types: a tight group
    q_pred = 160.0  # App. I's line far above the data (Q ≈ 100)
    fig = tradeoff_scatter(pts, fit, highlight=hl, q_pred=q_pred)
    lay = fig.layout
    xr, yr = list(lay.xaxis.range), list(lay.yaxis.range)
    xs = np.concatenate([pts["m"], hl["m"]])
    ys = np.concatenate([pts["v"], hl["v"]])
    span_x, span_y = xs.max() - xs.min(), ys.max() - ys.min()
    assert xr[0] <= xs.min() and xr[1] >= xs.max() and xr[1] - xr[0] <= 1.1 * span_x
    assert yr[0] <= ys.min() and yr[1] >= ys.max() and yr[1] - yr[0] <= 1.1 * span_y
    assert yr[1] < q_pred and xr[1] < q_pred  # 0..160 no longer
    ln = [t for t in fig.data if t.name == "LayerNorm prediction"]
    if ln:  # drawn only inside the view
        lx, ly = np.asarray(ln[0].x), np.asarray(ln[0].y)
        assert (lx >= xr[0] - 1e-9).all() and (lx <= xr[1] + 1e-9).all()
        assert (ly >= yr[0] - 1e-9).all() and (ly <= yr[1] + 1e-9).all()
        np.testing.assert_allclose(lx + ly, q_pred)
    else:
        assert any("App. I line" in (a.text or "") for a in lay.annotations)
    labels = [a for a in lay.annotations if a.name == "highlight label"]
    assert sorted(a.text for a in labels) == sorted(hl["token"].astype(str))
    # the labels' boxes in pixels, from the same axis ranges and plot size the builder used
    w, h = 1.6 * 540 - 170, 540 - 120
    boxes = [
        label_box((a.x - xr[0]) / (xr[1] - xr[0]) * w + a.ax, (yr[1] - a.y) / (yr[1] - yr[0]) * h + a.ay, a.text, 13.0)
        for a in labels
    ]
    assert _overlaps(boxes) == []
    hi = [t for t in fig.data if t.name == "highlighted"][0]
    assert hi.marker.size >= 14 and hi.marker.color == "#e4002b"  # filled points, not thin rings
    assert list(hi.text) == hl["token"].astype(str).tolist()


def test_line_missing_the_view_is_said(stats):
    tab = table(stats, 2)
    pts = tradeoff_points(tab, 10, 1e5)
    fig = tradeoff_scatter(pts, None, q_pred=1e6)
    assert not [t for t in fig.data if t.name == "LayerNorm prediction"]
    assert any("lies above this view" in (a.text or "") for a in fig.layout.annotations)


def test_decomposition_legends_sit_beside_the_plot_not_on_the_ticks(stats):
    d = analyses.decomposition(stats)
    for fig in (decomposition_bars(d), decomposition_raw(d, log_y=True)):
        assert fig.layout.legend.x >= 1.0 and fig.layout.legend.xanchor == "left"
        assert fig.layout.legend.y > 0


def test_frequency_fit_note_takes_the_emptiest_corner():
    rng = np.random.default_rng(2)
    # types crowd the top right (the note's old place) and leave the bottom left empty
    x = np.concatenate([rng.uniform(0.5, 5, 400), rng.uniform(4, 5, 300)])
    n = (10**x).astype(np.int64) + 1
    raw = np.concatenate([rng.uniform(0.5, 9, 400), rng.uniform(8, 9, 300)])
    pts = pd.DataFrame({"token": [f"t{i}" for i in range(len(n))], "n": n, "q": raw, "m": raw, "v": raw})
    regs = pd.DataFrame({"quantity": ["Q", "M", "V"], "slope": [0.1] * 3, "intercept": [0.3] * 3, "r2": [0.4] * 3})
    fig = frequency_scatter(pts, regs, log_y=False)
    notes = [a for a in fig.layout.annotations if a.name == "fit note"]
    assert len(notes) == 3
    xs = np.log10(pts["n"].to_numpy(dtype=np.float64))
    for a in notes:
        assert (a.x, a.y) != (0.98, 0.98)
        assert (a.x, a.y, a.xanchor, a.yanchor) in CORNERS

    def covered(corner) -> int:  # data points under a 0.34 x 0.2 note in that corner
        u = (xs - xs.min()) / np.ptp(xs)
        v = (raw - raw.min()) / np.ptp(raw)
        cx, cy, xa, ya = corner
        inx = (u >= cx - 0.34) & (u <= cx) if xa == "right" else (u >= cx) & (u <= cx + 0.34)
        iny = (v >= cy - 0.2) & (v <= cy) if ya == "top" else (v >= cy) & (v <= cy + 0.2)
        return int((inx & iny).sum())

    assert covered(CORNERS[0]) >= 200  # the old place: on the crowd
    assert covered((notes[0].x, notes[0].y, notes[0].xanchor, notes[0].yanchor)) <= 0.2 * covered(CORNERS[0])


def test_highdim_ratios_print_plain_numbers():
    t = pd.DataFrame(
        {
            "layer": [0, 1, 2],
            "norm_cv": [0.1, 0.2, 0.3],
            "mean_cosine": [0.1, 0.5, 0.9],
            "m_over_q": [0.2, 0.3, 0.4],
            "n_m_over_v": [1e-4, 1.0, 1e6],
        }
    )
    fig = highdim_profiles(t, {}, dim=384, label="run")
    ax = fig.layout.yaxis3
    assert ax.type == "log" and ax.exponentformat == "none" and ax.tickformat == ",~r"  # 1,000,000 not 1M
    assert ax.dtick is not None and 10 / ax.dtick <= 6
    pts = pd.DataFrame({"token": ["a", "b", "c"], "n": [10, 1000, 100000], "m": [1e-6, 1.0, 5.0], "v": [1.0, 1.0, 1.0]})
    fig = mv_scatter(pts, {}, label="run")
    assert fig.layout.yaxis.exponentformat == "none" and fig.layout.xaxis.exponentformat == "none"


def test_geometry_log_axes_label_few_whole_decades():
    k = np.arange(384)
    spectrum = pd.DataFrame({"layer": 3, "k": k, "eigenvalue": 10.0 ** (-0.08 * k)})  # 30 decades
    fig = spectra_figure({"run": (spectrum, 3)})
    for ax in (fig.layout.xaxis, fig.layout.yaxis):
        assert ax.type == "log" and ax.exponentformat == "power"
        assert float(ax.dtick).is_integer() and ax.dtick >= 1
    assert 31 / fig.layout.yaxis.dtick <= 6.5  # about six labels over the decades, no 2s and 5s
