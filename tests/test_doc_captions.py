"""The manual as it stands: (a) the user pages state what is, with no history ("no longer", "used to", "older
version" …: history belongs in Development and Benchmarks), and (b) each dashboard screenshot's caption names its
page as the sidebar does, and that page's tabs, in order, as the page's source draws them (``views/<page>.py``:
the tabs of ``_chrome.draw_sections`` or ``_sections.draw`` with ``viz.page_figures.FIGURES``), and the page's
heading (``_chrome.run_page``) starts with that name. Read from the source, with no run and no browser."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from normvar_core.viz.page_figures import FIGURES
from normvar_core.viz.pages import PAGES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
HISTORY_PAGES = {"development.md", "benchmarks.md"}
USER_PAGES = sorted(p for p in DOCS.glob("*.md") if p.name not in HISTORY_PAGES)

HISTORY = re.compile(
    r"\b(no longer|used to|older version|newer version|previously|formerly|anymore|any more|"
    r"once (?:\w+ed|was|were|had|did|made|took|let|put|gave|left|came|went|got)\b|"
    r"was (changed|fixed|removed|renamed)|has been (changed|fixed|removed|renamed)|"
    r"slipped through|still works|now (?:reads|writes|shows|says))",
    re.IGNORECASE,
)
"""Words that tell a change rather than what is. "once" is history only before a verb in the past ("once slipped
through"); as a count ("once per run", "at once", "read once") it is not."""


def history(text: str) -> list[str]:
    """The lines of ``text`` that tell history (code blocks and `code` left out)."""
    found, code = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            code = not code
            continue
        if not code and HISTORY.search(re.sub(r"`[^`]*`", "", line)):
            found.append(line.strip())
    return found


def test_the_history_check_catches_history_and_passes_counts():
    told = [
        "no longer probes `/x` first",
        "A `huey.sqlite` left by an older version is ignored.",
        "numbers with blank cells once slipped through",
        "the flag used to print twice",
    ]
    counts = [
        "it reads the file once, at start",
        "computed once per run and layer",
        "signs in once, loopback too",
        "all at once",
        "a token, printed once in the link",
    ]
    assert all(history(t) for t in told), [t for t in told if not history(t)]
    assert not any(history(t) for t in counts), [t for t in counts if history(t)]


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: p.name)
def test_user_pages_tell_no_history(page):
    assert history(page.read_text(encoding="utf-8")) == []


# ------------------------------------------------------------------------------------------ captions and pages
def page_source(key: str) -> tuple[str | None, list[str] | None]:
    """A page's heading (the first argument of ``_chrome.run_page``) and its tabs in order (None when the page
    builds them in a way this reading does not follow), from ``views/<file>``."""
    page = next(p for p in PAGES if p.key == key)
    tree = ast.parse((ROOT / "views" / page.file).read_text(encoding="utf-8"))
    heading, tabs = None, []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        if name == "run_page" and node.args and isinstance(node.args[0], ast.Constant):
            heading = node.args[0].value
        elif name in ("draw_sections", "draw") and node.args:
            given = (
                node.args[1]
                if name == "draw_sections"
                else next((k.value for k in node.keywords if k.arg == "extra"), None)
            )
            if name == "draw":
                tabs += [f.label for f in FIGURES.get(key, ())]
            if given is None:
                continue
            if not isinstance(given, ast.Dict):
                return heading, None
            # the page's own tabs; a ``**{…}`` of the curves the runs declare depends on the runs
            tabs += [v.elts[0].value for k, v in zip(given.keys, given.values) if k is not None]
    return heading, tabs


CAPTION = re.compile(r"!\[[^\]]*\]\(screenshots/([\w.-]+)\.png\)\s*<figcaption>(\*\*.*?)</figcaption>", re.DOTALL)
"""A screenshot and its caption, where the caption starts with a page's name in bold (a dashboard page's
screenshot; a report's has none)."""


def captions() -> list[tuple[str, str, str]]:
    """(doc page, screenshot, caption) of every screenshot of a dashboard page that a figure of the manual captions
    (its caption starts with the page's name in bold)."""
    return [
        (doc.name, shot, text)
        for doc in DOCS.glob("*.md")
        for shot, text in CAPTION.findall(doc.read_text(encoding="utf-8"))
    ]


def test_every_page_with_tabs_has_a_captioned_screenshot():
    named = {re.match(r"\*\*([^*]+)\*\*", text).group(1) for _, _, text in captions()}
    with_tabs = [p.title for p in PAGES if len(page_source(p.key)[1] or []) > 1]
    assert set(with_tabs) <= named, sorted(set(with_tabs) - named)


@pytest.mark.parametrize(
    ("doc", "shot", "text"), captions(), ids=lambda x: x if isinstance(x, str) and len(x) < 30 else ""
)
def test_a_caption_names_its_pages_heading_and_tabs(doc, shot, text):
    m = re.match(r"\*\*([^*]+)\*\*", text)
    assert m, f"{doc}: {shot}'s caption starts with no **page name**"
    page = next((p for p in PAGES if p.title == m.group(1)), None)
    assert page is not None, f"{doc}: {shot}'s caption names {m.group(1)!r}, no page of the sidebar"
    heading, tabs = page_source(page.key)
    if heading is not None:
        assert heading.startswith(page.title.split()[0]), (heading, page.title)
    named = re.findall(r"(?<![*\w])\*([^*]+)\*(?!\*)", text)
    if tabs is None or len(tabs) < 2:
        assert named == [], f"{doc}: {shot}'s caption names tabs {named}; the page draws {tabs}"
        return
    assert named == tabs, f"{doc}: {shot}'s caption names the tabs {named}; the page draws {tabs}"
