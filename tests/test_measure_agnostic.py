"""The memory plan, the device plan, the checkpoint, the executors and publish know no measure by name: they
iterate the registry (``MEASURES``) and the contract (``measures/base.py``). Read from the modules' source
(AST): no import of a registered measure class or of the module that defines one, and no string constant equal
to a registered measure's name (as a measure would be looked up by name)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from normvar_core.pipeline.measures import MEASURES

PIPELINE = Path(__file__).resolve().parent.parent / "normvar_core" / "pipeline"
AGNOSTIC = sorted([*(PIPELINE / "memory").glob("*.py"), *(PIPELINE / "execute").glob("*.py")])

NAMES = {cls.name for cls in MEASURES}
CLASSES = {cls.__name__ for cls in MEASURES}
MODULES = {cls.__module__ for cls in MEASURES}


def named_measures(source: str) -> list[str]:
    """Every place ``source`` names a registered measure: "line: what"."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            out += [
                f"{node.lineno}: from {module} import {a.name}"
                for a in node.names
                if a.name in CLASSES or module in MODULES or f"{module}.{a.name}" in MODULES
            ]
        elif isinstance(node, ast.Import):
            out += [f"{node.lineno}: import {a.name}" for a in node.names if a.name in MODULES]
        elif isinstance(node, ast.Attribute) and node.attr in CLASSES:
            out.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES:
            out.append(f"{node.lineno}: {node.value!r}")
    return out


@pytest.mark.parametrize("path", AGNOSTIC, ids=lambda p: str(p.relative_to(PIPELINE)))
def test_names_no_measure(path):
    assert AGNOSTIC and NAMES and CLASSES  # the registry and the modules are there to check
    assert named_measures(path.read_text()) == [], path


def test_the_check_sees_each_way_of_naming_a_measure():
    """The rule itself, on code that names a registered measure in each of its ways (and code that does not)."""
    cls = MEASURES[-1]
    module, _, leaf = cls.__module__.rpartition(".")
    naming = [
        f"from normvar_core.pipeline.measures import {cls.__name__}",
        f"from {cls.__module__} import something",
        f"from {module} import {leaf}",
        f"import {cls.__module__}",
        f"x = measures.{cls.__name__}",
        f"m = measures[{cls.name!r}]",
    ]
    for line in naming:
        assert len(named_measures(line)) == 1, line
    clean = (
        "from normvar_core.pipeline.measures import MEASURES, Measure\n"
        "m = [c.name for c in MEASURES]\nlabel = 'measures'\n"
    )
    assert named_measures(clean) == []
