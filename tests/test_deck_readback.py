"""A two-run comparison deck read back as a reader's tools see it (``deck_readback``): the PPTX's shapes with
python-pptx (every box inside the slide, none over another, each text within its box as Liberation Sans measures
it), the PDF with ``pdftotext -bbox`` and ``-layout`` (the figures are vector drawings, so their tick labels and
titles are read too) and the HTML's figures in chromium. Each fails on text past the slide's edge, titles over
each other and tick labels printed twice; the checks are shown to catch each fault on a figure drawn with it.
Also: the title slide first, column names in words, and the clouds slide drawing the Token clouds page's tokens."""

from __future__ import annotations

import re

import plotly.graph_objects as go
import pytest
from dashboard_run import RUN, RUN2, cloud_traces, figures_of, open_page
from deck_readback import (
    Box,
    doubled_ticks,
    html_faults,
    overlapping,
    pdf_faults,
    pdf_pages,
    pptx_faults,
)

from normvar_core.report.slides import Slide, build_slides
from normvar_core.report.writers import write_report
from normvar_core.viz.labels import COLUMN_NAMES


@pytest.fixture(scope="module")
def runs(data_dir):
    from normvar_core.runs.reader import open_run

    return [open_run(data_dir / "runs" / f"{n}.duckdb") for n in (RUN, RUN2)]


@pytest.fixture(scope="module")
def deck(runs, tmp_path_factory):
    """The comparison's slides and the deck written in each format: {"slides", "pdf", "pptx", "html"}."""
    out = tmp_path_factory.mktemp("deck")
    slides = build_slides(runs)
    return {"slides": slides, **{f: write_report(slides, out / f"deck.{f}", f) for f in ("pdf", "pptx", "html")}}


def _faulty_figure() -> go.Figure:
    """Two panels whose second y axis is drawn on the first panel (no anchor: plotly puts it on the first x axis),
    and a subplot title printed over another title: the comparison slides' faults, on purpose. The titles are two
    annotations at one point, so they overlap whatever the template's fonts (a test process may have set
    plotly's default template)."""
    fig = go.Figure([go.Scatter(x=[0, 1], y=[0, 50]), go.Scatter(x=[0, 1], y=[3, 47], xaxis="x2", yaxis="y2")])
    at = dict(xref="paper", yref="paper", x=0.225, y=0, xanchor="center", yanchor="top", yshift=-30, showarrow=False)
    fig.update_layout(
        template="plotly",
        xaxis=dict(domain=[0, 0.45]),
        xaxis2=dict(domain=[0.55, 1], anchor="y2"),
        yaxis2=dict(domain=[0, 1]),
        annotations=[dict(text="second row's subplot title", **at), dict(text="first row's axis title", **at)],
        width=1600,
        height=780,
        margin=dict(l=70, r=30, t=70, b=80),
    )
    return fig


def test_title_first_and_columns_in_words(deck):
    slides = deck["slides"]
    assert slides[0].lines and RUN in slides[0].notes and RUN2 in slides[0].notes  # the title slide
    assert slides[1].table is not None and slides[1].title.startswith("Findings")
    raw = re.compile(r"\b(" + "|".join(re.escape(c) for c, words in COLUMN_NAMES.items() if c != words) + r")\b")
    said = [(s.title, m.group(0)) for s in slides for m in [raw.search(s.title + " " + s.takeaway)] if m]
    assert said == []
    assert any("TwoNN ID (cross-context)" in s.takeaway for s in slides)


def test_pdf_reads_back_without_drawing_faults(deck):
    assert pdf_faults(deck["pdf"]) == []
    pages = pdf_pages(deck["pdf"])
    trade = next(words for _, _, words in pages if "(Fig. 2)" in " ".join(w.text for w in words[:12]))
    ticks = [w for w in trade if re.fullmatch(r"\d+", w.text)]
    assert len(ticks) >= 20  # the figure's tick labels are text: the checks read the figures, not only headings


def test_pptx_reads_back_without_drawing_faults(deck):
    from pptx import Presentation
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    assert pptx_faults(deck["pptx"]) == []
    pics = [
        sh for sl in Presentation(deck["pptx"]).slides for sh in sl.shapes if sh.shape_type == MSO_SHAPE_TYPE.PICTURE
    ]
    assert len(pics) == sum(s.figure is not None for s in deck["slides"])


