"""Writing a report: PowerPoint (python-pptx: a picture per figure slide, the takeaway as its subtitle,
the exact values in the speaker notes), PDF (one 16:9 page per slide through matplotlib: titles, takeaways,
text slides and the findings table as text, a figure as its kaleido PNG) and HTML (one file, plotly.js inlined, so it
opens offline with no request to any server)."""
from __future__ import annotations

import html
import io
import textwrap
from pathlib import Path

from normvar_core.report.slides import HEIGHT, WIDTH, Slide

FORMATS = ("pptx", "pdf", "html")


def deck_title(slides: list[Slide]) -> str:
    """The deck's name (its runs, from the title slide), else "normvar report"."""
    return next((s.deck for s in slides if s.deck), "normvar report")


def write_pptx(slides: list[Slide], out: Path) -> Path:
    """Each slide on the "Title Only" layout: the title goes in the layout's title placeholder (so the
    outline view and screen readers list the slides by title); the deck's name is its title property."""
    from pptx import Presentation
    from pptx.util import Emu, Pt

    prs = Presentation()
    prs.slide_width, prs.slide_height = Emu(12192000), Emu(6858000)   # 13.333 x 7.5 in: 16:9
    W, H = prs.slide_width, prs.slide_height
    title_only = prs.slide_layouts[5]
    prs.core_properties.title = deck_title(slides)
    prs.core_properties.subject = "normvar report"
    for s in slides:
        sl = prs.slides.add_slide(title_only)
        head = sl.shapes.title
        head.left, head.top, head.width, head.height = (Emu(int(W * 0.03)), Emu(int(H * 0.02)), Emu(int(W * 0.94)),
                                                        Emu(int(H * 0.09)))
        head.text_frame.text = s.title
        para = head.text_frame.paragraphs[0]
        para.alignment = 1  # left
        para.runs[0].font.size = Pt(28)
        para.runs[0].font.bold = True
        sub = sl.shapes.add_textbox(Emu(int(W * 0.03)), Emu(int(H * 0.1)), Emu(int(W * 0.94)), Emu(int(H * 0.08)))
        sub.text_frame.word_wrap = True
        sub.text_frame.text = s.takeaway
        # the whole takeaway (two runs' verdicts run long): a smaller size for a longer text, never cut
        n = len(s.takeaway)
        sub.text_frame.paragraphs[0].runs[0].font.size = Pt(16 if n <= 200 else 13 if n <= 320 else 11)
        if s.figure is not None:
            sl.shapes.add_picture(io.BytesIO(s.png()), Emu(int(W * 0.03)), Emu(int(H * 0.18)), width=Emu(int(W * 0.94)))
        else:
            body = sl.shapes.add_textbox(Emu(int(W * 0.05)), Emu(int(H * 0.25)), Emu(int(W * 0.9)), Emu(int(H * 0.7)))
            body.text_frame.word_wrap = True
            for i, line in enumerate(s.lines):
                p = body.text_frame.paragraphs[0] if i == 0 else body.text_frame.add_paragraph()
                p.text = line
                p.font.size = Pt(14)
        sl.notes_slide.notes_text_frame.text = s.notes
    prs.save(out)
    return out


def _table_cells(fig) -> tuple[list[str], list[list[str]], list[list[str]]] | None:
    """(header, rows, fills) of a slide whose figure is one plotly Table (the findings), else None."""
    if fig is None or len(fig.data) != 1 or fig.data[0].type != "table":
        return None
    t = fig.data[0]
    cols = [list(c) for c in t.cells.values]
    fills = t.cells.fill.color
    fills = [list(c) for c in fills] if fills is not None and not isinstance(fills, str) else None
    rows = [[str(c[i]) for c in cols] for i in range(len(cols[0]))]
    row_fills = [[f[i] for f in fills] for i in range(len(cols[0]))] if fills else [["white"] * len(cols)] * len(rows)
    return [str(h) for h in t.header.values], rows, row_fills


