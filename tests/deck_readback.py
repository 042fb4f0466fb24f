"""Reading a written deck back, as a reader's tools see it, for the drawing faults a reader would see: boxes of text
(``Box``: a word of the PDF from ``pdftotext -bbox``, a text element of a figure from chromium, a shape of the
PPTX) that overlap, that run past the slide's edge, and tick labels printed twice (two axes drawn on one spot).

Each function returns the faults it finds as lines of text (empty: none), so a test shows them all at once."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

NUMBER = re.compile(r"^[−-]?\d+(?:[.,]\d+)*$")


@dataclass(frozen=True)
class Box:
    """A piece of text (or a shape) and its box, y growing downwards."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float

    def core(self) -> Box:
        """The box less its font's head- and foot-room (the middle half of its height, 1 unit in from each side):
        what two printed words may not share."""
        h = (self.y1 - self.y0) / 4
        return Box(self.text, self.x0 + 1, self.y0 + h, self.x1 - 1, self.y1 - h)


def overlap(a: Box, b: Box) -> float:
    """The area two boxes share."""
    dx = min(a.x1, b.x1) - max(a.x0, b.x0)
    dy = min(a.y1, b.y1) - max(a.y0, b.y0)
    return dx * dy if dx > 0 and dy > 0 else 0.0


def overlapping(boxes: list[Box], where: str, share: float = 0.2) -> list[str]:
    """Pairs of boxes whose cores share more than ``share`` of the smaller core's area."""
    cores = [b.core() for b in boxes]
    out = []
    for i, a in enumerate(cores):
        for b in cores[i + 1 :]:
            small = min((a.x1 - a.x0) * (a.y1 - a.y0), (b.x1 - b.x0) * (b.y1 - b.y0))
            if small > 0 and overlap(a, b) > share * small:
                out.append(f"{where}: {a.text!r} overlaps {b.text!r}")
    return out


def outside(boxes: list[Box], width: float, height: float, where: str, tol: float = 0.5) -> list[str]:
    """Boxes that run past the left or right edge, or whose middle lies above or below the slide."""
    return [
        f"{where}: {b.text!r} runs past the edge ({b.x0:.0f}–{b.x1:.0f} of {width:.0f} wide)"
        for b in boxes
        if b.x0 < -tol or b.x1 > width + tol or not -tol <= (b.y0 + b.y1) / 2 <= height + tol
    ]


def _alone(b: Box, boxes: list[Box]) -> bool:
    """Whether no other word stands on ``b``'s line within half its height of it, left or right: a tick label
    stands alone; a number in a sentence ("5 hold", "layer 2 (…)") does not."""
    c, room = b.core(), (b.y1 - b.y0) / 2
    for o in boxes:
        k = o.core()
        if o is not b and min(c.y1, k.y1) > max(c.y0, k.y0) and k.x0 < c.x1 + room and k.x1 > c.x0 - room:
            return False
    return True


def doubled_ticks(boxes: list[Box], where: str) -> list[str]:
    """Numbers printed twice on one axis: among the numbers that end at one x (a column of y tick labels) or sit
    on one baseline (a row of x tick labels), in order along it, a value repeated within its next two neighbours
    and within three label heights of itself. Two axes drawn on one spot interleave their labels ("50 60 50 40 40
    30 …"); one axis never repeats a value, and the same number elsewhere on the slide (another panel's axis, a
    table's next column) stands further off."""
    nums = [b for b in boxes if NUMBER.match(b.text) and _alone(b, boxes)]
    out = []
    for key, along in (
        (lambda b: round(b.x1 / 3), lambda b: (b.y0 + b.y1) / 2),
        (lambda b: round(b.y1 / 3), lambda b: (b.x0 + b.x1) / 2),
    ):
        runs: dict[int, list[Box]] = {}
        for b in nums:
            runs.setdefault(key(b), []).append(b)
        for run in runs.values():
            run.sort(key=along)
            for i, b in enumerate(run):
                near = 3 * (b.y1 - b.y0)
                if any(c.text == b.text and abs(along(c) - along(b)) < near for c in run[i + 1 : i + 3]):
                    out.append(
                        f"{where}: tick label {b.text!r} printed twice on one axis: " + " ".join(c.text for c in run)
                    )
                    break
    return sorted(set(out))


# ----------------------------------------------------------------------------------------------------------- PDF
_PAGE = re.compile(r'<page width="([\d.]+)" height="([\d.]+)">(.*?)</page>', re.DOTALL)
_WORD = re.compile(r'<word xMin="([-\d.]+)" yMin="([-\d.]+)" xMax="([-\d.]+)" yMax="([-\d.]+)">(.*?)</word>')


def pdf_pages(path: Path) -> list[tuple[float, float, list[Box]]]:
    """Each page's width, height (points) and words with their boxes, as ``pdftotext -bbox`` reads them."""
    import html

    xml = subprocess.run(["pdftotext", "-bbox", str(path), "-"], check=True, capture_output=True, text=True).stdout
    return [
        (float(w), float(h), [Box(html.unescape(m[4]), *map(float, m[:4])) for m in _WORD.findall(body)])
        for w, h, body in _PAGE.findall(xml)
    ]


def pdf_layout_doubles(path: Path) -> list[str]:
    """Lines of ``pdftotext -layout`` where one number stands twice side by side ("50 50")."""
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], check=True, capture_output=True, text=True).stdout
    pair = re.compile(r"(?<![\w.,])([−-]?\d+(?:\.\d+)?) {1,2}\1(?![\w.,])")
    return [f"pdftotext -layout: {line.strip()!r}" for line in text.splitlines() if pair.search(line)]


