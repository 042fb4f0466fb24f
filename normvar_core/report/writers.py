"""Writing a report: PowerPoint (python-pptx: a picture per figure slide, the takeaway as its subtitle, the
findings as a table of text continued on further slides, the exact values in the speaker notes), PDF
(``pdf_pages``: one 16:9 page per slide or more, its text wrapped, never cut) and HTML (one file that reflows to
the window, plotly.js inlined, so it opens offline with no request to any server)."""

from __future__ import annotations

import html
import io
import textwrap
from pathlib import Path

from normvar_core.report.slides import HEIGHT, Slide, Table

FORMATS = ("pptx", "pdf", "html")


def deck_title(slides: list[Slide]) -> str:
    """The deck's name (its runs, from the title slide), else "normvar report"."""
    return next((s.deck for s in slides if s.deck), "normvar report")


def _table_pages(table: Table, widths_pt: list[float], size_pt: float, room_pt: float) -> list[list[int]]:
    """The rows of ``table`` in groups that fit ``room_pt`` of height (the header repeated on each), a row's
    height estimated from its wrapped lines at ``size_pt`` (a character taken as 0.55 em wide: generous, so a
    row's real height stays under the estimate)."""

    def height(row: list[str]) -> float:
        lines = max(len(textwrap.wrap(c, max(int(w / (0.55 * size_pt)), 8)) or [""]) for c, w in zip(row, widths_pt))
        return lines * size_pt * 1.2 + 7.2 + 2  # 0.05 in margins above and below

    groups: list[list] = [[]]
    used = height(table.header)
    for i, row in enumerate(table.rows):
        h = height(row)
        if groups[-1] and used + h > room_pt:
            groups.append([])
            used = height(table.header)
        groups[-1].append(i)
        used += h
    return groups


def _pptx_text(frame, text: str, size_pt: float, *, bold: bool = False) -> None:
    from pptx.util import Pt

    frame.word_wrap = True
    frame.text = text
    for para in frame.paragraphs:
        for run in para.runs:
            run.font.size = Pt(size_pt)
            run.font.bold = bold


PT = 12700  # EMU per point
INSET = (7.2, 3.6)  # python-pptx's text frame insets, points: left/right, top/bottom


def _fitted(text: str, width_pt: float, sizes: tuple[float, ...], max_lines: int, *, bold: bool = False):
    """(size, height pt): the largest of ``sizes`` at which ``text`` takes at most ``max_lines`` lines at
    ``width_pt`` (else the smallest), and the height of its box at that size (1.2 lines per em, the insets)."""
    from normvar_core.report.pdf_pages import line_count

    inner = width_pt - 2 * INSET[0]
    for size in sizes:
        n = line_count(text, inner, size, bold=bold)
        if n <= max_lines or size == sizes[-1]:
            return size, n * size * 1.2 + 2 * INSET[1] + 2


def _heading(W: int, H: int, title: str, takeaway: str) -> tuple[float, float, float, float, int]:
    """The title's and the takeaway's sizes and box heights (points), each box as high as its wrapped text (a
    smaller size for a longer text, never cut), and the top of the room left under them (EMU)."""
    width = W * 0.94 / PT
    t_size, t_h = _fitted(title, width, (28, 24, 20), 1, bold=True)
    s_size, s_h = _fitted(takeaway, width, (16, 14, 12, 11), 3)
    return t_size, t_h, s_size, s_h, int(H * 0.02) + int(t_h * PT) + int(s_h * PT) + int(4 * PT)


def _pptx_slide(prs, title: str, takeaway: str, notes: str):
    """A slide on the "Title Only" layout: the title in the layout's title placeholder (so the outline view and
    screen readers list the slides by title), the takeaway under it (``_heading``), the notes. Returns the slide
    and the top of the room left under the text (EMU)."""
    from pptx.util import Emu

    W, H = prs.slide_width, prs.slide_height
    left, width = int(W * 0.03), int(W * 0.94)
    t_size, t_h, s_size, s_h, room = _heading(W, H, title, takeaway)
    sl = prs.slides.add_slide(prs.slide_layouts[5])
    head = sl.shapes.title
    head.left, head.top, head.width, head.height = Emu(left), Emu(int(H * 0.02)), Emu(width), Emu(int(t_h * PT))
    _pptx_text(head.text_frame, title, t_size, bold=True)
    head.text_frame.paragraphs[0].alignment = 1  # left
    sub = sl.shapes.add_textbox(Emu(left), Emu(head.top + head.height), Emu(width), Emu(int(s_h * PT)))
    _pptx_text(sub.text_frame, takeaway, s_size)
    sl.notes_slide.notes_text_frame.text = notes
    return sl, room


TABLE_SIZES = (14, 12, 11, 10, 9)
"""The findings table's text sizes, points, largest first: the writer takes the largest at which the table fits one
slide (14 for up to two runs, else from 12), and continues it on further slides only at the smallest."""


