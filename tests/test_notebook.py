"""examples/quickstart.ipynb runs top to bottom in a real Jupyter kernel (nbclient + ipykernel on this
environment's own python), and the band decomposition it shows equals a float64 brute force over the
run file it computed (Q(X) = sum p_t Q_t, M = ||sum p_t mu_t||^2, V_W = sum p_t V_t, V_B = sum p_t ||mu_t - mu||^2)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import brute
import duckdb
import numpy as np
import pytest

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"


def _kernelspec(root: Path) -> str:
    """A kernelspec that starts ipykernel with this interpreter (not whatever `python3` is on PATH)."""
    spec = root / "kernels" / "normvar-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "normvar test",
                "language": "python",
            }
        )
    )
    return "normvar-test"


def _brute_band(path: Path, n_min: int, n_max: int) -> dict[int, dict[str, float]]:
    """``brute.band`` per layer over the types with n_min <= n <= n_max, from the run file read with DuckDB."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        ts = con.sql("SELECT layer, token_id, n, q, v FROM token_stats ORDER BY layer, token_id").df()
        tm = con.sql("SELECT layer, token_id, mean FROM token_means ORDER BY layer, token_id").df()
    finally:
        con.close()
    out = {}
    for layer, g in ts.groupby("layer"):
        keep = ((g["n"] >= n_min) & (g["n"] <= n_max)).to_numpy()
        means = np.stack(tm[tm["layer"] == layer]["mean"].to_numpy())[keep]
        out[int(layer)] = brute.band(g["n"].to_numpy()[keep], g["q"].to_numpy()[keep], g["v"].to_numpy()[keep], means)
    return out


@pytest.mark.slow
def test_quickstart_notebook_runs(tmp_path, monkeypatch):
    import nbformat
    from jupyter_client import KernelManager
    from nbclient import NotebookClient

    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("NORMVAR_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    kernel = _kernelspec(tmp_path / "jupyter")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "import json, normvar_core\n"
            "print(json.dumps({'band': band.to_dict('records'), 'traces': len(fig.data), 'path': str(path),\n"
            "                  'package': normvar_core.__file__}))"
        )
    )
    # Unix sockets, not TCP: the kernel talks to no network port at all
    km = KernelManager(kernel_name=kernel, transport="ipc", ip=str(tmp_path / "kernel-ipc"))
    NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": str(tmp_path)}}).execute()

    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    figure_cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("fig = "))
    assert any("application/vnd.plotly.v1+json" in o.get("data", {}) for o in figure_cell.outputs)
    report = json.loads(nb.cells[-1].outputs[0]["text"])
    assert Path(report["path"]).parent == tmp_path / "data" / "runs"
    assert report["traces"] == 4 and len(report["band"]) == 7  # MiniLM: hidden states 0..6
    want = _brute_band(Path(report["path"]), 2, 1000)
    for row in report["band"]:
        ref = want[row["layer"]]
        for k in ("q", "m", "v_w", "v_b"):  # the stored means are float32: relative 1e-5
            assert row[k] == pytest.approx(ref[k], rel=1e-5), (row["layer"], k)
        assert row["q"] == pytest.approx(row["m"] + row["v_w"] + row["v_b"], rel=1e-6)


def test_public_names_are_documented_in_the_manual():
    import normvar_core

    text = (ROOT / "docs" / "api" / "index.md").read_text()
    section = text.split("## The public names", 1)[1].split("\n## ", 1)[0]
    missing = [n for n in normvar_core.__all__ if f"nv.{n}" not in section]
    assert not missing, f"document these public names in docs/api/index.md, 'The public names': {missing}"
    for name in normvar_core.__all__:  # and each resolves
        assert getattr(normvar_core, name) is not None
