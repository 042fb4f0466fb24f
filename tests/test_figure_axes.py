"""Log axes are labelled at whole decades only, on the pages (``views/_chrome.chart``) and on the slides
(``figure_export.on_slide``): an axis with its own tick values keeps them as ticks and blanks the labels that are
not a power of ten; any other log axis gets one tick per decade, so plotly prints no "2, 5" between. Linear axes
are left as they are."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normvar_core.viz.figure_export import decades_only, is_decade, on_slide


def test_is_decade():
    assert [is_decade(x) for x in (1, 10, 100, 1e-3, 2, 5, 64, 0.5)] == [True] * 4 + [False] * 4


def test_slides_and_pages_label_whole_decades_only():
    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Scatter(x=[1, 2, 4, 8, 16, 32, 64], y=[1, 2, 3, 4, 5, 6, 7]), row=1, col=1)
    fig.add_trace(go.Scatter(x=[0, 1], y=[1e-3, 5]), row=1, col=2)
    fig.update_xaxes(type="log", tickvals=[1, 2, 4, 8, 10, 16, 32, 64], row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)
    out = on_slide(fig, 1600, 900)
    assert list(out.layout.xaxis.ticktext) == ["1", "", "", "", "10", "", "", ""]
    assert list(out.layout.xaxis.tickvals) == [1, 2, 4, 8, 10, 16, 32, 64]
    assert out.layout.yaxis2.dtick == 1 and out.layout.yaxis.dtick is None  # the linear axis untouched
    assert out.layout.title.text is None and out.layout.width == 1600
    # an axis given its own labels keeps those at decades
    f = go.Figure(go.Scatter(x=[1, 100], y=[0, 1]))
    f.update_xaxes(type="log", tickvals=[1, 3, 100], ticktext=["one", "three", "hundred"])
    assert list(decades_only(f).layout.xaxis.ticktext) == ["one", "", "hundred"]


def test_the_overlap_profile_says_when_the_masked_lines_equal_the_unmasked():
    """A masked overlap equal to the unmasked one would hide under it: it is said in an annotation, not drawn; one
    that differs is drawn with its largest difference in its name."""
    import numpy as np
    import pandas as pd

    from normvar_core.viz.neighbourhood_figures import EQUAL_TOL, overlap_figure

    nxt = np.array([0.4, 0.5, 0.6, np.nan])
    df = pd.DataFrame(
        {
            "layer": range(4),
            "overlap_next": nxt,
            "overlap_next_masked": nxt + EQUAL_TOL / 2,  # equal to within the tolerance
            "overlap_last": [0.3, 0.4, 0.5, 1.0],
            "overlap_last_masked": [0.25, 0.4, 0.5, 1.0],  # 0.05 below at layer 0
            "chance": 0.01,
        }
    )
    fig = overlap_figure({"r": df}, relative=False)
    names = [t.name for t in fig.data]
    assert not any("next layer, own sentence masked" in n for n in names)
    assert "r (last layer, own sentence masked, up to 0.050 from all neighbours)" in names
    [note] = [a.text for a in fig.layout.annotations]
    assert "the overlap with the next layer equals the unmasked one" in note
