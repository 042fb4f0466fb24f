"""The package's import rules (ARCHITECTURE.md): layers import only downwards, and so do the ranks inside
pipeline/; no cycles, function-level imports and package ``__init__`` files counted; and reading a run never
imports torch, transformers or streamlit. The dashboard (``app.py`` and ``views/``)
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
# ranks inside pipeline/ (it holds half the library) are its folders: a module of pipeline/ imports only modules
# of its own rank or lower. The folder under pipeline/ gives the rank; every folder must be listed, and the modules
# directly in pipeline/ are the core.
PIPE = "normvar_core.pipeline"
PIPELINE_RANK = {
    # core: what a run is and where its hidden states come from (the plan, its batches and encoding, the corpus,
    # the models — loading over several devices included —, the state sources, the model's shape)
    "": 0,
    "corpus": 0,
    "models": 0,
    # the streamed measures (one class each) and their registered state
    "measures": 1,
    # the memory plan: the bytes of a run, per device too
    "memory": 2,
    # running a plan, locally or on Ray, its checkpoints, and publishing the run file
    "execute": 3,
}
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


def _own_pipeline_rank(module: str) -> int | None:
    """The rank of the folder a module of pipeline/ sits in ("" for the modules directly in it); None when its
    folder is not listed."""
    parts = module[len(PIPE) + 1 :].split(".")
    if parts[0] in PIPELINE_RANK:  # a listed folder, its package __init__ included
        return PIPELINE_RANK[parts[0]]
    return PIPELINE_RANK[""] if len(parts) == 1 else None


def _pipeline_rank(module: str, mods) -> int | None:
    """The rank of a module of pipeline/ (None: not ranked). A package's ``__init__`` runs before any module
    under it is imported, so a package takes the lowest rank under it (pipeline/ itself: core)."""
    under = [m for m in mods if m.startswith(PIPE + ".") and (m == module or m.startswith(module + "."))]
    ranks = [_own_pipeline_rank(m) for m in under]
    return None if not ranks or None in ranks else min(ranks)


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
        nodes = [
            n
            for stmt in tree.body
            for n in ast.walk(stmt)
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        ]
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


def _edges(name: str, path: Path, mods) -> set[str]:
    """The modules of the tree that ``name`` imports, at any level (a function-level import runs too, only
    later), and the packages above each: importing ``a.b.c`` runs ``a/b/__init__`` first, except the
    packages ``name`` itself sits in, whose ``__init__`` ran before it (``from a.b import c`` of a module
    ``c`` inside ``a.b`` reads no name of ``a/b/__init__``)."""
    out = set()
    found = _imports(path, name, top_level_only=False)
    for imp in found:
        if imp not in mods or (name.startswith(imp + ".") and any(f.startswith(imp + ".") for f in found & set(mods))):
            continue
        out.add(imp)
        parts = imp.split(".")
        out.update(
            pkg
            for pkg in (".".join(parts[:i]) for i in range(1, len(parts)))
            if pkg in mods and not name.startswith(pkg + ".")
        )
    out.discard(name)
    return out


def _upward(mods: dict[str, Path]) -> list[str]:
    """Every import against the ranks: between layers, inside pipeline/, and of forbidden packages."""
    bad = []
    for name, path in mods.items():
        src = _layer(name)
        for imp in _edges(name, path, mods):
            dst = _layer(imp)
            if (src, dst) in SIDE_BY_SIDE or RANK[dst] > RANK[src]:
                bad.append(f"{name} ({src}) imports {imp} ({dst})")
            elif name.startswith(PIPE + ".") and imp.startswith(PIPE + "."):
                a, b = _pipeline_rank(name, mods), _pipeline_rank(imp, mods)
                if a is not None and b is not None and b > a:
                    bad.append(f"{name} (pipeline rank {a}) imports {imp} (pipeline rank {b})")
        bad.extend(
            f"{name} ({src}) imports {top}"
            for top in sorted({i.split(".")[0] for i in _imports(path, name, top_level_only=False)} & FORBIDDEN[src])
        )
    return sorted(bad)


def test_layers_import_only_downwards():
    bad = _upward(_modules())
    assert not bad, "\n".join(bad)


def test_every_pipeline_module_has_a_rank():
    mods = _modules()
    unranked = sorted(m for m in mods if m.startswith(PIPE + ".") and _own_pipeline_rank(m) is None)
    assert not unranked, "add their folder to PIPELINE_RANK: " + ", ".join(unranked)


def _graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules it imports (``_edges``). Function-level imports count everywhere: a lazy
    import that closes a circle only hides it until the function runs."""
    return {name: _edges(name, p, mods) for name, p in mods.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
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


def _snippets(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    """A fake tree: {dotted module name: its source}, a package given as its own name."""
    mods = {}
    for i, (name, text) in enumerate(files.items()):
        p = tmp_path / f"m{i}" / ("__init__.py" if any(m.startswith(name + ".") for m in files) else "x.py")
        p.parent.mkdir(parents=True)
        p.write_text(text)
        mods[name] = p
    return mods


def test_the_rules_see_a_violation(tmp_path):
    """The checker itself, on bad snippets: an upward import, a forbidden package, a cycle through a
    function-level import (dashboard and library alike), a cycle through a package ``__init__``, and an
    upward import inside pipeline/, lazy or through a package's ``__init__``."""
    p = tmp_path / "x.py"
    p.write_text("import torch\n\ndef f():\n    from normvar_core.service import jobs\n")
    found = _imports(p, "normvar_core.stats.x", top_level_only=False)
    assert "torch" in found and "normvar_core.service.jobs" in found
    assert "normvar_core.service.jobs" not in _imports(p, "normvar_core.stats.x", top_level_only=True)
    assert "torch" in FORBIDDEN[_layer("views.x")]
    lazy = "def f():\n    from {} import g\n"
    dash = _snippets(
        tmp_path / "dash", {"views": "", "views.a": "from views import b\n", "views.b": lazy.format("views.a")}
    )
    assert _cycle(_graph(dash)) == ["views.a", "views.b", "views.a"]
    # the same shape in normvar_core: a lazy import there closes a cycle too
    lib = _snippets(
        tmp_path / "lib",
        {
            "normvar_core.stats.c": "from normvar_core.stats import d\n",
            "normvar_core.stats.d": lazy.format("normvar_core.stats.c"),
        },
    )
    assert _cycle(_graph(lib)) == ["normvar_core.stats.c", "normvar_core.stats.d", "normvar_core.stats.c"]
    # a cycle through a package __init__: e imports p.q, which runs p/__init__, which imports e
    init = _snippets(
        tmp_path / "init",
        {
            "normvar_core.stats.e": "from normvar_core.stats.p.q import g\n",
            "normvar_core.stats.p": "from normvar_core.stats.e import h\n",
            "normvar_core.stats.p.q": "",
            "normvar_core.stats.p.r": "from normvar_core.stats.p import q\n",
        },
    )
    assert _cycle(_graph(init)) == ["normvar_core.stats.e", "normvar_core.stats.p", "normvar_core.stats.e"]
    # ... but a package's own modules importing each other do not run its __init__ again
    del init["normvar_core.stats.e"]
    init["normvar_core.stats.p"].write_text("from normvar_core.stats.p.r import q\n")
    assert _cycle(_graph(init)) is None
    # inside pipeline/: core -> measures (lazy), measures -> execute, and a core package whose __init__ (which
    # takes the lowest rank under it) imports the memory plan
    pipe = _snippets(
        tmp_path / "pipe",
        {
            f"{PIPE}.run_plan": lazy.format(f"{PIPE}.measures.moments"),
            f"{PIPE}.measures.moments": f"from {PIPE}.execute import local\n",
            f"{PIPE}.measures.base": f"from {PIPE}.run_plan import RunPlan\n",
            f"{PIPE}.execute.local": f"from {PIPE}.memory.plan import plan_memory\n",
            f"{PIPE}.memory.plan": f"from {PIPE}.models.device_map import load\n",
            f"{PIPE}.models": f"from {PIPE}.memory import per_device\n",
            f"{PIPE}.models.device_map": "",
            f"{PIPE}.memory.per_device": f"from {PIPE}.memory import plan\n",
        },
    )
    assert _pipeline_rank(f"{PIPE}.models", pipe) == 0 and _pipeline_rank(f"{PIPE}.measures.base", pipe) == 1
    assert _upward(pipe) == [
        f"{PIPE}.measures.moments (pipeline rank 1) imports {PIPE}.execute.local (pipeline rank 3)",
        f"{PIPE}.models (pipeline rank 0) imports {PIPE}.memory.per_device (pipeline rank 2)",
        f"{PIPE}.run_plan (pipeline rank 0) imports {PIPE}.measures.moments (pipeline rank 1)",
    ]
    # a module in a folder that is not listed has no rank; a module takes its folder's rank
    assert _own_pipeline_rank(f"{PIPE}.elsewhere.x") is None and _own_pipeline_rank(f"{PIPE}.run_plan") == 0
    assert _own_pipeline_rank(f"{PIPE}.measures.geometry") == 1


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