@pytest.mark.browser
def test_html_figures_read_back_without_drawing_faults(deck, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(deck["html"].as_uri())
        page.wait_for_function(
            "[...document.querySelectorAll('.js-plotly-plot')].every(d => d._fullData)", timeout=60_000
        )
        assert html_faults(page) == []
        assert page.evaluate("document.querySelectorAll('.js-plotly-plot').length") == sum(
            s.figure is not None for s in deck["slides"]
        )
        # the checks see the faults: a figure drawn with them, in the same browser and in a PDF deck
        bad = tmp_path / "bad.html"
        write_report([Slide("Faulty", "on purpose", "", _faulty_figure())], bad, "html")
        page.goto(bad.as_uri())
        page.wait_for_function("document.querySelector('.js-plotly-plot')._fullData", timeout=60_000)
        found = " ".join(html_faults(page))
    finally:
        page.close()
    assert "printed twice on one axis" in found and "overlaps" in found, found


@pytest.mark.subprocess
def test_the_pdf_check_sees_the_faults(tmp_path):
    found = " ".join(
        pdf_faults(write_report([Slide("Faulty", "on purpose", "", _faulty_figure())], tmp_path / "bad.pdf", "pdf"))
    )
    assert "printed twice on one axis" in found and "overlaps" in found, found


def test_the_box_and_pptx_checks_see_the_faults(tmp_path):
    # the main deck's doubled, offset y ticks, and the PPTX boxes of a title too long for its box
    main = [
        Box(t, 60, 100 + 14 * i, 80, 112 + 14 * i)
        for i, t in enumerate(["50", "60", "50", "40", "40", "30", "30", "20", "20"])
    ]
    assert doubled_ticks(main, "left panel") and not doubled_ticks(main[::2][:1] + main[3::2], "one axis")
    assert overlapping([Box("title", 0, 0, 500, 40), Box("takeaway", 0, 15, 400, 45)], "slide")
    from pptx import Presentation
    from pptx.util import Pt

    prs = Presentation()
    sl = prs.slides.add_slide(prs.slide_layouts[6])
    box = sl.shapes.add_textbox(Pt(20), Pt(20), Pt(300), Pt(30))
    box.text_frame.word_wrap = True
    box.text_frame.text = "Where the trade-off is strongest (Fig. 4) — these runs on relative depth"
    box.text_frame.paragraphs[0].runs[0].font.size = Pt(28)
    sl.shapes.add_textbox(Pt(20), Pt(45), Pt(300), Pt(30)).text_frame.text = "the takeaway"
    prs.save(tmp_path / "bad.pptx")
    found = " ".join(pptx_faults(tmp_path / "bad.pptx"))
    assert "needs" in found and "overlaps" in found, found


def test_the_clouds_slide_draws_the_pages_tokens(app, runs):
    """The deck's cloud of a run is the Token clouds page's at the same layer: the same tokens (one trace each, in
    the same order) and so the same PCA (the same share of variance on PC1 and PC2)."""
    from normvar_core.report.slides import clouds_slide
    from normvar_core.viz.depth import default_layer

    run = runs[0]
    layer = default_layer(run.layers)
    at = open_page(app, "clouds", layer=str(layer))
    [page] = [f for f in figures_of(at) if "sampled embeddings" in (f["layout"].get("title") or {}).get("text", "")]
    slide = clouds_slide([run]).figure.to_plotly_json()

    def clouds(fig):
        return [t["name"] for t in cloud_traces(fig)]

    def axes(fig):
        return [fig["layout"][a]["title"]["text"] for a in ("xaxis", "yaxis")]

    assert clouds(slide) == clouds(page) and len(clouds(page)) > 10
    assert axes(slide) == axes(page) and axes(page)[0].startswith("PC1")


# ------------------------------------------------------------------ the takeaways against the series they draw
def _pptx_takeaways(path) -> dict[str, str]:
    """Slide title -> its takeaway as the PPTX holds it: the box under the title, or, when that one was cut, the
    whole one that opens the speaker notes ("Takeaway: …")."""
    from pptx import Presentation

    out = {}
    for sl in Presentation(path).slides:
        notes = sl.notes_slide.notes_text_frame.text
        boxes = [sh.text_frame.text for sh in sl.shapes if sh.has_text_frame and sh != sl.shapes.title]
        whole = notes.split("\n\n", 1)[0].removeprefix("Takeaway: ") if notes.startswith("Takeaway: ") else boxes[0]
        out[sl.shapes.title.text_frame.text] = whole
    return out


def _rho(x, y) -> float:
    """Spearman's ρ as its definition: Pearson's r of the average ranks (pandas ranks, numpy's correlation)."""
    import numpy as np
    import pandas as pd

    return float(np.corrcoef(pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy())[0, 1])


def _word(rho: float, up: str, down: str, flat: str, agrees: bool) -> str:
    """The direction a takeaway must give for a printed ρ: none below |ρ| = 0.1 or where the figure's other
    summary runs the other way."""
    r = round(rho, 2)
    return flat if abs(r) < 0.1 or not agrees else (up if r > 0 else down)


def _panels(fig: dict) -> dict[str, dict[str, tuple[dict, dict]]]:
    """A per-run side-by-side frequency figure's panels by the runs' heads ("<b><run> · layer <l></b>"): run ->
    {quantity: (its points' trace, its drawn line's trace)}, each run holding an equal share of the axes, in order."""
    import re

    heads = [a["text"] for a in fig["layout"]["annotations"] if a.get("text", "").startswith("<b>")]
    runs = [re.sub(r"</?b>", "", h).split(" · ")[0] for h in heads]
    by_axis: dict[int, dict[str, dict]] = {}
    for t in fig["data"]:
        k = int((t.get("xaxis") or "x")[1:] or 1)
        by_axis.setdefault(k, {})["dots" if t.get("mode") == "markers" else "line"] = t
    per = len(by_axis) // len(runs)
    out: dict[str, dict[str, tuple[dict, dict]]] = {r: {} for r in runs}
    for k, d in sorted(by_axis.items()):
        out[runs[(k - 1) // per]][d["dots"]["name"]] = (d["dots"], d["line"])
    return out


def test_the_frequency_takeaway_says_what_its_drawn_points_do(deck):
    """Per run and panel (M, V, Q against log₁₀ n_t), the PPTX's takeaway gives Spearman's ρ of the drawn points as
    recomputed here from the figure's own x and y, and its direction word follows that ρ's sign ("rises" / "falls";
    "shows no clear trend" below |ρ| = 0.1 or where the panel's drawn line runs the other way)."""
    import re

    import numpy as np
    from dashboard_run import arr

    [s] = [s for s in deck["slides"] if s.title.endswith("frequency (Fig. 7)")]
    text = _pptx_takeaways(deck["pptx"])[s.title]
    fig = s.figure.to_plotly_json()
    words = set()
    for run, traces in _panels(fig).items():
        part = re.search(re.escape(run) + r": at layer \d+, over the ([\d,]+) drawn types[^;]*", text)
        assert part, (run, text)
        assert sorted(traces) == ["M", "Q", "V"]
        for name, (dots, line) in traces.items():
            x, y = arr(dots["x"]), arr(dots["y"])
            assert int(part.group(1).replace(",", "")) == len(x)
            got = re.search(rf"\b{name} (rises|falls|shows no clear trend) \(ρ ([+-]\d\.\d\d)\)", part.group(0))
            assert got, (name, part.group(0))
            rho, drawn_slope = _rho(x, y), float(np.diff(arr(line["y"]))[0])
            assert abs(float(got.group(2)) - rho) <= 0.005 + 1e-9, (run, name, got.group(0), rho)
            agrees = drawn_slope == 0 or (drawn_slope > 0) == (rho > 0)
            assert got.group(1) == _word(rho, "rises", "falls", "shows no clear trend", agrees), (run, name, rho)
            words.add(got.group(1))
    assert {"rises", "falls"} <= words  # the real runs' panels run both ways


def test_the_clouds_takeaway_reads_each_drawn_cloud(deck):
    """The clouds slide's takeaway, as the PPTX holds it, against the clouds its figure draws (recomputed here from
    each token's drawn points, the origin at (0, 0)): the distance of each cloud's centre from the origin and its
    spread, their medians over the rarer and the more frequent half of the clouds, Spearman's ρ against n_t with a
    word that follows it, and the rarest and the most frequent cloud each with its own numbers."""
    import re

    import numpy as np
    from dashboard_run import arr

    [s] = [s for s in deck["slides"] if s.title.endswith("token clouds (Fig. 1)")]
    text = _pptx_takeaways(deck["pptx"])[s.title]
    clouds = []
    for t in cloud_traces(s.figure.to_plotly_json()):
        p = np.column_stack([arr(t["x"]), arr(t["y"])]).astype(np.float64)
        c = p.mean(axis=0)
        n = {int(round(float(v))) for v in np.asarray(arr(t["customdata"]), dtype=object).reshape(len(p), -1)[:, 0]}
        assert len(n) == 1  # one type per cloud
        clouds.append((n.pop(), t["name"], float(np.hypot(*c)), float(np.sqrt(((p - c) ** 2).sum(axis=1).mean()))))
    clouds.sort()
    k, half = len(clouds), len(clouds) // 2
    assert k > 10 and f"over the {k} drawn clouds, the rarer {half} vs the more frequent {half}" in text, text

    def close(printed: str, value: float) -> bool:
        return abs(float(printed) - value) <= 5e-3 * abs(value) + 1e-12

    for j, what in ((2, "the centre's distance from the origin \\(×\\)"), (3, "the spread")):
        got = re.search(
            what + r", median (\S+) vs (\S+) \((?:Spearman's )?ρ(?: against n_t)? ([+-]\d\.\d\d): ([^)]*)\)", text
        )
        assert got, (what, text)
        values = [c[j] for c in clouds]
        rare, freq = float(np.median(values[:half])), float(np.median(values[k - half :]))
        rho = _rho([c[0] for c in clouds], values)
        assert close(got.group(1), rare) and close(got.group(2), freq), (got.group(0), rare, freq)
        assert abs(float(got.group(3)) - rho) <= 0.005 + 1e-9, (got.group(0), rho)
        agrees = (freq - rare) * rho > 0
        assert got.group(4) == _word(rho, "grows with n_t", "shrinks with n_t", "no clear trend with n_t", agrees)
    shown = []
    for n, tok, dist, spread in (clouds[0], clouds[-1]):  # the rarest and the most frequent, each its own numbers
        got = re.search(re.escape(f"{tok} (n={n}): distance ") + r"(\S+), spread ([^;,\s]+)", text)
        assert got and close(got.group(1), dist) and close(got.group(2), spread), (tok, dist, spread, text)
        shown.append(got.groups())
    assert shown[0] != shown[1]
