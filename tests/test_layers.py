"""The package's import rules (ARCHITECTURE.md): layers import only downwards, no cycles, and
reading a run never imports torch, transformers or streamlit."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "normvar_core"

# rank of each layer: a module may import normvar_core modules of a lower rank or of its own
# folder; viz and pipeline are side by side and never import each other.
RANK = {"base": 0, "stats": 1, "runs": 2, "pipeline": 3, "viz": 3, "report": 4, "service": 5}
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
}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in RANK else "base"


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
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
            if imp.startswith("normvar_core.") and imp in mods:
                dst = _layer(imp)
                if (src, dst) in SIDE_BY_SIDE or RANK[dst] > RANK[src]:
                    bad.append(f"{name} ({src}) imports {imp} ({dst})")
            top = imp.split(".")[0]
            if top in FORBIDDEN[src]:
                bad.append(f"{name} ({src}) imports {top}")
    assert not bad, "\n".join(sorted(bad))


def test_no_import_cycles():
    mods = _modules()
    graph = {name: {i for i in _imports(p, name, top_level_only=True) if i in mods and i != name}
             for name, p in mods.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if not state.get(n):
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if not state.get(m):
            visit(m)


def test_the_rules_see_a_violation(tmp_path):
    """The checker itself: an upward import and a forbidden package are caught."""
    p = tmp_path / "x.py"
    p.write_text("import torch\n\ndef f():\n    from normvar_core.service import jobs\n")
    found = _imports(p, "normvar_core.stats.x", top_level_only=False)
    assert "torch" in found and "normvar_core.service.jobs" in found
    assert "normvar_core.service.jobs" not in _imports(p, "normvar_core.stats.x", top_level_only=True)


@pytest.fixture(scope="module")
def written_run_path(tmp_path_factory) -> Path:
    """A small run written by the real pipeline from a seeded Gaussian source (no model)."""
    import torch

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.execute.partials import build_accumulators, run_range
    from normvar_core.pipeline.plan import synthetic_plan
    from normvar_core.pipeline.publish import publish_run
    from normvar_core.pipeline.sources import GaussianSource

    cfg = RunConfig(model="gaussian", samples_per_token=3)
    plan = synthetic_plan(cfg, n_sentences=80, vocab_size=60, layers=[0, 1], batch_size=16)
    source = GaussianSource(dim=8, layers=[0, 1])
    ctx = RunContext(cfg=cfg, layers=[0, 1], dim=8, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    accs = build_accumulators(ctx)
    run_range(source, plan, accs, 0, plan.n_batches)
    return publish_run(tmp_path_factory.mktemp("layers") / "g.duckdb", plan=plan, source=source, ctx=ctx,
                       accs=accs, seconds=0.0, notes={}, source_kind="synthetic")


def test_reading_a_run_imports_no_torch(written_run_path):
    """A fresh interpreter opens a run, reads its stats, a band, the analyses and a figure, and
    ends with neither torch nor transformers nor streamlit loaded."""
    code = f"""
import json, sys
from normvar_core.runs.runfile import open_run, list_runs
from normvar_core.stats import analyses
from normvar_core.viz import figures
run = open_run({str(written_run_path)!r})
st = run.stats()
st.corpus(10, 1e5)
analyses.tradeoff(st, 1, 1e9)
figures.layers_figure({{"r": analyses.tradeoff(st, 1, 1e9)}})
run.samples(run.layers[0])
print(json.dumps(sorted(m for m in ("torch", "transformers", "streamlit") if m in sys.modules)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
