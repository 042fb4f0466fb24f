"""The files normvar keeps for itself (a run's compute lock, the worker lock, the temp file of an atomic write)
are never opened through a symbolic link and never block on a FIFO: a link (to a file, or dangling), a folder
or a FIFO planted under the name is refused in one NormvarError line, and the link's target is untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from normvar_core import run_lock
from normvar_core.destination import write_atomic
from normvar_core.errors import NormvarError
from normvar_core.service.cli import main

KINDS = ("link", "dangling", "folder", "fifo")


def plant(kind: str, at: Path, victim: Path) -> None:
    if kind == "link":
        os.symlink(victim, at)
    elif kind == "dangling":
        os.symlink(victim.with_name("nowhere"), at)
    elif kind == "folder":
        at.mkdir()
    else:
        os.mkfifo(at)


@pytest.fixture
def victim(tmp_path) -> Path:
    v = tmp_path / "elsewhere" / "system-file"
    v.parent.mkdir()
    v.write_text("precious\n")
    return v


def _one_line(exc: NormvarError, *words: str) -> None:
    text = str(exc)
    assert "\n" not in text and all(w in text for w in words), text


@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_compute_lock_is_refused_and_its_target_untouched(kind, tmp_path, victim):
    runs = tmp_path / "runs"
    runs.mkdir()
    lock = run_lock.lock_path(runs / "r.duckdb")
    plant(kind, lock, victim)
    with pytest.raises(NormvarError) as err:
        with run_lock.computing(runs / "r.duckdb"):
            pytest.fail("the lock was taken through a planted " + kind)
    _one_line(err.value, "lock file", "remove it")
    assert victim.read_text() == "precious\n" and not victim.with_name("nowhere").exists()
    assert run_lock.holder_of(runs / "r.duckdb") is None  # not read as a lock either
    run_lock.remove_stale_locks(runs)  # nor removed or followed as a stale one
    assert os.path.lexists(lock) and victim.read_text() == "precious\n"


@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_temp_file_of_an_atomic_write_is_never_written_through(kind, tmp_path, victim):
    target = tmp_path / "out.html"
    tmp = tmp_path / f".out.html.tmp-{os.getpid()}"
    plant(kind, tmp, victim)
    if kind == "folder" or kind == "fifo":
        with pytest.raises(NormvarError) as err:
            write_atomic(target, lambda p: p.write_text("new"))
        _one_line(err.value, "temp file", "remove it")
        assert not target.exists()
    else:  # a link under the temp name is removed, never followed: the write goes to a new file
        write_atomic(target, lambda p: p.write_text("new"))
        assert target.read_text() == "new" and not target.is_symlink()
    assert victim.read_text() == "precious\n" and not victim.with_name("nowhere").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_worker_lock_is_refused_in_one_line(kind, tmp_path, victim, capsys):
    data = tmp_path / "data"
    (data / "queue").mkdir(parents=True)
    from normvar_core.datadir import DataDir
    from normvar_core.service.jobs import JobStore

    plant(kind, JobStore(DataDir.at(data)).lock_path, victim)
    assert main(["worker", "--once", "--data-dir", str(data)]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and "worker lock" in err[0], err
    assert victim.read_text() == "precious\n" and not victim.with_name("nowhere").exists()