def _pptx_table(prs, s: Slide) -> None:
    """The findings as a PowerPoint table of text (wrapped in its cells), continued on further slides."""
    from pptx.dml.color import RGBColor
    from pptx.util import Emu

    W, H = prs.slide_width, prs.slide_height
    n = len(s.table.header)  # type: ignore[union-attr]  # a table slide
    width = int(W * 0.94)
    cols = [int(width * 0.5)] + [int(width * 0.5 / max(n - 1, 1))] * (n - 1)
    room = int(H * 0.98) - _heading(W, H, f"{s.title} (continued)", s.takeaway)[-1]  # the longer title's room
    for size in TABLE_SIZES[0 if n <= 3 else 1 :]:  # the largest size at which the table fits one slide
        pages = _table_pages(s.table, [c / 12700 for c in cols], size, room / 12700)  # type: ignore[arg-type]
        if len(pages) == 1:
            break
    for k, rows in enumerate(pages):
        sl, top = _pptx_slide(prs, s.title + (" (continued)" if k else ""), s.takeaway, s.notes)
        shape = sl.shapes.add_table(len(rows) + 1, n, Emu(int(W * 0.03)), Emu(top), Emu(width), Emu(room // 2))
        grid = shape.table
        for j, w in enumerate(cols):
            grid.columns[j].width = Emu(w)
        for j, text in enumerate(s.table.header):  # type: ignore[union-attr]
            _pptx_text(grid.cell(0, j).text_frame, text, size, bold=True)
        for r, i in enumerate(rows, start=1):
            grid.rows[r].height = Emu(int(size * 1.2 * 12700))
            for j, (text, fill) in enumerate(zip(s.table.rows[i], s.table.fills[i])):  # type: ignore[union-attr]
                c = grid.cell(r, j)
                _pptx_text(c.text_frame, text, size)
                c.fill.solid()
                c.fill.fore_color.rgb = RGBColor.from_string(fill.lstrip("#").upper())


def write_pptx(slides: list[Slide], out: Path) -> Path:
    """Each slide on the "Title Only" layout (``_pptx_slide``): a figure as its kaleido PNG, text lines in a
    wrapping box, the findings as a table of text; the deck's name is its title property."""
    from pptx import Presentation
    from pptx.util import Emu, Pt

    prs = Presentation()
    prs.slide_width, prs.slide_height = Emu(12192000), Emu(6858000)  # 13.333 x 7.5 in: 16:9
    W, H = prs.slide_width, prs.slide_height
    prs.core_properties.title = deck_title(slides)
    prs.core_properties.subject = "normvar report"
    for s in slides:
        if s.table is not None:
            _pptx_table(prs, s)
            continue
        sl, top = _pptx_slide(prs, s.title, s.takeaway, s.notes)
        if s.figure is not None:  # the room under the text, the figure's aspect kept
            fw, fh = s.figure.layout.width or 1600, s.figure.layout.height or 780
            width = min(int(W * 0.94), int((int(H * 0.99) - top) * fw / fh))  # type: ignore[operator]  # the deck sets its slide size
            sl.shapes.add_picture(io.BytesIO(s.png()), Emu((W - width) // 2), Emu(top), width=Emu(width))
        else:
            body = sl.shapes.add_textbox(Emu(int(W * 0.05)), Emu(top), Emu(int(W * 0.9)), Emu(int(H * 0.98) - top))  # type: ignore[operator]
            body.text_frame.word_wrap = True
            for i, line in enumerate(s.lines):
                p = body.text_frame.paragraphs[0] if i == 0 else body.text_frame.add_paragraph()
                p.text = line
                p.font.size = Pt(14)
    prs.save(out)  # type: ignore[arg-type]  # python-pptx opens any path
    return out


def write_pdf(slides: list[Slide], out: Path) -> Path:
    """The PDF deck (``pdf_pages``: text wrapped at its measured width, tables and text continued on further pages)."""
    from normvar_core.report import pdf_pages

    return pdf_pages.write_pdf(slides, out, deck_title(slides))


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.header)
    body = "".join(
        "<tr>" + "".join(f"<td style='background:{f}'>{html.escape(c)}</td>" for c, f in zip(row, fills)) + "</tr>"
        for row, fills in zip(t.rows, t.fills)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_html(slides: list[Slide], out: Path) -> Path:
    """One self-contained page (plotly.js inlined once): each slide's heading, takeaway and text, its figure
    (the same figure, sized to the window: it reflows, nothing has a fixed width) or its table of text."""
    import plotly.graph_objects as go
    import plotly.io as pio

    parts, first = [], True
    for s in slides:
        body = "".join(f"<p>{html.escape(x)}</p>" for x in s.lines)
        if s.table is not None:
            body += _html_table(s.table)
        if s.figure is not None:
            fig = go.Figure(s.figure)
            fig.update_layout(width=None, autosize=True)
            body += pio.to_html(
                fig,
                include_plotlyjs=first,
                full_html=False,
                default_width="100%",
                default_height=f"{HEIGHT - 120}px",
                config={"displaylogo": False, "responsive": True},
            )
            first = False
        parts.append(
            f"<section><h2>{html.escape(s.title)}</h2><p class='take'>{html.escape(s.takeaway)}</p>{body}"
            f"<details><summary>values</summary><pre>{html.escape(s.notes)}</pre></details></section>"
        )
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:100%} section{margin-bottom:3em;"
        "border-bottom:1px solid #ddd;overflow-wrap:anywhere} .take{font-size:1.2em;color:#333} "
        "pre{white-space:pre-wrap} table{border-collapse:collapse;width:100%;table-layout:fixed} "
        "th,td{border:1px solid #bbb;padding:.4em;text-align:left;vertical-align:top} th{background:#ddd} "
        "th:first-child,td:first-child{width:50%}"
    )
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(deck_title(slides))}</title><style>{style}</style></head><body>"
        + "".join(parts)
        + "</body></html>"
    )
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
