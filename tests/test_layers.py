"""The package's import rules (ARCHITECTURE.md): layers import only downwards, no cycles, and
reading a run never imports torch, transformers or streamlit. The dashboard (``app.py`` and ``views/``)
is the top layer: it may import normvar_core, nothing in normvar_core imports it, and it never imports
torch or transformers (the New-run page plans memory in a child process)."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "normvar_core"
DASHBOARD = (ROOT / "app.py", ROOT / "views")

# rank of each layer: a module may import modules of a lower rank or of its own folder; viz and
# pipeline are side by side and never import each other.
RANK = {"base": 0, "stats": 1, "runs": 2, "pipeline": 3, "viz": 3, "report": 4, "service": 5, "dashboard": 6}
SIDE_BY_SIDE = {("viz", "pipeline"), ("pipeline", "viz")}
# third-party packages a layer must never import, at any level (the run reader and the figures
# must stay light: torch/transformers belong to the pipeline, streamlit to the dashboard)
FORBIDDEN = {
    "base": {"torch", "transformers", "streamlit", "numba", "duckdb"},
    "stats": {"torch", "transformers", "streamlit", "duckdb"},
    "runs": {"torch", "transformers", "streamlit"},
    "viz": {"torch", "transformers", "streamlit"},
    "report": {"torch", "transformers", "streamlit"},
    "pipeline": {"streamlit"},
    "service": {"streamlit"},
    "dashboard": {"torch", "transformers"},
}


def _layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] in ("views", "app"):
        return "dashboard"
    return parts[1] if len(parts) > 2 and parts[1] in RANK else "base"


def _modules() -> dict[str, Path]:
    """Every module of the tree: normvar_core, views and app.py, by dotted name."""
    out = {}
    for p in [*PKG.rglob("*.py"), DASHBOARD[0], *DASHBOARD[1].rglob("*.py")]:
        rel = p.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = p
    return out


def _imports(path: Path, module: str, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    if top_level_only:  # include imports nested in module-level if/try blocks
        nodes = [n for stmt in tree.body for n in ast.walk(stmt)
                 if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    found = set()
    pkg = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for n in nodes:
        if isinstance(n, ast.Import):
            found.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                base = pkg.split(".")
                base = base[: len(base) - (n.level - 1)]
                mod = ".".join(base + ([n.module] if n.module else []))
            else:
                mod = n.module or ""
            found.add(mod)
            for a in n.names:  # "from normvar_core.stats import analyses" imports a module
                found.add(f"{mod}.{a.name}")
    return found


def test_layers_import_only_downwards():
    mods = _modules()
    bad = []
    for name, path in mods.items():
        src = _layer(name)
        for imp in _imports(path, name, top_level_only=False):
            if imp in mods:
                dst = _layer(imp)
                if (src, dst) in SIDE_BY_SIDE or RANK[dst] > RANK[src]:
                    bad.append(f"{name} ({src}) imports {imp} ({dst})")
            top = imp.split(".")[0]
            if top in FORBIDDEN[src]:
                bad.append(f"{name} ({src}) imports {top}")
    assert not bad, "\n".join(sorted(bad))


def _graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules it imports at import time (module level). Between dashboard modules
    function-level imports count too: a page's plumbing importing itself in a function is a cycle
    that a lazy import only hides (views/_chrome and views/_state once did)."""
    graph = {}
    for name, p in mods.items():
        edges = {i for i in _imports(p, name, top_level_only=True) if i in mods and i != name}
        if _layer(name) == "dashboard":
            edges |= {i for i in _imports(p, name, top_level_only=False)
                      if i in mods and i != name and _layer(i) == "dashboard"}
        graph[name] = edges
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if not state.get(n):
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if not state.get(m):
            found = visit(m)
            if found:
                return found
    return None


def test_no_import_cycles():
    """No cycle anywhere in the tree: normvar_core, views and app.py."""
    cycle = _cycle(_graph(_modules()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_dashboard_is_checked_too():
    """The rules see the dashboard: its modules are listed, as the top layer."""
    mods = _modules()
    assert {"app", "views._data", "views._state", "views._chrome", "views.tradeoff"} <= set(mods)
    assert {_layer(m) for m in mods if m == "app" or m.startswith("views")} == {"dashboard"}


def test_the_rules_see_a_violation(tmp_path):
    """The checker itself: an upward import, a forbidden package and a cycle between two dashboard
    modules through a function-level import are caught."""
    p = tmp_path / "x.py"
    p.write_text("import torch\n\ndef f():\n    from normvar_core.service import jobs\n")
    found = _imports(p, "normvar_core.stats.x", top_level_only=False)
    assert "torch" in found and "normvar_core.service.jobs" in found
    assert "normvar_core.service.jobs" not in _imports(p, "normvar_core.stats.x", top_level_only=True)
    assert "torch" in FORBIDDEN[_layer("views.x")]
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "a.py").write_text("from views import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from views.a import g\n")
    mods = {"views": tmp_path / "__init__.py", "views.a": tmp_path / "a.py", "views.b": tmp_path / "b.py"}
    assert _cycle(_graph(mods)) == ["views.a", "views.b", "views.a"]
    # the same shape in normvar_core: a lazy import there is not a cycle at import time
    (tmp_path / "c.py").write_text("from normvar_core.stats import d\n")
    (tmp_path / "d.py").write_text("def f():\n    from normvar_core.stats.c import g\n")
    lib = {"normvar_core.stats.c": tmp_path / "c.py", "normvar_core.stats.d": tmp_path / "d.py"}
    assert _graph(lib)["normvar_core.stats.c"] == {"normvar_core.stats.d"} and _cycle(_graph(lib)) is None


@pytest.mark.subprocess
def test_reading_a_run_imports_no_torch(written_run_path):
    """A fresh interpreter opens a run, reads its stats, a band, the analyses and a figure, and
    ends with neither torch nor transformers nor streamlit loaded."""
    code = f"""
import json, sys
from normvar_core.runs.reader import open_run, list_runs
from normvar_core.stats import analyses
from normvar_core.viz.tradeoff_figures import layers_figure
run = open_run({str(written_run_path)!r})
st = run.stats()
st.corpus(10, 1e5)
analyses.tradeoff(st, 1, 1e9)
layers_figure({{"r": analyses.tradeoff(st, 1, 1e9)}})
run.samples(run.layers[0])
print(json.dumps(sorted(m for m in ("torch", "transformers", "streamlit") if m in sys.modules)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
