"""Writing a report: PowerPoint (python-pptx: a picture per figure slide, the takeaway as its subtitle,
the exact values in the speaker notes), PDF (one 16:9 page per slide: the kaleido PNG and the
takeaway drawn with Pillow, saved as a multi-page PDF) and HTML (one file, plotly.js inlined, so it
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
        sub = sl.shapes.add_textbox(Emu(int(W * 0.03)), Emu(int(H * 0.105)), Emu(int(W * 0.94)), Emu(int(H * 0.07)))
        sub.text_frame.word_wrap = True
        sub.text_frame.text = s.takeaway
        sub.text_frame.paragraphs[0].runs[0].font.size = Pt(16)
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


def _font(size: int):
    from PIL import ImageFont

    for name in ("DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"):
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default()


def write_pdf(slides: list[Slide], out: Path) -> Path:
    from PIL import Image, ImageDraw

    pages = []
    for s in slides:
        page = Image.new("RGB", (WIDTH, HEIGHT), "white")
        draw = ImageDraw.Draw(page)
        draw.text((48, 24), s.title, fill="black", font=_font(40))
        draw.text((48, 80), "\n".join(textwrap.wrap(s.takeaway, 120)[:2]), fill="#333333", font=_font(22))
        if s.figure is not None:
            img = Image.open(io.BytesIO(s.png())).convert("RGB")
            img.thumbnail((WIDTH - 64, HEIGHT - 150))
            page.paste(img, (32, 140))
        else:
            y = 180
            for line in s.lines:
                for part in textwrap.wrap(line, 110):
                    draw.text((64, y), part, fill="black", font=_font(24))
                    y += 36
        pages.append(page)
    pages[0].save(out, "PDF", resolution=110, save_all=True, append_images=pages[1:], title=deck_title(slides),
                  subject="normvar report", creator="normvar")
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
