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
