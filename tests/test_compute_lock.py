"""A second compute of a run name that is being computed is refused at once, naming what computes it — also
with another ``--out`` or another data directory sharing its checkpoint (the lock covers the output, the name and
the checkpoint): another ``normvar compute`` process (its lock file, ``run_lock``, with its pid), a queued
job, a job a real worker is running. A lock left by a killed process is stale and ignored."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import without_log
from paused_compute import paused_compute

from normvar_core.service import cli

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


def _one_line(capsys, *argv, match: str) -> str:
    t0 = time.monotonic()
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    lines = [x for x in without_log(err).splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and match in lines[0], (code, out, err)
    assert time.monotonic() - t0 < 5  # at once: no model load, no pass
    return lines[0]


def _wait(path: Path, p: subprocess.Popen, log: Path) -> None:
    t0 = time.monotonic()
    while not path.exists():
        assert p.poll() is None, log.read_text()
        assert time.monotonic() - t0 < 240
        time.sleep(0.05)


def test_a_second_compute_of_a_name_being_computed_is_refused_at_once(capsys, tmp_path, tiny_models, corpus40):
    data = tmp_path / "data"
    argv = [
        "compute",
        "--model",
        str(tiny_models["bert"]),
        "--corpus",
        str(corpus40),
        "--name",
        "r",
        "--no-geometry",
        "--quiet",
        "--data-dir",
        str(data),
    ]
    marker, go, log = tmp_path / "marker", tmp_path / "go", tmp_path / "log"
    first = paused_compute(argv, "load", marker, log, go=go)  # holds the name, paused in its model load
    try:
        _wait(marker, first, log)
        line = _one_line(capsys, *argv, match="run 'r' is being computed now by normvar compute")
        assert f"(pid {first.pid})" in line
        _one_line(capsys, *argv, "--overwrite", match=f"(pid {first.pid})")
        # another --out: the same run name and the same checkpoint, which the first compute resumes from
        _one_line(capsys, *argv, "--out", tmp_path / "elsewhere", match=f"(pid {first.pid})")
        _one_line(
            capsys,
            *argv[:-2],
            "--data-dir",
            tmp_path / "other-data",
            "--checkpoint",
            data / "checkpoints" / "r.ckpt",
            match=f"(pid {first.pid})",
        )
        assert not (tmp_path / "elsewhere").exists() or not list((tmp_path / "elsewhere").glob("*.duckdb"))
        _one_line(capsys, "submit", *argv[1:-3], "--data-dir", data, match=f"(pid {first.pid})")
        first.send_signal(signal.SIGKILL)  # a lock left by a dead process: stale
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert (data / "runs" / ".r.duckdb.lock").exists()
    assert cli.main(argv) == 0
    assert sorted(os.listdir(data / "runs")) == ["r.duckdb"]  # published, the stale lock gone


def test_a_compute_of_a_name_a_job_will_publish_is_refused_naming_the_job(capsys, tmp_path, tiny_models, corpus40):
    data = tmp_path / "data"
    opts = ["--model", str(tiny_models["bert"]), "--corpus", str(corpus40), "--name", "j", "--no-geometry"]
    assert cli.main(["submit", *opts, "--data-dir", str(data)]) == 0
    job = capsys.readouterr().out.strip().split()[-1]
    _one_line(capsys, "compute", *opts, "--quiet", "--data-dir", data, match=f"by job {job} (queued)")
    # a real worker runs it, paused in the model load: the compute is refused naming the running job
    marker, go, log = tmp_path / "marker", tmp_path / "go", tmp_path / "log"
    worker = paused_compute(["worker", "--data-dir", str(data)], "load", marker, log, go=go)
    try:
        _wait(marker, worker, log)
        _one_line(capsys, "compute", *opts, "--quiet", "--data-dir", data, match=f"by job {job} (running)")
        lock = (data / "runs" / ".j.duckdb.lock").read_text()
        assert f"job {job} of the worker" in lock and str(worker.pid) in lock
    finally:
        go.write_text("x")
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=120)
