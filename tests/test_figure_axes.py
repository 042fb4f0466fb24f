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


def test_the_id_across_scales_slide_reads_medians_over_the_drawn_layers():
    """One noisy scale (100 at layer 0, n1 = 1) does not make the takeaway: each drawn layer's median over the
    scales does, ranged over the drawn layers; the notes head every column in words."""
    import numpy as np
    import pandas as pd

    from normvar_core.report.figure_reads import scales
    from normvar_core.viz.page_figures import SCALES

    rows = [
        {"layer": layer, "n1": n1, "masked": masked, "gride_id": 10.0 + layer + (0.5 if masked else 0.0) + 0.1 * n1}
        for layer in range(7)
        for n1 in (1, 2, 4, 8)
        for masked in (False, True)
    ]
    t = pd.DataFrame(rows).assign(gride_id_err=0.3)
    t.loc[(t["layer"] == 0) & (t["n1"] == 1) & ~t["masked"], "gride_id"] = 100.0
    take, notes = scales(SCALES, {"r": t})
    med = {layer: np.median([10 + layer + 0.1 * n1 for n1 in (1, 2, 4, 8)]) for layer in (0, 2, 4, 6)}
    med[0] = np.median([100.0, 10.2, 10.4, 10.8])
    assert f"{min(med.values()):.3f}–{max(med.values()):.3f}, highest at layer 6" in take
    assert "100" not in take and "median per drawn layer (0, 2, 4, 6)" in take
    assert notes.splitlines()[1].split() == [
        "layer",
        "scale",
        "n1",
        "GRIDE",
        "dimension",
        "its",
        "error",
        "own",
        "sentence",
        "masked",
    ]


def test_a_long_takeaway_is_cut_at_a_clause_and_kept_whole_in_the_notes():
    import plotly.graph_objects as go

    from normvar_core.report.slides import TAKEAWAY_MAX, Slide, fit_takeaway

    long = "; ".join(f"run {i}: GRIDE's dimension 9.1–12.3 at the drawn layers" for i in range(12))
    s = fit_takeaway(Slide("t", long, "layer values", go.Figure()))
    assert len(s.takeaway) <= TAKEAWAY_MAX and s.takeaway.endswith(" … (in full in the notes)")
    assert long.startswith(s.takeaway.removesuffix(" … (in full in the notes)"))
    assert s.takeaway.removesuffix(" … (in full in the notes)").endswith("layers")  # a whole clause
    assert s.notes == f"Takeaway: {long}\n\nlayer values"
    # the claims' verdicts stay whole after the cut reading
    s = fit_takeaway(Slide("t", long + " · claim id_profile — holds: 9.1", "n", go.Figure()))
    assert s.takeaway.endswith(" … (in full in the notes) · claim id_profile — holds: 9.1")
    short = Slide("t", "one line", "n", go.Figure())
    assert fit_takeaway(short) is short and fit_takeaway(Slide("t", long, "n")).takeaway == long  # text slides kept
