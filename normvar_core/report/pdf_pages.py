"""The PDF deck: one 16:9 page per slide through matplotlib, so that the title, the takeaway, text slides and the
findings table are text in the PDF (searchable, copyable, read by pdftotext); a figure slide's figure is its kaleido
PDF, laid onto the page as a vector drawing (pikepdf), so its tick labels and titles are text too. Text is wrapped at
its measured width (the renderer's own glyph widths, never a character count), so no line
runs past its box; a table or text that does not fit the page continues on a further page, "(continued)", with its
header repeated. A table row is never split."""

from __future__ import annotations

import io
from pathlib import Path

from normvar_core.report.slides import HEIGHT, WIDTH, Slide, Table

DPI = 100
MARGIN = 40  # px, each side of the page
TITLE_PT, TAKE_PT, TEXT_PT = 28, 15, 20
CELL_SIZES = (14, 13, 12, 11, 10, 9)
"""A table's cell sizes (pt), largest first: the table is set at the largest at which it fits whole on its page
(``_layout``); below the smallest, it continues on further pages."""
CLAIM_SHARES = (0.5, 0.55, 0.6, 0.65, 0.7)
"""The shares of the table's width its first column (the claims' words) may take; the rest is shared by the runs'
columns. At each size the share that gives the lowest table is used."""
LEADING = 1.3  # line height / font size
PAD = 6  # px inside a table cell


def _px(pt: float) -> float:
    return pt * DPI / 72


def wrap(text: str, width_px: float, size_pt: float, renderer, *, bold: bool = False) -> list[str]:
    """``text`` broken into lines no wider than ``width_px`` at ``size_pt`` (greedy, at spaces; a word wider than
    the box is broken between characters), measured in the weight it is drawn in. Explicit newlines are kept."""
    from matplotlib.font_manager import FontProperties

    prop = FontProperties(size=size_pt, weight="bold" if bold else "normal")

    def width(s: str) -> float:
        return renderer.get_text_width_height_descent(s, prop, ismath=False)[0]

    out: list[str] = []
    for para in str(text).split("\n"):
        line = ""
        for word in para.split(" "):
            trial = f"{line} {word}" if line else word
            if width(trial) <= width_px * 0.97:  # the PDF backend's widths may differ from Agg's by a hair
                line = trial
                continue
            if line:
                out.append(line)
            while width(word) > width_px and len(word) > 1:  # a word longer than the box
                cut = max(k for k in range(1, len(word) + 1) if width(word[:k]) <= width_px or k == 1)
                out.append(word[:cut])
                word = word[cut:]
            line = word
        out.append(line)
    return out


_POINTS: list = []  # an Agg renderer at 72 dpi (a pixel is a point), made on first use


def line_count(text: str, width_pt: float, size_pt: float, *, bold: bool = False) -> int:
    """How many lines ``text`` takes wrapped at ``width_pt`` in ``size_pt`` (``wrap``, in matplotlib's DejaVu Sans:
    wider than Arial and Calibri, so a box sized from it holds the text in PowerPoint's fonts too)."""
    if not _POINTS:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(1, 1), dpi=72)
        _POINTS.append(fig.canvas.get_renderer())  # type: ignore[attr-defined]  # the Agg canvas
        plt.close(fig)
    return len(wrap(text, width_pt, size_pt, _POINTS[0], bold=bold))


class _Page:
    """A page being filled from the top: ``y`` is the next free pixel row (0 at the top)."""

    def __init__(self, pdf, title: str, renderer_of):
        import matplotlib.pyplot as plt

        self.pdf = pdf
        self.fig = plt.figure(figsize=(WIDTH / DPI, HEIGHT / DPI), dpi=DPI)
        self.renderer = renderer_of(self.fig)
        self.y = MARGIN * 0.6
        self.text(title, TITLE_PT, bold=True)

    def text(
        self,
        text: str,
        size: float,
        *,
        bold: bool = False,
        color: str = "#000000",
        x: float = MARGIN,
        width: float | None = None,
    ) -> None:
        lines = wrap(text, width or WIDTH - 2 * MARGIN, size, self.renderer, bold=bold)
        self.fig.text(
            x / WIDTH,
            1 - self.y / HEIGHT,
            "\n".join(lines),
            fontsize=size,
            va="top",
            color=color,
            fontweight="bold" if bold else "normal",
            linespacing=LEADING,
            parse_math=False,
        )
        self.y += len(lines) * _px(size) * LEADING + 10

    def left(self) -> float:
        return HEIGHT - MARGIN * 0.5 - self.y

    def close(self) -> None:
        import matplotlib.pyplot as plt

        self.pdf.savefig(self.fig)
        plt.close(self.fig)


def _row_height(cells: list[list[str]], size: float) -> float:
    return max(len(c) for c in cells) * _px(size) * LEADING + 2 * PAD


def _draw_row(
    page: _Page, cells: list[list[str]], widths: list[float], fills: list[str], *, bold: bool, size: float
) -> None:
    from matplotlib.patches import Rectangle

    h, x = _row_height(cells, size), MARGIN
    for lines, w, fill in zip(cells, widths, fills):
        page.fig.add_artist(
            Rectangle(
                (x / WIDTH, 1 - (page.y + h) / HEIGHT),
                w / WIDTH,
                h / HEIGHT,
                transform=page.fig.transFigure,
                facecolor=fill,
                edgecolor="#bbbbbb",
                lw=1,
            )
        )
        page.fig.text(
            (x + PAD) / WIDTH,
            1 - (page.y + PAD) / HEIGHT,
            "\n".join(lines),
            fontsize=size,
            va="top",
            fontweight="bold" if bold else "normal",
            linespacing=LEADING,
            parse_math=False,
        )
        x += w  # type: ignore[assignment]  # a float position from here on
    page.y += h


