"""Module and function sizes: no module over 450 lines and no function over 80 lines (tests excluded), in the
library, the dashboard and the command-line package. The checker is tested on a file that breaks both rules."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80


def _sources() -> list[Path]:
    files = [ROOT / "app.py"]
    for folder in ("normvar_core", "views", "normvar"):
        files += sorted((ROOT / folder).rglob("*.py"))
    return files


def oversized(path: Path) -> list[str]:
    """What in ``path`` breaks a size rule: the module's line count, then each function (methods and nested
    functions included) longer than MAX_FUNCTION_LINES, decorators not counted."""
    text = path.read_text()
    found = []
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if lines > MAX_MODULE_LINES:
        found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: module of {lines} lines")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            if n > MAX_FUNCTION_LINES:
                found.append(f"{path.name}:{node.lineno} {node.name}() is {n} lines")
    return found


def test_no_module_over_450_lines_and_no_function_over_80():
    bad = [msg for p in _sources() for msg in oversized(p)]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_both_violations(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))  # def line + 80 = 81 lines
    src = "def long():\n" + body + "\n" + "\n".join(f"y{i} = {i}" for i in range(MAX_MODULE_LINES)) + "\n"
    p = tmp_path / "big.py"
    p.write_text(src)
    found = oversized(p)
    assert any("long() is 81 lines" in f for f in found) and any("module of" in f for f in found)
    short = tmp_path / "small.py"
    short.write_text("def f():\n    return 1\n")
    assert oversized(short) == []