def pdf_faults(path: Path) -> list[str]:
    """Every page: no word past its edges, no two words over each other, no tick label printed twice."""
    out = pdf_layout_doubles(path)
    for k, (w, h, words) in enumerate(pdf_pages(path), start=1):
        where = f"PDF page {k}"
        out += outside(words, w, h, where) + overlapping(words, where) + doubled_ticks(words, where)
    return out


# ---------------------------------------------------------------------------------------------------------- PPTX
FONTS = {
    False: "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    True: "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf",
}
"""Liberation Sans: Arial's metrics, wider than Calibri (PowerPoint's theme font), so a text measured to fit in it
fits as PowerPoint draws it."""
EMU_PER_PT = 12700


def text_height_pt(paragraphs: list[tuple[str, float, bool]], width_pt: float) -> float:
    """The height (points) that paragraphs of (text, size pt, bold) take wrapped at ``width_pt``, measured with PIL
    in Liberation Sans, 1.2 lines per em."""
    from PIL import ImageFont

    total = 0.0
    for text, size, bold in paragraphs:
        font = ImageFont.truetype(FONTS[bold], size=max(round(size * 10), 1))  # 10 px per pt: fine widths
        lines, line = 0, ""
        for word in text.split(" "):
            trial = f"{line} {word}" if line else word
            if font.getlength(trial) / 10 <= width_pt or not line:
                line = trial
            else:
                lines, line = lines + 1, word
        total += (lines + 1) * size * 1.2
    return total


def _frame_paragraphs(frame) -> list[tuple[str, float, bool]]:
    paras = []
    for p in frame.paragraphs:
        runs = list(p.runs)
        size = max([r.font.size.pt for r in runs if r.font.size] or [18.0])
        paras.append(("".join(r.text for r in runs), size, any(r.font.bold for r in runs)))
    return paras


def pptx_faults(path: Path) -> list[str]:
    """Every slide: every shape inside the slide; no two shapes (title, takeaway, picture, table, text) over each
    other; the text of each text box and of each table (its rows' wrapped cells) within its box."""
    from pptx import Presentation

    prs = Presentation(path)
    W, H = prs.slide_width / EMU_PER_PT, prs.slide_height / EMU_PER_PT
    out = []
    for k, sl in enumerate(prs.slides, start=1):
        where, boxes = f"PPTX slide {k}", []
        for sh in sl.shapes:
            x0, y0 = sh.left / EMU_PER_PT, sh.top / EMU_PER_PT
            w, h = sh.width / EMU_PER_PT, sh.height / EMU_PER_PT
            name = (sh.text_frame.text[:40] if sh.has_text_frame else sh.shape_type and str(sh.shape_type)) or sh.name
            if sh.has_text_frame:
                f = sh.text_frame
                pad_x = ((f.margin_left or 91440) + (f.margin_right or 91440)) / EMU_PER_PT
                pad_y = ((f.margin_top or 45720) + (f.margin_bottom or 45720)) / EMU_PER_PT
                need = text_height_pt(_frame_paragraphs(f), w - pad_x) + pad_y
                if need > h + 0.5:
                    out.append(f"{where}: the text {name!r} needs {need:.0f} pt, its box is {h:.0f} pt high")
            if sh.has_table:
                h = 0.0
                for row in sh.table.rows:
                    need = max(
                        text_height_pt(_frame_paragraphs(c.text_frame), sh.table.columns[j].width / EMU_PER_PT - 14.4)
                        + 7.2
                        for j, c in enumerate(row.cells)
                    )
                    h += max(need, row.height / EMU_PER_PT)
            boxes.append(Box(str(name), x0, y0, x0 + w, y0 + h))
        out += outside(boxes, W, H, where) + [
            f"{where}: {b.text!r} runs past the bottom" for b in boxes if b.y1 > H + 0.5
        ]
        out += [
            f"{where}: {a.text!r} overlaps {b.text!r}"
            for i, a in enumerate(boxes)
            for b in boxes[i + 1 :]
            if overlap(a, b) > 1.0
        ]
    return out


# ---------------------------------------------------------------------------------------------------------- HTML
FIGURE_TEXT = """() => [...document.querySelectorAll('.js-plotly-plot')].map((plot, k) => {
  const r = plot.getBoundingClientRect();
  const texts = [...plot.querySelectorAll('.main-svg text')].filter(t => {
    const s = getComputedStyle(t);
    return t.textContent.trim() && s.display !== 'none' && s.visibility !== 'hidden' && +s.opacity > 0
      && !t.closest('[style*="opacity: 0"]');
  }).map(t => { const b = t.getBoundingClientRect(); return [t.textContent.trim(), b.left - r.left, b.top - r.top,
                                                               b.right - r.left, b.bottom - r.top]; });
  return [k, r.width, r.height, texts];
})"""


def html_faults(page) -> list[str]:
    """Every figure of the page (a playwright page with the deck loaded and its figures drawn): each text element
    inside the figure, no two text elements over each other, no tick label printed twice."""
    out = []
    for k, w, h, texts in page.evaluate(FIGURE_TEXT):
        boxes = [Box(t, x0, y0, x1, y1) for t, x0, y0, x1, y1 in texts]
        where = f"HTML figure {k + 1}"
        out += outside(boxes, w, h, where) + overlapping(boxes, where) + doubled_ticks(boxes, where)
    return out


__all__ = [
    "Box",
    "doubled_ticks",
    "html_faults",
    "outside",
    "overlap",
    "overlapping",
    "pdf_faults",
    "pdf_pages",
    "pptx_faults",
    "text_height_pt",
]
