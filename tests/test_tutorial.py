"""The tutorial (docs/tutorial.md), followed end to end as a reader would: every ``normvar`` command of its
steps 2–5 runs, as printed, in a fresh data directory (the dashboard command until it answers on 127.0.0.1),
with the MiniLM of the suite and the shipped novels; and what the page says about the figures holds on the run
it makes, against independent computations from the run file."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser_helpers import free_port
from dashboard_run import ROOT
from dashboard_server import LOCAL, serve_until_ready, stop

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]
TUTORIAL = ROOT / "docs" / "tutorial.md"


def tutorial_commands() -> list[list[str]]:
    """The ``normvar`` lines of the tutorial's bash blocks from step 2 on (step 1 installs), in order."""
    text = TUTORIAL.read_text(encoding="utf-8")
    steps = text[text.index("## 2.") :]
    lines = [
        ln.split("#")[0].strip() for block in re.findall(r"```bash\n(.*?)```", steps, re.S) for ln in block.splitlines()
    ]
    return [shlex.split(ln) for ln in lines if ln.startswith("normvar ")]


def normvar(args: list[str], data: Path, env: dict) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "normvar_core.service.cli", *args, "--data-dir", str(data)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout


def _show_table(out: str) -> dict[int, dict[str, float]]:
    """``normvar show``'s per-layer lines: {layer: {column: value}}."""
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["layer", "n"])
    cols = [c.lower() for c in lines[head].split()]
    rows = {}
    for ln in lines[head + 1 :]:
        cells = ln.split()
        if len(cells) == len(cols) and cells[0].isdigit():
            rows[int(cells[0])] = {c: float(v.replace(",", "")) for c, v in zip(cols, cells)}
    return rows


def test_the_tutorial_runs_and_its_claims_hold(tmp_path, minilm_path):

    from normvar_core.runs.reader import open_run
    from normvar_core.stats.analyses import tradeoff
    from normvar_core.viz.tradeoff_figures import tradeoff_scatter

    commands = tutorial_commands()
    assert [c[1] for c in commands] == ["compute", "show", "dashboard", "findings"], commands
    data = tmp_path / "data"
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    outputs = {}
    for cmd in commands:
        if cmd[1] == "dashboard":  # step 4: it serves until stopped; the page it names opens
            port = str(free_port())
            proc, first = serve_until_ready([*cmd[1:], "--data-dir", str(data), "--port", port], env)
            try:
                with LOCAL.open(f"http://127.0.0.1:{port}/?page=tradeoff&run=first&layer=2", timeout=30) as r:
                    assert r.status == 200
            finally:
                stop(proc)
            continue
        outputs[cmd[1]] = normvar(cmd[1:], data, env)
    run_file = data / "runs" / "first.duckdb"
    assert outputs["compute"].strip().endswith("first.duckdb") and run_file.is_file()

    # step 3: Q = M + V_W + V_B on every line; C.V. smallest in an intermediate layer; a negative slope there
    show = _show_table(outputs["show"])
    run = open_run(run_file)
    assert sorted(show) == list(run.layers)
    for layer, row in show.items():
        assert row["q(x)"] == pytest.approx(row["m(x)"] + row["v_w(x)"] + row["v_b(x)"], rel=2e-3), layer
    st = run.stats()
    band = (st.n >= 10) & (st.n <= 100_000)
    q = st.q[:, band]
    cv = q.std(1) / q.mean(1)  # independent of the CLI and the analyses
    best = int(np.argmin(cv))
    assert 0 < best < len(cv) - 1  # an intermediate layer
    layer = int(st.layer_index[best])
    assert show[layer]["c.v.(q)"] == pytest.approx(cv[best], rel=1e-3)
    m, v = st.m[best, band], st.v[best, band]
    slope, intercept = np.polyfit(m, v, 1)  # numpy's least squares
    assert slope < 0 and show[layer]["slope"] == pytest.approx(slope, rel=1e-3)

    # step 4: the figure at that layer draws the band's types, M across, V up, and a line of that slope
    fit = tradeoff(st).set_index("layer").loc[layer].to_dict()
    frame = pd.DataFrame(dict(m=m, v=v, q=st.q[best, band], n=st.n[band], token=[str(t) for t in st.token_ids[band]]))
    fig = tradeoff_scatter(frame, fit)
    dots = next(t for t in fig.data if t.mode == "markers")
    assert len(dots.x) == int(band.sum()) and np.allclose(dots.x, m) and np.allclose(dots.y, v)
    line = next(t for t in fig.data if t.name == "regression")
    drawn = (line.y[1] - line.y[0]) / (line.x[1] - line.x[0])
    assert drawn == pytest.approx(slope, rel=1e-9) and drawn < 0
    assert "slope = " in fig.layout.annotations[-1].text

    # step 5: identity and cv_min_intermediate hold, at the layer of step 3
    verdicts = {
        line.split()[0]: line.split()[1].rstrip(":")
        for line in outputs["findings"].splitlines()
        if line.strip() and not line.startswith(("claim", "-", "#", " "))
    }
    assert verdicts["identity"] == "holds" and verdicts["cv_min_intermediate"] == "holds", verdicts
    found = json.loads(normvar(["findings", "first", "--json"], data, env))
    cvmin = next(f for f in found if f["id"] == "cv_min_intermediate")
    assert cvmin["layer"] == layer and cvmin["value"] == pytest.approx(cv[best], rel=1e-9)
