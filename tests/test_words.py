"""Words a reader meets: the studies named as studies in the dashboard, the figures and the deck (the seed
numbers only in the manual's references), and ``--no-*`` flags whose help says what they turn off."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

from normvar_core.config import RunConfig

ROOT = Path(__file__).resolve().parent.parent
SHOWN = [
    *sorted((ROOT / "views").glob("*.py")),
    *sorted((ROOT / "normvar_core" / "viz").glob("*.py")),
    ROOT / "normvar_core" / "report" / "slides.py",
    ROOT / "normvar_core" / "stats" / "twonn_context.py",
    ROOT / "normvar_core" / "stats" / "claims_geometry.py",
]


def _shown_strings(path: Path) -> list[str]:
    """The string constants of a module that are values (not docstrings, nor the strings after an assignment that
    document it: statements of a bare string) — what it may put on a page or a figure."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bare = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in bare
    ]


def test_pages_and_figures_name_studies_not_seed_numbers():
    said = {p.name: [s for s in _shown_strings(p) if "seed 00" in s or "(seed " in s] for p in SHOWN}
    assert not {k: v for k, v in said.items() if v}, said


def test_no_flags_say_what_they_turn_off():
    """Every --no-X flag generated from a RunConfig field that is on by default: its help begins "turn off" and
    goes on with the field's own words (one source: the field's metadata)."""
    p = argparse.ArgumentParser()
    RunConfig.add_arguments(p)
    negative = [a for a in p._actions if isinstance(a, argparse._StoreFalseAction)]
    assert {a.option_strings[0] for a in negative} >= {"--no-geometry", "--no-halves"}
    fields = {f.name: f for f in RunConfig.__dataclass_fields__.values()}
    for a in negative:
        assert a.help == f"turn off (on by default): {fields[a.dest].metadata['help']}", a.option_strings
