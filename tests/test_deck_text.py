"""Issue 34, item 4, the decks: the PDF has a text layer (pdftotext reads every title, takeaway and the
findings table), the two-run takeaway is whole, the findings slide fills the slide in large type, every
interval band's colour is in the legend, and kaleido's loggers stay quiet."""
from __future__ import annotations

import logging
import re
import subprocess

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from normvar_core.report.slides import build_slides
from normvar_core.report.writers import write_report
from normvar_core.viz.bands import add_band
from dashboard_run import RUN, RUN2


@pytest.fixture(scope="module")
def two_runs(data_dir):  # noqa: F811
    from normvar_core.runs.reader import open_run

    return [open_run(data_dir / "runs" / f"{n}.duckdb") for n in (RUN, RUN2)]


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_pdf_text_layer_holds_titles_takeaways_and_findings(two_runs, tmp_path):
    slides = build_slides(two_runs)
    path = write_report(slides, tmp_path / "deck.pdf", "pdf")
    pages = subprocess.run(["pdftotext", "-layout", str(path), "-"], check=True, capture_output=True,
                           text=True).stdout.split("\f")
    assert len([p for p in pages if p.strip()]) == len(slides)
    for s, page in zip(slides, pages):
        flat = _words(page)
        assert _words(s.title) in flat
        # the whole takeaway, to its last word: the two-run subtitle is no longer cut at "· claim"
        for word in _words(s.takeaway).split(" ")[-6:]:
            assert word in flat, (s.title, word)
    findings = _words(pages[0])
    from normvar_core.stats.findings import CLAIMS

    for c in CLAIMS:
        assert f"{c.id} ({c.seed})" in findings
    assert RUN in findings and RUN2 in findings and ("holds" in findings or "fails" in findings)


def test_findings_slide_uses_the_slide(two_runs):
    fig = build_slides(two_runs)[0].figure
    table = fig.data[0]
    assert table.cells.font.size >= 20 and table.header.font.size >= 22
    rows = len(table.cells.values[0])
    assert table.header.height + rows * table.cells.height >= 0.85 * (fig.layout.height - 40)


def test_every_band_colour_is_in_the_legend():
    fig = go.Figure()
    x = np.arange(5)
    for label, color in (("run-a", "#1f77b4"), ("run-b", "#d62728")):
        fig.add_trace(go.Scatter(x=x, y=x, name=label, line=dict(color=color)))
        for _ in range(3):   # three panels' bands of the same run: one legend entry
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
