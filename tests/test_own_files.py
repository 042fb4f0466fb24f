"""normvar opens, locks, checkpoints and deletes only files that are its own. Every link here points at a canary
whose bytes are compared at the end:

- the job table (``queue/jobs.sqlite``) hard-linked to another application's SQLite file, or that file copied
  there: ``normvar jobs`` refuses in one line and the database keeps its tables, its journal mode and its bytes;
- a run's lock file, the worker's lock and a checkpoint hard-linked to a canary: refused in one line ("a hard
  link"), never truncated or written;
- a symbolic link (or another program's file) at a job's checkpoint (``checkpoints/<id>.ckpt``): the worker fails
  the job, leaves the link and the file in place, and its line names no option the worker does not have
  (``--checkpoint``, ``--fresh``)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import run_cli

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError
from normvar_core.pipeline.execute import checkpoint as ckpt
from normvar_core.run_lock import computing, lock_path
from normvar_core.service.jobs import JobStore
from normvar_core.service.worker import Worker

CANARY = b"another application's file: keep me\n"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _other_apps_db(path: Path) -> str:
    conn = sqlite3.connect(path)
    conn.execute("create table notes (id integer primary key, body text)")
    conn.execute("insert into notes (body) values ('mine')")
    conn.commit()
    conn.close()
    return _digest(path)


def _one_error(capsys, *argv) -> str:
    code, out, err = run_cli(capsys, *argv)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("normvar: error: "), (code, out, err)
    return lines[0]


@pytest.mark.parametrize("how", ["hard link", "copy"])
def test_another_applications_database_at_the_job_table_is_refused_and_unchanged(capsys, tmp_path, how):
    other = tmp_path / "other-app.sqlite"
    before = _other_apps_db(other)
    table = tmp_path / "d" / "queue" / "jobs.sqlite"
    table.parent.mkdir(parents=True)
    if how == "hard link":
        os.link(other, table)
    else:
        table.write_bytes(other.read_bytes())
    line = _one_error(capsys, "jobs", "--data-dir", tmp_path / "d")
    assert ("is a hard link" if how == "hard link" else "is another application's database (it holds notes)") in line
    assert "mv " in line
    assert _digest(other) == before and _digest(table) == before
    conn = sqlite3.connect(f"file:{other}?mode=ro", uri=True)
    try:
        names = sorted(r[0] for r in conn.execute("select name from sqlite_master where type = 'table'"))
        mode = conn.execute("pragma journal_mode").fetchone()[0]
    finally:
        conn.close()
    assert names == ["notes"] and mode == "delete"
    assert not Path(str(other) + "-wal").exists() and not Path(str(table) + "-wal").exists()


def test_a_new_or_own_job_table_still_works(tmp_path):
    store = JobStore(tmp_path / "d")  # new
    assert store.list() == []
    empty = tmp_path / "e" / "queue" / "jobs.sqlite"
    empty.parent.mkdir(parents=True)
    empty.write_bytes(b"")  # an empty file: new too
    assert JobStore(tmp_path / "e").list() == [] and JobStore(tmp_path / "d").list() == []  # reopened: its own


def test_hard_linked_locks_and_checkpoints_are_refused_and_their_targets_kept(tmp_path):
    canary = tmp_path / "canary.txt"
    canary.write_bytes(CANARY)
    run = tmp_path / "runs" / "r.duckdb"
    run.parent.mkdir()
    os.link(canary, lock_path(run))
    with pytest.raises(NormvarError, match=r"the lock file .* is a hard link \(one of 2 names of one file\)"):
        with computing(run):
            pass
    d = tmp_path / "d"
    JobStore(d)  # the queue folder and its table
    os.link(canary, d / "queue" / "worker.lock")
    with pytest.raises(NormvarError, match="the worker lock .* is a hard link"):
        Worker(d).run(once=True, install_signals=False)
    point = tmp_path / "ck.ckpt"
    os.link(canary, point)
    with pytest.raises(NormvarError, match="the checkpoint .* is a hard link"):
        ckpt.load(point, {"n_batches": 1})
    assert canary.read_bytes() == CANARY and os.stat(canary).st_nlink == 4  # written by none, removed by none


@pytest.mark.parametrize("planted", ["symlink", "foreign file"])
def test_the_worker_removes_only_what_it_wrote_and_names_only_its_own_options(tmp_path, tiny_models, corpus40, planted):
    canary = tmp_path / "canary.txt"
    canary.write_bytes(CANARY)
    d = tmp_path / "d"
    store = JobStore(d)
    job_id = store.submit(RunConfig(model=str(tiny_models["bert"]), corpus=str(corpus40), name="r", layers=(0, 1)))
    at = store.checkpoint_path(job_id)
    at.parent.mkdir(parents=True, exist_ok=True)
    if planted == "symlink":
        at.symlink_to(canary)
    else:
        at.write_bytes(CANARY)
    Worker(d).run(once=True, install_signals=False)
    job = store.get(job_id)
    assert job.state == "failed", (job.state, job.message)
    assert "--checkpoint" not in job.message and "--fresh" not in job.message, job.message
    assert str(at) in job.message, job.message
    if planted == "symlink":
        assert at.is_symlink() and os.readlink(at) == str(canary), "the link was removed"
        assert "symbolic link" in job.message and f"mv {at}" in job.message
    else:
        assert at.read_bytes() == CANARY, "another program's file was removed"
    assert canary.read_bytes() == CANARY