def _pdf_table(page, header, rows, fills, top: float) -> None:
    """The findings as a real table (text, not pixels), filling the page under the heading."""
    import textwrap as tw

    n = len(header)
    widths = [0.5] + [0.5 / max(n - 1, 1)] * (n - 1)
    chars = [int(w * 150) for w in widths]   # characters per line at 18 pt across the page's width
    wrap = lambda i, text: "\n".join(tw.wrap(text, chars[i]) or [""])  # noqa: E731
    ax = page.add_axes((0.03, 0.03, 0.94, top - 0.05))
    ax.axis("off")
    table = ax.table(cellText=[[wrap(i, c) for i, c in enumerate(r)] for r in rows],
                     colLabels=[wrap(i, h) for i, h in enumerate(header)], cellColours=fills,
                     colWidths=widths, cellLoc="left", colLoc="left", bbox=(0, 0, 1, 1))
    table.auto_set_font_size(False)
    table.set_fontsize(17)
    for (r, _), cell in table.get_celld().items():
        cell.set_edgecolor("#bbbbbb")
        if r == 0:
            cell.set_facecolor("#dddddd")
            cell.get_text().set_fontweight("bold")


def write_pdf(slides: list[Slide], out: Path) -> Path:
    """One 16:9 page per slide through matplotlib, so the title, the takeaway, text slides and the findings
    table are text in the PDF (searchable, copyable, read by pdftotext); a figure slide's figure is its
    kaleido PNG. The takeaway wraps to as many lines as it needs (never cut), the figure fits below it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages
    from PIL import Image

    dpi = 100
    with PdfPages(out, metadata={"Title": deck_title(slides), "Subject": "normvar report",
                                 "Creator": "normvar"}) as pdf:
        for s in slides:
            page = plt.figure(figsize=(WIDTH / dpi, HEIGHT / dpi), dpi=dpi)
            page.text(0.025, 0.965, s.title, fontsize=28, fontweight="bold", va="top")
            take = textwrap.wrap(s.takeaway, 150)
            page.text(0.025, 0.905, "\n".join(take), fontsize=15, color="#333333", va="top", linespacing=1.3)
            top = 0.89 - 0.028 * len(take)           # the page's fraction left under the takeaway
            table = _table_cells(s.figure)
            if table is not None:
                _pdf_table(page, *table, top=top)
            elif s.figure is not None:
                img = Image.open(io.BytesIO(s.png())).convert("RGB")
                ax = page.add_axes((0.02, 0.01, 0.96, top - 0.02))
                ax.imshow(img, interpolation="lanczos")
                ax.axis("off")
            else:
                lines = [part for line in s.lines for part in (textwrap.wrap(line, 100) or [""])]
                page.text(0.04, top - 0.03, "\n".join(lines), fontsize=20, va="top", linespacing=1.5)
            pdf.savefig(page)
            plt.close(page)
    return out


def write_html(slides: list[Slide], out: Path) -> Path:
    import plotly.io as pio

    parts, first = [], True
    for s in slides:
        fig_html = ""
        if s.figure is not None:
            fig_html = pio.to_html(s.figure, include_plotlyjs=first, full_html=False, config={"displaylogo": False})
            first = False
        lines = "".join(f"<p>{html.escape(x)}</p>" for x in s.lines)
        parts.append(f"<section><h2>{html.escape(s.title)}</h2><p class='take'>{html.escape(s.takeaway)}</p>{lines}"
                     f"{fig_html}<details><summary>values</summary><pre>{html.escape(s.notes)}</pre></details></section>")
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(deck_title(slides))}</title><style>"
            "body{font-family:sans-serif;margin:2em;max-width:1700px} section{margin-bottom:3em;"
            "border-bottom:1px solid #ddd} .take{font-size:1.2em;color:#333}</style></head><body>"
            + "".join(parts) + "</body></html>")
    out.write_text(page, encoding="utf-8")
    return out


def write_report(slides: list[Slide], out: Path, fmt: str) -> Path:
    """Write ``slides`` to ``out`` atomically (``destination.write_atomic``: a temp file beside it, then
    a rename). ``out`` must be a regular file or a free name: pass it through
    ``destination.resolve_destination`` first when the user chose it."""
    if fmt not in FORMATS:
        raise ValueError(fmt)
    from normvar_core.destination import write_atomic

    write = {"pptx": write_pptx, "pdf": write_pdf, "html": write_html}[fmt]
    return write_atomic(out, lambda tmp: write(slides, tmp))


__all__ = ["deck_title", "write_report", "write_pptx", "write_pdf", "write_html", "FORMATS"]