def _cells(row: list[str], widths: list[float], size: float, renderer, *, bold: bool = False) -> list[list[str]]:
    """Each cell of ``row`` wrapped at its column's width less the padding."""
    return [wrap(c, w - 2 * PAD, size, renderer, bold=bold) for c, w in zip(row, widths)]


def _layout(table: Table, renderer, room: float) -> tuple[float, list[float]]:
    """The cell size and the column widths (px) of ``table``: the largest of ``CELL_SIZES`` at which its header and
    every row fit in ``room`` px, the first column at the one of ``CLAIM_SHARES`` that gives the lowest table;
    the smallest size, at its lowest layout, when none fits (the table then continues on further pages)."""
    n, inner = len(table.header), WIDTH - 2 * MARGIN
    best: tuple[float, float, list[float]] | None = None
    for size in CELL_SIZES:
        best = None
        for share in CLAIM_SHARES if n > 1 else (1.0,):
            widths = [inner * share] + [inner * (1 - share) / max(n - 1, 1)] * (n - 1)
            height = _row_height(_cells(table.header, widths, size, renderer, bold=True), size) + sum(
                _row_height(_cells(r, widths, size, renderer), size) for r in table.rows
            )
            if best is None or height < best[0]:
                best = (height, size, widths)
        if best[0] <= room:  # type: ignore[index]  # set by the loop above
            break
    return best[1], best[2]  # type: ignore[index]


def _table(slide: Slide, table: Table, new_page) -> None:
    """The table under the slide's heading, at the size and column widths that fit it whole on the page
    (``_layout``); rows that still run out of room continue on further pages, the header repeated."""
    n = len(table.header)
    page = new_page(slide.title)
    page.text(slide.takeaway, TAKE_PT, color="#333333")
    size, widths = _layout(table, page.renderer, page.left())
    header = _cells(table.header, widths, size, page.renderer, bold=True)
    _draw_row(page, header, widths, ["#dddddd"] * n, bold=True, size=size)
    for row, fill in zip(table.rows, table.fills):
        wrapped = _cells(row, widths, size, page.renderer)
        if _row_height(wrapped, size) > page.left():
            page.close()
            page = new_page(f"{slide.title} (continued)")
            _draw_row(page, header, widths, ["#dddddd"] * n, bold=True, size=size)
        _draw_row(page, wrapped, widths, fill, bold=False, size=size)
    page.close()


def _lines(slide: Slide, new_page) -> None:
    """A text slide: its lines, continued on further pages as they run out of room."""
    page = new_page(slide.title)
    page.text(slide.takeaway, TAKE_PT, color="#333333")
    for line in slide.lines:
        need = len(wrap(line, WIDTH - 2 * MARGIN - 20, TEXT_PT, page.renderer)) * _px(TEXT_PT) * LEADING
        if need > page.left():
            page.close()
            page = new_page(f"{slide.title} (continued)")
        page.text(line, TEXT_PT, x=MARGIN + 20, width=WIDTH - 2 * MARGIN - 20)
    page.close()


def _figure(slide: Slide, new_page, figures: list) -> None:
    """The heading and takeaway; the room left under them is kept for the figure, noted in ``figures`` as (page
    index, [x0, y0, x1, y1] in PDF points from the bottom left, the figure's PDF)."""
    page = new_page(slide.title)
    page.text(slide.takeaway, TAKE_PT, color="#333333")
    top = page.y / HEIGHT
    pt = 72 / DPI
    box = [0.02 * WIDTH * pt, 0.01 * HEIGHT * pt, 0.98 * WIDTH * pt, (0.01 + max(1 - top - 0.02, 0.2)) * HEIGHT * pt]
    figures.append((page.pdf.get_pagecount(), box, slide.pdf()))
    page.close()


def _lay_figures(out: Path, figures: list) -> None:
    """Each figure's vector PDF onto its page, fitted into its box (aspect kept, centred)."""
    import pikepdf

    with pikepdf.open(out, allow_overwriting_input=True) as deck:
        for index, box, data in figures:
            with pikepdf.open(io.BytesIO(data)) as fig:
                deck.pages[index].add_overlay(fig.pages[0], pikepdf.Rectangle(*box))
        deck.save(out)


def write_pdf(slides: list[Slide], out: Path, title: str) -> Path:
    """Every slide as one page or more (a table or text that runs past a page continues on the next)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_pdf import PdfPages

    figures: list = []
    with PdfPages(out, metadata={"Title": title, "Subject": "normvar report", "Creator": "normvar"}) as pdf:

        def new_page(heading: str) -> _Page:
            return _Page(pdf, heading, lambda fig: fig.canvas.get_renderer())

        for s in slides:
            if s.table is not None:
                _table(s, s.table, new_page)
            elif s.figure is not None:
                _figure(s, new_page, figures)
            else:
                _lines(s, new_page)
    _lay_figures(out, figures)
    return out


__all__ = ["write_pdf", "wrap", "line_count"]
