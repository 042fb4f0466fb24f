"""No page text from Streamlit's "magic": a bare string (or name) on its own line in a page script is drawn
as page text when magic is on. The shipped config turns magic off, and the page scripts hold no such line
either, checked with Streamlit's own magic transform (so the test flags exactly what it would draw)."""

from __future__ import annotations

import ast
from pathlib import Path

from streamlit.runtime.scriptrunner.magic import add_magic

from normvar_core.service.commands_app import STREAMLIT_CONFIG, config_flags
from normvar_core.viz.pages import PAGES

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = [ROOT / "app.py", *(ROOT / "views" / p.file for p in PAGES)]


def drawn_by_magic(code: str, name: str = "<page>") -> list[str]:
    """The expressions Streamlit's magic would pass to ``st.write`` (defaults: no root docstring, no last
    expression), as source text."""
    tree = add_magic(code, name)
    return [
        ast.unparse(n.args[0] if n.args else n)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "transparent_write"
    ]


def test_the_transform_flags_a_bare_string():
    code = (
        '"""The module docstring is not drawn."""\nimport streamlit as st\nX = 1\n"drawn: after a statement"\n'
        'def f():\n    """not drawn"""\n    "drawn"\n    return 1\nif X:\n    "drawn in an if"\nst.write("a call")\n'
    )
    assert drawn_by_magic(code) == ["'drawn: after a statement'", "'drawn'", "'drawn in an if'"]


def test_page_scripts_hold_no_bare_strings():
    pages = {p.name for p in (ROOT / "views").glob("*.py") if not p.name.startswith("_")}
    assert pages == {p.file for p in PAGES}, "every page script in views/ is in the page registry"
    found = {s.relative_to(ROOT).as_posix(): drawn_by_magic(s.read_text(), str(s)) for s in SCRIPTS}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_served_config_turns_magic_off():
    flags = config_flags(STREAMLIT_CONFIG)
    assert flags[flags.index("--runner.magicEnabled") + 1] == "false"
