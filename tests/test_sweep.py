"""Training sweeps (seed 004 Fig. 2–4) on a real checkpoint series: the shipped trainer (a smaller
setting) writes checkpoints in the Trainer layout; discovery reads their steps and reports broken ones;
`normvar sweep` queues one job per checkpoint with sweep/step; the worker publishes runs equal to a
plain compute of each checkpoint; the Training page draws them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from normvar_core.errors import NormvarError
from normvar_core.pipeline.models.training_steps import discover_checkpoints, parse_revisions
from normvar_core.runs.reader import open_run
from normvar_core.service import cli
from normvar_core.service import jobs as J
from normvar_core.service import worker as W

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.subprocess  # the trainer runs in its own process


@pytest.fixture(scope="module")
def series(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("series") / "tiny"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "train_tiny_pythia.py"),
            "--out",
            str(out),
            "--steps",
            "32",
            "--layers",
            "2",
            "--hidden",
            "32",
            "--heads",
            "2",
            "--max-sentences",
            "600",
            "--vocab",
            "400",
            "--batch-size",
            "8",
            "--seq-len",
            "32",
        ],
        check=True,
        cwd=ROOT,
        timeout=300,
    )
    return out


def test_trainer_writes_loadable_checkpoints(series):
    from transformers import AutoModel, AutoTokenizer

    cps, problems = discover_checkpoints(series)
    assert [c.step for c in cps] == [0, 16, 32] and problems == []
    a = AutoModel.from_pretrained(cps[0].path)
    b = AutoModel.from_pretrained(cps[-1].path)
    tok = AutoTokenizer.from_pretrained(cps[-1].path)
    assert type(a).__name__ == "GPTNeoXModel" and tok("A cat.")["input_ids"]
    wa, wb = a.state_dict(), b.state_dict()
    assert any(not np.allclose(wa[k].numpy(), wb[k].numpy()) for k in wa)  # it really trained


def test_discovery_reports_broken_checkpoints(series, tmp_path):
    folder = tmp_path / "mixed"
    shutil.copytree(series, folder)
    (folder / "checkpoint-16" / "model.safetensors").unlink()
    (folder / "checkpoint-32" / "trainer_state.json").write_text('{"global_step": 48}')  # the state file wins
    shutil.rmtree(folder / "checkpoint-0")
    (folder / "checkpoint-0").mkdir()
    cps, problems = discover_checkpoints(folder)
    assert [c.step for c in cps] == [48] and len(problems) == 2 and any("checkpoint-16" in p for p in problems)
    (tmp_path / "empty").mkdir()
    with pytest.raises(NormvarError, match="no usable checkpoint"):
        discover_checkpoints(tmp_path / "empty")
    assert [c.step for c in parse_revisions("EleutherAI/pythia-70m", "step8000,step1000")] == [1000, 8000]


def test_sweep_queues_jobs_and_the_worker_publishes_equal_runs(series, tmp_path, capsys):
    data = tmp_path / "data"
    argv = [
        "sweep",
        "--checkpoints",
        str(series),
        "--max-sentences",
        "60",
        "--id-sample",
        "64",
        "--samples-per-token",
        "5",
        "--data-dir",
        str(data),
    ]
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln.split()[1] for ln in lines] == ["tiny__step0", "tiny__step16", "tiny__step32"]
    assert cli.main(argv) == 2 and cli.main([*argv, "--extend"]) == 0
    store = J.JobStore(data)
    cfgs = {j.name: j.cfg for j in store.list(limit=None)}
    assert cfgs["tiny__step16"].sweep == "tiny" and cfgs["tiny__step16"].step == 16
    W.Worker(data, poll_s=0.05).run(once=True, install_signals=False)
    assert all(j.state == "done" for j in store.list(limit=None))
    got = open_run(data / "runs" / "tiny__step16.duckdb")
    assert got.meta["sweep"] == "tiny" and got.meta["step"] == 16
    from normvar_core.pipeline.execute.local import compute_run

    plain = open_run(compute_run(cfgs["tiny__step16"].replace(name="plain", sweep=None, step=None), tmp_path / "p"))
    for layer in got.layers:
        a, b = got.token_table(layer), plain.token_table(layer)
        assert a["token_id"].tolist() == b["token_id"].tolist()
        np.testing.assert_allclose(a[["q", "m", "v"]].to_numpy(), b[["q", "m", "v"]].to_numpy(), rtol=1e-12)

    import os

    from streamlit.testing.v1 import AppTest

    os.environ["NORMVAR_DATA"] = str(data)
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
        at.run()
        at.switch_page("views/training.py").run()
        assert not at.exception and not at.error
        import json

        figs = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
        titles = [(f["layout"].get("title") or {}).get("text", "") for f in figs]
        assert any("Fig. 2" in t for t in titles) and any("Fig. 3/4" in t for t in titles)
        aniso = next(f for f in figs if "Fig. 3/4" in (f["layout"].get("title") or {}).get("text", ""))
        assert len(aniso["data"]) == 3  # one curve per checkpoint
    finally:
        os.environ.pop("NORMVAR_DATA", None)


def test_new_run_page_queues_a_sweep(series, tmp_path, monkeypatch):
    """The New-run page's sweep mode queues the same jobs as `normvar sweep` (names, steps, options),
    refuses to queue them twice, and with "extend" adds nothing new."""
    from streamlit.testing.v1 import AppTest

    data = tmp_path / "data"
    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.run()
    at.switch_page("views/new_run.py").run()
    at.radio(key="w_mode").set_value("A training sweep: one run per checkpoint").run()
    at.text_input(key="w_sweep_dir").input(str(series))
    at.number_input(key="w_cfg_max_sentences").set_value(60)
    at.button(key="w_submit").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("queued 3 runs" in s.value for s in at.success)
    jobs = {j.name: j.cfg for j in J.JobStore(data).list(limit=None)}
    assert sorted(jobs) == ["tiny__step0", "tiny__step16", "tiny__step32"]
    cfg = jobs["tiny__step16"]
    assert (cfg.sweep, cfg.step, cfg.max_sentences, Path(cfg.model).name) == ("tiny", 16, 60, "checkpoint-16")
    at.button(key="w_submit").click().run()  # the same sweep again: refused
    assert any("already has" in e.value for e in at.error)
    at.checkbox(key="w_sweep_extend").check()
    at.button(key="w_submit").click().run()
    assert any("already has every one" in i.value for i in at.info), (
        [i.value for i in at.info],
        [e.value for e in at.error],
    )
    assert len(J.JobStore(data).list(limit=None)) == 3
