"""The manual's lists that a registry defines are written into its Markdown from that registry (the
``docs/_hooks/generated.py`` blocks): the claims of the findings in findings.md and every command and option in
cli.md. The committed files hold what the registries give now — so the manual agrees with the product, and reads
the same as plain Markdown as on the built site."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_the_generated_blocks_are_up_to_date():
    from docs._hooks.generated import stale

    assert stale() == [], "run: python docs/_hooks/generated.py"


def test_the_claims_list_is_every_claim_in_order():
    from normvar_core.stats.findings import CLAIMS

    text = (DOCS / "findings.md").read_text("utf-8")
    block = text.split("<!-- generated:claims -->")[1].split("<!-- /generated:claims -->")[0]
    assert re.findall(r"^\| \d+ \| `(\w+)` \|", block, re.M) == [c.id for c in CLAIMS]
    assert "`overlap_profile`" in block


def test_cli_md_reads_as_plain_markdown():
    """Without the build, cli.md holds a section and a usage line for every command."""
    from docs._hooks.cli_reference import commands

    text = (DOCS / "cli.md").read_text("utf-8")
    for name, _, _ in commands():
        assert re.search(rf"^#+ .*`?normvar {name}`?", text, re.M), name
        assert f"normvar {name}" in text


def test_the_manuals_pages_table_is_the_page_registry_in_order():
    """docs/dashboard.md's table of pages names every page of ``viz.pages.PAGES`` (the dashboard's navigation), by
    its title and in its order, and no other."""
    from normvar_core.viz.pages import PAGES

    text = (Path(__file__).resolve().parent.parent / "docs" / "dashboard.md").read_text(encoding="utf-8")
    table = text[text.index("## Pages") : text.index("## Sections")]
    named = [t for row in re.findall(r"^\| (.+?) \|", table, re.M) for t in re.findall(r"\*\*(.+?)\*\*", row)]
    assert named == [p.title for p in PAGES]
