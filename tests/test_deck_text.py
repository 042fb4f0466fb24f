"""The decks' text: the PDF has a text layer (pdftotext reads every title, takeaway and the findings table), every
claim is whole in the findings table's first column (never cut mid-sentence), the two-run takeaway is whole, a
comparison's per-run slides show every run, the slides draw the pages' figures (bands as fills), a run of one
sentence gives a deck with "—" and the reason, every interval band's colour is in the legend, and kaleido's loggers
stay quiet."""

from __future__ import annotations

import logging
import re
import subprocess

import numpy as np
import plotly.graph_objects as go
import pytest
from dashboard_run import RUN, RUN2

from normvar_core.report.slides import build_slides
from normvar_core.report.writers import write_report
from normvar_core.viz.bands import add_band


@pytest.fixture(scope="module")
def two_runs(data_dir):
    from normvar_core.runs.reader import open_run

    return [open_run(data_dir / "runs" / f"{n}.duckdb") for n in (RUN, RUN2)]


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_pdf_text_layer_holds_titles_takeaways_and_findings(two_runs, tmp_path):
    slides = build_slides(two_runs)
    path = write_report(slides, tmp_path / "deck.pdf", "pdf")
    pages = subprocess.run(
        ["pdftotext", "-layout", str(path), "-"], check=True, capture_output=True, text=True
    ).stdout.split("\f")
    pages = [p for p in pages if p.strip()]
    assert len(pages) >= len(slides)  # a table that runs long continues on a further page
    # a continued page's title ends "(continued)", on its first line or, wrapped, its second
    firsts = [p for p in pages if "(continued)" not in " ".join(p.strip().splitlines()[:2])]
    assert len(firsts) == len(slides)
    for s, page in zip(slides, firsts):
        flat = _words(page)
        assert _words(s.title) in flat
        # the whole takeaway, to its last word: the two-run subtitle is no longer cut at "· claim"
        for word in _words(s.takeaway).split(" ")[-6:]:
            assert word in flat, (s.title, word)
    findings = _words(pages[1])  # the title slide first, then the findings
    from normvar_core.stats.findings import CLAIMS

    assert RUN in findings and RUN2 in findings and ("holds" in findings or "fails" in findings)
    # the claims' column alone (cropped left of the first run's column, whose header word pdftotext -bbox places)
    # of the findings' pages (a table too long for one page continues), read top to bottom: every claim whole, in order
    from deck_readback import pdf_pages

    last = 1 + next(i for i, p in enumerate(pages[1:]) if "Findings" not in " ".join(p.strip().splitlines()[:2]))
    edge = min(w.x0 for w in pdf_pages(path)[1][2] if w.text == RUN)
    column = _words(
        subprocess.run(
            ["pdftotext", "-f", "2", "-l", str(last), "-x", "0", "-y", "0", "-W", str(int(edge) - 2), "-H", "648"]
            + [str(path), "-"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    at = 0
    for c in CLAIMS:
        whole = _words(f"{c.id} ({c.seed}): {c.wording}")
        assert whole in column[at:], (whole, column)
        at = column.index(whole, at) + len(whole)


@pytest.mark.parametrize("columns", [2, 5])
def test_the_findings_table_fits_one_pdf_page(two_runs, tmp_path, columns):
    """The findings of the comparison (every claim, both runs), and the same table widened to five run columns (the
    runs' real verdict cells repeated, under the names run 1 … run 5), each on one PDF page: the page count is one
    and that page holds every word of the title, the header and every cell, as pdftotext reads them."""
    from collections import Counter
    from dataclasses import replace
    from unicodedata import normalize

    from normvar_core.report.slides import Table, findings_slide
    from normvar_core.stats.findings import CLAIMS

    s = findings_slide(two_runs)
    t = s.table
    assert t is not None and len(t.rows) == len(CLAIMS) and len(t.header) == 3
    names = [f"run {k}" for k in range(1, columns + 1)] if columns > 2 else t.header[1:]
    table = Table(
        t.header[:1] + names,
        [r[:1] + (r[1:] * columns)[: len(names)] for r in t.rows],
        [f[:1] + (f[1:] * columns)[: len(names)] for f in t.fills],
    )
    path = write_report([replace(s, table=table)], tmp_path / "findings.pdf", "pdf")
    info = subprocess.run(["pdfinfo", str(path)], check=True, capture_output=True, text=True).stdout
    assert re.search(r"^Pages:\s+1$", info, re.M), info
    page = subprocess.run(
        ["pdftotext", "-f", "1", "-l", "1", str(path), "-"], check=True, capture_output=True, text=True
    ).stdout

    def words(text: str) -> Counter:
        return Counter(normalize("NFKC", text).split())

    want = words(" ".join([s.title, *table.header, *(c for row in table.rows for c in row)]))
    assert not want - words(page), want - words(page)


def test_comparison_slides_show_every_run(two_runs):
    """The trade-off slide names both runs, draws both runs' points (one panel each) and says "these runs"."""
    from normvar_core.report.slides import clouds_slide, findings_slide, frequency_slide, tradeoff_slide

    tr = tradeoff_slide(two_runs)
    assert tr.title.startswith("These runs") and RUN in tr.takeaway and RUN2 in tr.takeaway
    heads = [a.text for a in tr.figure.layout.annotations if a.text.startswith("<b>")]
    assert [h.split(" · ")[0] for h in heads] == [f"<b>{RUN}", f"<b>{RUN2}"]
    points = [t for t in tr.figure.data if t.name == "token types"]
    assert len(points) == 2 and points[0].xaxis != points[1].xaxis  # side by side, each on its own axes
    assert len(frequency_slide(two_runs).figure.data) >= 2 * 3 and "these runs" in findings_slide(two_runs).title
    assert clouds_slide(two_runs).title.startswith("These runs")  # (RUN2 holds no samples: one cloud)


def test_a_slide_draws_the_pages_figure(app, run):
    """One figure, two renderers: the Layers slide's traces (names, fills, visibility, legend) are the Layers
    page's, so its bands are shaded fills, as on the page, in the theme the deck draws with."""
    from dashboard_run import figures_of, open_page

    from normvar_core.report.slides import layers_slide

    at = open_page(app, "layers")
    [page] = figures_of(at)
    slide = layers_slide([run]).figure.to_plotly_json()

    def traces(fig):
        return [
            (t.get("name"), t.get("fill"), t.get("visible", True), t.get("showlegend", True), t.get("xaxis"))
            for t in fig["data"]
        ]

    assert traces(slide) == traces(page)
    bands = [t for t in slide["data"] if t.get("fill") == "tonexty"]
    assert bands and all(t["line"]["width"] == 0 for t in slide["data"] if "interval" in (t.get("name") or ""))


def test_a_one_sentence_run_gives_a_deck(tmp_path, capsys):
    """A run of one sentence (no type in the study's band): the deck builds, each value it lacks is "—" with why."""
    from gaussian_runs import gaussian_run

    from normvar_core.service import cli

    path = gaussian_run(tmp_path / "one.duckdb", 1)
    out = tmp_path / "one.html"
    assert cli.main(["report", str(path), "--format", "html", "--out", str(out)]) == 0
    import html

    text = _words(html.unescape(re.sub(r"<[^>]+>", " ", out.read_text())))
    assert "the M–V trade-off (Fig. 2)" in text and "nan" not in text.lower().split()
    assert "one: — (no token type occurs 10 to 100,000 times, the study's band: the run has 1 sentence" in text


def test_every_band_colour_is_in_the_legend():
    fig = go.Figure()
    x = np.arange(5)
    for label, color in (("run-a", "#1f77b4"), ("run-b", "#d62728")):
        fig.add_trace(go.Scatter(x=x, y=x, name=label, line=dict(color=color)))
        for _ in range(3):  # three panels' bands of the same run: one legend entry
            add_band(fig, x, x - 1, x + 1, color=color, label=label, what="95 % bootstrap interval")
    fills = {t.fillcolor for t in fig.data if t.fill == "tonexty"}
    in_legend = {t.fillcolor for t in fig.data if t.fill == "tonexty" and t.showlegend is not False}
    assert fills == in_legend and len(fills) == 2
    assert sum(1 for t in fig.data if t.fill == "tonexty" and t.showlegend) == 2


@pytest.mark.subprocess
def test_kaleido_loggers_are_quiet():
    from normvar_core.viz.figure_export import KALEIDO_LOGGERS, quiet_kaleido, to_image

    for name in KALEIDO_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG)
    quiet_kaleido()
    assert all(logging.getLogger(n).getEffectiveLevel() >= logging.WARNING for n in KALEIDO_LOGGERS)
    png = to_image(go.Figure(go.Scatter(x=[1, 2], y=[1, 2])), "png", width=300, height=200, scale=1)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert all(logging.getLogger(n).getEffectiveLevel() >= logging.WARNING for n in KALEIDO_LOGGERS)
