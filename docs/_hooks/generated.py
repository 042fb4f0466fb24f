"""MkDocs hook and script: the manual's lists that the product's registries define, written into the Markdown
itself so the files read right as plain Markdown too. A block

    <!-- generated:NAME -->
    ...
    <!-- /generated:NAME -->

holds what ``BLOCKS[NAME]()`` returns: ``claims`` (the findings' claims, ``stats.findings.CLAIMS``) and ``cli``
(every command and option, from the parsers: ``cli_reference.reference_markdown``). The build refreshes every
block (``on_page_markdown``), and ``python docs/_hooks/generated.py`` rewrites the files, which the docs test asks
to be up to date."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the checkout's normvar_core and docs._hooks, as mkdocstrings' `paths: [.]`
    sys.path.insert(0, str(ROOT))

BLOCK = re.compile(r"(<!-- generated:(\w+) -->\n).*?(<!-- /generated:\2 -->)", re.S)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def claims_markdown() -> str:
    from normvar_core.stats.findings import CLAIMS

    rows = ["| # | id | seed | the claim |", "|---|---|---|---|"]
    rows += [f"| {i} | `{c.id}` | {c.seed} | {_cell(c.wording)} |" for i, c in enumerate(CLAIMS, 1)]
    return "\n".join(rows) + "\n"


def cli_markdown() -> str:
    from docs._hooks.cli_reference import reference_markdown

    return reference_markdown()


BLOCKS = {"claims": claims_markdown, "cli": cli_markdown}


def refresh(markdown: str) -> str:
    """``markdown`` with every generated block's body replaced by what its generator returns now."""
    return BLOCK.sub(lambda m: m.group(1) + BLOCKS[m.group(2)]() + m.group(3), markdown)


def on_page_markdown(markdown, **kwargs):
    return refresh(markdown) if "<!-- generated:" in markdown else markdown


def stale(docs: Path = ROOT / "docs") -> list[str]:
    """The Markdown files whose generated blocks differ from what the registries give now."""
    return [str(p.relative_to(docs)) for p in sorted(docs.glob("*.md")) if refresh(t := p.read_text("utf-8")) != t]


if __name__ == "__main__":
    for p in sorted((ROOT / "docs").glob("*.md")):
        text = p.read_text("utf-8")
        if (new := refresh(text)) != text:
            p.write_text(new, "utf-8")
            print(f"rewrote {p.relative_to(ROOT)}")
