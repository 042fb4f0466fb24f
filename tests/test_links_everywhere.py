"""No file normvar writes, replaces or deletes is reached through a symbolic link, and nothing normvar lists is
opened when it is not a regular file: a link at the default checkpoint path (a foreground compute's and a worker
job's), a link or FIFO at the job table, a FIFO or a link named like a run in runs/. Every link points at a canary
file whose content is checked unchanged at the end; each refusal is one line."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from normvar_core.service import cli

CANARY = "canary: must never change\n"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def canary(tmp_path) -> Path:
    c = tmp_path / "elsewhere" / "canary.txt"
    c.parent.mkdir()
    c.write_text(CANARY)
    return c


def _normvar(*argv, timeout: float = 60) -> subprocess.CompletedProcess:
    """``normvar ARGV`` in a child process (a FIFO opened by mistake would block it: the timeout says so)."""
    code = f"import sys\nfrom normvar_core.service import cli\nsys.exit(cli.main({[str(a) for a in argv]!r}))\n"
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)


def _lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.strip()]


def test_a_link_at_the_default_checkpoint_is_refused_and_its_target_kept(
    tmp_path, canary, capsys, tiny_models, corpus40
):
    data = tmp_path / "data"
    link = data / "checkpoints" / "small.ckpt"
    link.parent.mkdir(parents=True)
    link.symlink_to(canary)
    argv = [
        "compute",
        "--model",
        str(tiny_models["bert"]),
        "--corpus",
        str(corpus40),
        "--name",
        "small",
        "--quiet",
        "--data-dir",
        str(data),
    ]
    assert cli.main(argv) == 2
    err = _lines(capsys.readouterr().err)
    assert len(err) == 1 and "symbolic link" in err[0] and "--checkpoint" in err[0], err
    assert link.is_symlink() and canary.read_text() == CANARY
    assert not (data / "runs").exists() or not list((data / "runs").glob("*.duckdb"))


def test_a_link_at_a_jobs_checkpoint_fails_the_job_in_one_line_and_keeps_its_target(
    tmp_path, canary, tiny_models, corpus40
):
    from normvar_core.config import RunConfig
    from normvar_core.datadir import DataDir
    from normvar_core.service.jobs import JobStore
    from normvar_core.service.worker import Worker

    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    job = store.submit(
        RunConfig(model=str(tiny_models["bert"]), corpus=str(corpus40), name="j", id_sample=0, samples_per_token=0)
    )
    dd.checkpoints.mkdir(parents=True, exist_ok=True)
    (dd.checkpoints / f"{job}.ckpt").symlink_to(canary)  # the job's id is public (normvar jobs)
    assert Worker(dd, poll_s=0.05).run(once=True, install_signals=False) == 1
    got = store.get(job)
    assert got.state == "failed" and "symbolic link" in got.message and "\n" not in got.message, got.message
    assert canary.read_text() == CANARY and not list(dd.runs.glob("*.duckdb"))


@pytest.mark.parametrize("kind", ["empty file", "another application's database"])
def test_the_job_table_as_a_link_is_refused_by_every_command(kind, tmp_path, canary, capsys):
    if kind != "empty file":
        canary.unlink()
        con = sqlite3.connect(canary)
        con.execute("create table notes (t text)")
        con.execute("insert into notes values ('keep me')")
        con.commit()
        con.close()
    else:
        canary.write_bytes(b"")
    before = canary.read_bytes()
    data = tmp_path / "data"
    (data / "queue").mkdir(parents=True)
    (data / "queue" / "jobs.sqlite").symlink_to(canary)
    for argv in (["jobs"], ["submit", "--model", "gaussian", "--name", "g"]):
        assert cli.main([*argv, "--data-dir", str(data)]) == 2
        err = _lines(capsys.readouterr().err)
        assert len(err) == 1 and "job table" in err[0] and "symbolic link" in err[0], err
    assert canary.read_bytes() == before and (data / "queue" / "jobs.sqlite").is_symlink()
    assert sorted(os.listdir(data / "queue")) == ["jobs.sqlite"]


@pytest.mark.subprocess
def test_the_job_table_as_a_fifo_is_refused_at_once(tmp_path):
    data = tmp_path / "data"
    (data / "queue").mkdir(parents=True)
    os.mkfifo(data / "queue" / "jobs.sqlite")
    done = _normvar("jobs", "--data-dir", data)
    err = _lines(done.stderr)
    assert done.returncode == 2 and len(err) == 1 and "FIFO" in err[0], done.stderr


@pytest.mark.subprocess
def test_a_fifo_or_a_link_named_like_a_run_never_blocks_or_is_followed_by_the_listing(tmp_path, canary):
    """``normvar show`` (the listing) and ``reader.list_runs`` (the Runs page's) list them as not runs, at once."""
    data = tmp_path / "data"
    runs = data / "runs"
    runs.mkdir(parents=True)
    os.mkfifo(runs / "x.duckdb")
    (runs / "y.duckdb").symlink_to(canary)
    done = _normvar("show", "--data-dir", data)
    assert done.returncode == 0, done.stderr
    err = _lines(done.stderr)
    assert (
        len(err) == 2
        and any("x.duckdb is a FIFO" in e for e in err)
        and any("y.duckdb is a symbolic link" in e for e in err)
    ), err
    code = (
        f"from normvar_core.runs.reader import list_runs\n"
        f"df = list_runs({str(data)!r}, include_damaged=True)\n"
        f"print(sorted(zip(df['name'], df['status'])))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    page = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert page.stdout.strip() == "[('x', 'damaged'), ('y', 'damaged')]", page.stderr
    shown = _normvar("show", "x", "--data-dir", data)
    assert shown.returncode == 2 and "FIFO" in shown.stderr and len(_lines(shown.stderr)) == 1, shown.stderr
    assert canary.read_text() == CANARY and (runs / "y.duckdb").is_symlink()
