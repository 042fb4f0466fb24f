"""Code hygiene the layer test cannot see: typed objects are read as typed, and no module
reaches into another module's private names.

* ``getattr(cfg, "unit", "token")`` over a RunConfig, RunPlan or RunContext hides a typo and a missing
  field behind a default: the typed field is always there, so read it as ``cfg.unit``.
* ``from normvar_core.x import _name`` or ``x._name`` couples two modules through a name the owner
  marked private: make it public or move it. Private *modules* of one package (``from views import
  _chrome`` inside ``views/``) are that package's own business and allowed.

The scan reads the source with ``ast`` only; it imports no scanned module. The field names come from the
three classes themselves (``dataclasses.fields`` + ``dir``), so a new field is covered without edits here.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = (ROOT / "normvar_core", ROOT / "views", ROOT / "app.py")
OWN_PACKAGES = ("normvar_core", "views", "app")
# the tail of an expression that holds one of the typed objects: cfg, self.cfg, ctx.plan, setup.plan, ...
# app.py is the dashboard's entry point: it belongs to the views package for the private-module rule
PACKAGE_OF = {"app": "views"}
TYPED_HOLDERS = {"cfg", "config", "run_config", "plan", "run_plan", "ctx", "context", "run_context"}


def typed_fields() -> set[str]:
    """Every field and public attribute (properties, methods) of RunConfig, RunPlan and RunContext."""
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.run_plan import RunPlan

    names = set()
    for cls in (RunConfig, RunPlan, RunContext):
        names |= {f.name for f in dataclasses.fields(cls)}
        names |= {n for n in dir(cls) if not n.startswith("_")}
    return names


def modules(roots=SCANNED, base: Path = ROOT) -> dict[str, Path]:
    """Every scanned module by dotted name (packages by their own name, not ``.__init__``)."""
    out = {}
    files = [p for r in roots for p in ([r] if r.is_file() else sorted(r.rglob("*.py")))]
    for p in files:
        name = ".".join(p.relative_to(base).with_suffix("").parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = p
    return out


def _tail(node: ast.AST) -> str | None:
    """``cfg`` for ``cfg``, ``self.cfg`` and ``setup.plan.cfg``; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def getattr_defaults(tree: ast.AST, fields: set[str]) -> list[tuple[int, str]]:
    """(line, text) of each ``getattr(<typed holder>, "<field>", default)``."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"):
            continue
        if len(node.args) != 3 or not isinstance(node.args[1], ast.Constant):
            continue
        field = node.args[1].value
        if _tail(node.args[0]) in TYPED_HOLDERS and field in fields:
            found.append((node.lineno, ast.unparse(node)))
    return found


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    keep = len(parts) - node.level + (1 if is_package else 0)
    base = parts[:keep]
    return ".".join(base + ([node.module] if node.module else []))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_reaches(module: str, path: Path, known: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, text) of each private name this module takes from another of ours:
    ``from ours import _name`` (``_name`` not a submodule of a package the importer belongs to)
    and ``alias._name`` where ``alias`` is a module of ours bound by an import."""
    tree = ast.parse(path.read_text())
    is_package = path.name == "__init__.py"
    found, module_aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in OWN_PACKAGES:
                    module_aliases[a.asname or a.name.split(".")[0]] = a.asname and a.name
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, is_package, node)
            if source.split(".")[0] not in OWN_PACKAGES:
                continue
            for a in node.names:
                sub = f"{source}.{a.name}"
                if sub in known:  # a module: bound by name, its private attributes are checked below
                    module_aliases[a.asname or a.name] = sub
                    home = PACKAGE_OF.get(module, module)
                    own_package = home.startswith(source + ".") or home == source
                    if _private(a.name) and not own_package:
                        found.append((node.lineno, f"from {source} import {a.name}"))
                elif _private(a.name) and source != module:
                    found.append((node.lineno, f"from {source} import {a.name}"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in module_aliases
        ):
            found.append((node.lineno, ast.unparse(node)))
    return found


def _report(hits: dict[str, list[tuple[int, str]]]) -> str:
    return "\n".join(f"{m}:{line}: {text}" for m, rows in sorted(hits.items()) for line, text in rows)


def test_no_getattr_default_over_a_typed_object():
    fields = typed_fields()
    hits = {m: getattr_defaults(ast.parse(p.read_text()), fields) for m, p in modules().items()}
    hits = {m: h for m, h in hits.items() if h}
    assert not hits, "read the typed field directly (it always exists):\n" + _report(hits)


def test_no_private_name_crosses_a_module():
    known = modules()
    hits = {m: private_reaches(m, p, known) for m, p in known.items()}
    hits = {m: h for m, h in hits.items() if h}
    assert not hits, "make the name public, or move it where it is used:\n" + _report(hits)


def test_the_checkers_see_a_violation(tmp_path):
    fields = typed_fields()
    bad = ast.parse(
        "def f(cfg, self, setup, obj):\n"
        "    a = getattr(cfg, 'unit', 'token')\n"
        "    b = getattr(self.cfg, 'dataset', None)\n"
        "    c = getattr(setup.plan, 'batches', [])\n"
        "    d = getattr(obj, 'unit', None)\n"  # not a typed holder: allowed
        "    e = getattr(cfg, 'no_such_field', 1)\n"  # not a field: allowed
        "    return getattr(cfg, 'unit')\n"
    )  # no default: allowed
    assert [line for line, _ in getattr_defaults(bad, fields)] == [2, 3, 4]

    pkg = tmp_path / "normvar_core"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "views").mkdir()
    for f in ("__init__.py", "sub/__init__.py", "sub/_helper.py", "views/__init__.py", "views/_chrome.py"):
        (pkg / f).write_text("")
    (pkg / "sub" / "a.py").write_text("def _hidden():\n    pass\n")
    (pkg / "sub" / "b.py").write_text(
        "from normvar_core.sub.a import _hidden\n"  # 1: private name of another module
        "from normvar_core.sub import a\n"
        "from . import _helper\n"  # own package's private module: allowed
        "import normvar_core.sub.a as A\n"
        "x = a._hidden\n"  # 5: through a module alias
        "y = A._hidden\n"  # 6
        "z = a.__name__\n"
    )  # dunder: allowed
    (pkg / "views" / "page.py").write_text(
        "from normvar_core.views import _chrome\n"  # own package: allowed
        "from normvar_core.sub import _helper\n"  # 2: another package's private module
        "from .._private_thing import x\n"
    )
    known = modules((pkg,), tmp_path)
    b = private_reaches("normvar_core.sub.b", pkg / "sub" / "b.py", known)
    assert [line for line, _ in b] == [1, 5, 6]
    page = private_reaches("normvar_core.views.page", pkg / "views" / "page.py", known)
    assert [line for line, _ in page] == [2]
    assert private_reaches("normvar_core.sub.a", pkg / "sub" / "a.py", known) == []
