"""The job table keeps its room: outside ``service/job_table.py`` and ``jobs.py`` no
module of ``normvar_core/``, ``views/`` or ``app.py`` reads a private (``_name``) attribute of ``JobStore``
or ``JobTable``, or holds SQL on the ``jobs`` table. The worker, the CLI and the pages use the public
operations (claim_next, heartbeat, write_progress, finish, requeue, ...)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JOB_TABLE_MODULES = {ROOT / "normvar_core" / "service" / f for f in ("job_table.py", "jobs.py")}
SQL_ON_JOBS = re.compile(r"\b(?:from|into|update|join|table(?:\s+if\s+not\s+exists)?)\s+jobs\b", re.IGNORECASE)


def _sources() -> list[Path]:
    files = [*(ROOT / "normvar_core").rglob("*.py"), *(ROOT / "views").rglob("*.py"), ROOT / "app.py"]
    return sorted(p for p in files if p.exists() and p not in JOB_TABLE_MODULES)


def _private_names() -> set[str]:
    """Every ``_name`` that JobStore and its bases define: methods, class attributes, ``self._x = ...``."""
    from normvar_core.service.jobs import JobStore

    names = {n for cls in JobStore.__mro__[:-1] for n in vars(cls)}
    for path in JOB_TABLE_MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _own_names(cls: ast.ClassDef) -> set[str]:
    """What a class defines itself: its methods and attributes, and the ``self._x`` it assigns."""
    own = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for t in targets:
            if isinstance(t, ast.Name):
                own.add(t.id)
            elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                own.add(t.attr)
    return own


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return {
        id(n.body[0].value)
        for n in nodes
        if n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
        and isinstance(n.body[0].value.value, str)
    }


def violations(path: Path, private: set[str]) -> list[str]:
    """``path:line: what`` for each private JobStore attribute read and each SQL string on ``jobs``."""
    tree = ast.parse(path.read_text())
    docs, out = _docstrings(tree), []
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path

    def visit(node: ast.AST, own: set[str]) -> None:
        if isinstance(node, ast.ClassDef):
            own = _own_names(node)
        if isinstance(node, ast.Attribute) and node.attr in private:
            is_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not (is_self and node.attr in own):
                out.append(f"{where}:{node.lineno}: reads JobStore's private {node.attr}")
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docs
            and SQL_ON_JOBS.search(node.value)
        ):
            out.append(f"{where}:{node.lineno}: SQL on jobs: {node.value[:60]!r}")
        for child in ast.iter_child_nodes(node):
            visit(child, own)

    visit(tree, set())
    return out


def test_only_the_job_table_touches_the_job_table():
    private = _private_names()
    assert {"_conn", "_tx", "_job", "_add"} <= private  # the checker sees the privates
    bad = [v for p in _sources() for v in violations(p, private)]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_a_violation(tmp_path):
    """A worker that opens the table's connection, writes SQL on jobs or inserts a job by hand is caught; its
    own private attributes, docstrings and other tables are not."""
    private = _private_names()
    p = tmp_path / "bad.py"
    p.write_text(
        '"""Reads from jobs in its docstring: not code."""\n'
        "class W:\n"
        "    def __init__(self, store):\n"
        "        self.store, self._stop = store, None\n"
        "    def run(self):\n"
        "        self._stop = 1\n"
        "        with self.store._conn() as conn:\n"
        "            conn.execute(\"UPDATE jobs SET state='running'\")\n"
        "            conn.execute('select * from worker')\n"
        "        self.store._add('a', '{}', False, None)\n"
        "    def _tx(self):\n"
        "        return self._tx\n"
    )
    found = violations(p, private)
    assert [f.split(": ", 1)[1] for f in found] == [
        "reads JobStore's private _conn",
        "SQL on jobs: \"UPDATE jobs SET state='running'\"",
        "reads JobStore's private _add",
    ]
