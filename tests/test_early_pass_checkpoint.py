"""A foreground ``normvar compute`` checkpoints by default, and the occurrences' early pass counts as batches done:
a real process given no checkpoint option, sent SIGTERM in the early pass after its first batches, keeps them in
the data directory's ``checkpoints/`` and says so in one line; the same command resumes (the early pass from
its running state) and publishes the uninterrupted run on every table (to float32 rounding across processes,
tests/cross_process.py). ``--no-checkpoint`` keeps nothing and says so. With stderr a pipe, the progress is plain
lines, never a carriage return."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from paused_compute import interrupt_at_pause, paused_compute
from same_run import assert_same_run

from normvar_core.runs.reader import open_run
from normvar_core.service import cli

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


@pytest.fixture(scope="module")
def early_compute(tmp_path_factory, tiny_models):
    """``argv(data)``: a tiny BERT on 120 sentences with the occurrences on (their early pass runs every batch of
    this small corpus before the pass) and no checkpoint option; and the run it publishes uninterrupted."""
    root = tmp_path_factory.mktemp("early")
    corpus = root / "c.txt"
    corpus.write_text("\n".join(f"the cat {i % 9} sat on mat {i % 13} with a dog {i % 5}" for i in range(120)) + "\n")

    def argv(data, *extra: str) -> list[str]:
        return [
            "compute",
            "--model",
            str(tiny_models["bert"]),
            "--corpus",
            str(corpus),
            "--name",
            "r",
            "--batch-size",
            "8",
            "--id-sample",
            "200",
            "--quiet",
            "--data-dir",
            str(data),
            *extra,
        ]

    ref = root / "ref"
    assert cli.main(argv(ref)) == 0
    assert not (ref / "checkpoints" / "r.ckpt").exists()  # removed once the run is published
    return argv, ref / "runs" / "r.duckdb"


def interrupt_in_the_early_pass(argv, tmp_path) -> tuple[int, list[str]]:
    """Run ``argv`` until its third forward pass (two early batches done), SIGTERM it there: (status, stderr lines)."""
    marker, go, log = tmp_path / "marker", tmp_path / "go", tmp_path / "log"
    code = interrupt_at_pause(paused_compute(argv, "forward", marker, log, go=go), marker, go, log)
    return code, [x for x in log.read_text().splitlines() if x.strip()]


def test_sigterm_in_the_early_pass_keeps_its_batches_and_the_rerun_equals_the_uninterrupted_run(
    early_compute, tmp_path
):
    argv, ref = early_compute
    data = tmp_path / "data"
    code, err = interrupt_in_the_early_pass(argv(data), tmp_path)
    ckpt = data / "checkpoints" / "r.ckpt"
    assert code == 143 and len(err) == 1, err
    n_batches = 15  # 120 sentences, 8 a batch
    size = f"{ckpt.stat().st_size / 1e3:.1f} kB"  # a few kB: the tiny model's early pass
    assert err[0] == (
        f"normvar: terminated (SIGTERM); nothing was published; checkpoint kept in {ckpt}: "
        f"2 of {n_batches} batches of the early pass, {size}; the same command resumes from it"
    ), err
    with np.load(ckpt, allow_pickle=False) as z:
        meta = json.loads(str(z["meta_json"]))
        assert meta["early_done"] == 2 and meta["next_batch"] == 0
        assert int(z["occurrences_early__done"][0]) == 2 and z["occurrences_early__scatter"].ndim == 3

    assert cli.main(argv(data)) == 0  # the same command: the early pass goes on from its 2 batches, then the pass
    assert not ckpt.exists()
    a, b = open_run(data / "runs" / "r.duckdb"), open_run(ref)
    assert a.table("occurrence_axes")["early_batches"].tolist() == b.table("occurrence_axes")["early_batches"].tolist()
    assert_same_run(a, b)


def test_no_checkpoint_keeps_nothing_and_says_so(early_compute, tmp_path):
    argv, _ = early_compute
    data = tmp_path / "data"
    code, err = interrupt_in_the_early_pass(argv(data, "--no-checkpoint"), tmp_path)
    assert code == 143 and err == [
        "normvar: terminated (SIGTERM); nothing was published; no checkpoint "
        "(--no-checkpoint): the same command starts over"
    ], err
    assert not (data / "checkpoints").exists() or not os.listdir(data / "checkpoints")


def test_progress_in_a_log_is_plain_lines(early_compute, tmp_path):
    """stderr a pipe: the start line, then "normvar: <phase> · <counts> · ..." lines (each phase at once, then every
    30 s; at every event here through
    NORMVAR_PROGRESS_EVERY_S=0, so the lines do not depend on how fast this machine is), no carriage return."""
    argv, _ = early_compute
    args = [a for a in argv(tmp_path / "data") if a != "--quiet"]
    env = dict(
        os.environ, PYTHONPATH=os.getcwd(), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", NORMVAR_PROGRESS_EVERY_S="0"
    )
    r = subprocess.run(
        [sys.executable, "-m", "normvar_core.service.cli", *args], capture_output=True, env=env, timeout=600
    )
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode()
    lines = [x for x in err.splitlines() if x.startswith("normvar: ")]
    assert "\r" not in err and lines, err
    assert lines[0].startswith("normvar: start · ")  # what was planned, before the model loads
    phases = {x.split()[1] for x in lines[1:]}
    assert phases <= {"plan", "model", "early", "forward", "finalize", "write"}, lines
    assert {"early", "forward", "finalize"} <= phases, lines
    assert any(x.split()[1] == "forward" and " · ETA " in x for x in lines), lines


def test_log_lines_print_each_phase_at_once_then_at_most_one_line_every_every_s():
    """LogLines on its clock: a line as soon as a phase begins; within the phase none before every_s has
    passed since the last, then one; none on "done"."""
    import io

    from normvar_core.pipeline.execute.progress import Progress
    from normvar_core.service.job_progress import LogLines

    t = [100.0]
    out = io.StringIO()
    log = LogLines(out, every_s=30)
    log.clock = lambda: t[0]
    log.last = t[0]
    p = Progress("compute", sentences_done=10, sentences_total=100, eta_s=9.0)
    for dt in (10, 19.9, 0.2, 5, 25, 1):  # t = 110 (the phase begins), 129.9, 130.1, 135.1, 160.1, 161.1
        t[0] += dt
        log(p)
    said = out.getvalue().splitlines()  # at 110 and at 160.1 (30 s after the last)
    assert len(said) == 2 and all(x.startswith("normvar: forward · 10/100 sentences") for x in said)
    t[0] += 1
    log(Progress("finalize", done=0, total=3, unit="measures"))  # a new phase: at once
    assert out.getvalue().splitlines()[-1].startswith("normvar: finalize · 0/3 measures")
    t[0] += 60
    log(Progress("done", done=1, total=1, unit="steps"))
    assert len(out.getvalue().splitlines()) == 3


def test_a_resumed_pass_takes_its_early_axes_from_the_checkpoint(tiny_models, tmp_path):
    """Cancelled in the pass (after the early pass), the run resumes without a second early pass — the axes, m₀ and
    the early counts come from the checkpoint — and equals the uninterrupted run of this process: the counts exactly,
    every float to 1e-12 relative (docs/resume.md: the float64 variances of the occurrences' axes may differ in
    their last bits)."""
    from normvar_core.config import RunConfig
    from normvar_core.errors import CancelledError
    from normvar_core.pipeline.execute.local import compute_run

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"the cat {i % 9} sat on mat {i % 13} with a dog {i % 5}" for i in range(120)) + "\n")
    cfg = RunConfig(model=str(tiny_models["bert"]), corpus=str(corpus), batch_size=8, id_sample=200, name="r")
    ref = open_run(compute_run(cfg, tmp_path / "a"))
    ckpt, stages = tmp_path / "r.ckpt", []
    with pytest.raises(CancelledError):
        compute_run(
            cfg,
            tmp_path / "b",
            checkpoint=ckpt,
            checkpoint_every_s=1e9,
            progress=lambda p: stages.append((p.stage, p.done)),
            should_cancel=lambda: sum(s == "compute" and d > 0 for s, d in stages) >= 3,
        )
    assert ("early", 15) in stages  # the early pass ran every batch of this corpus, then the pass was cancelled
    stages.clear()
    got = open_run(compute_run(cfg, tmp_path / "b", checkpoint=ckpt, progress=lambda p: stages.append((p.stage, 0))))
    assert got.meta["notes"]["resumed_from_batch"] >= 2 and "early" not in {s for s, _ in stages}
    assert_same_run(got, ref, one_process=True)
    x, y = got.table("occurrence_axes").sort_values("layer"), ref.table("occurrence_axes").sort_values("layer")
    for c in ("var_x", "var_y"):  # the tolerance docs/resume.md states
        np.testing.assert_allclose(x[c].to_numpy(), y[c].to_numpy(), rtol=1e-12, atol=0)
    np.testing.assert_array_equal(x["n"].to_numpy(), y["n"].to_numpy())
