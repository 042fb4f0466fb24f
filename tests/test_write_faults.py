"""Fault injection in the run-file writer: the write failing at each of its steps (opening the temp
file, the run row, each table, the final CHECKPOINT, the publishing link) and a real file-size limit
hit part-way (RLIMIT_FSIZE, what a full disk looks like to the writer). Each gives one NormvarError
line naming the fix; nothing is published, no temp file is left, an existing run of that name is
untouched."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

from normvar_core.errors import NormvarError
from normvar_core.runs import writer
from normvar_core.runs.reader import open_run
from normvar_core.runs.writer import write_tables

REPO = Path(__file__).resolve().parent.parent
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _tables_of(path: Path) -> tuple:
    """The run row and every table of a published run, to write them again."""
    run = open_run(path)
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = {t: con.sql(f'SELECT * FROM "{t}"').to_arrow_table() for t in run.table_names if t != "run"}
    finally:
        con.close()
    return run.record, tables


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Conn:
    """A DuckDB connection whose ``execute`` fails on the statement that starts with ``fail_on``."""

    def __init__(self, con, fail_on: str):
        self._con, self._fail_on = con, fail_on

    def execute(self, sql, *a, **kw):
        if sql.lstrip().upper().startswith(self._fail_on):
            raise duckdb.IOException("Could not write file: No space left on device")
        return self._con.execute(sql, *a, **kw)

    def __getattr__(self, name):
        return getattr(self._con, name)


def _steps(n_tables: int) -> list[str]:
    return ["connect", "run-row"] + [f"table:{i}" for i in range(n_tables)] + ["checkpoint", "link", "replace"]


def _inject(monkeypatch, step: str) -> None:
    real_connect, real_append = duckdb.connect, writer._append
    if step == "connect":
        monkeypatch.setattr(writer.duckdb, "connect", lambda *a, **k: (_ for _ in ()).throw(ENOSPC))
    elif step == "run-row":
        monkeypatch.setattr(writer.duckdb, "connect", lambda *a, **k: _Conn(real_connect(*a, **k), "INSERT INTO RUN"))
    elif step == "checkpoint":
        monkeypatch.setattr(writer.duckdb, "connect", lambda *a, **k: _Conn(real_connect(*a, **k), "CHECKPOINT"))
    elif step.startswith("table:"):
        calls = {"n": 0}
        target = int(step.split(":")[1])

        def append(con, name, data, created, *held):
            if calls["n"] == target:
                raise ENOSPC
            calls["n"] += 1
            return real_append(con, name, data, created, *held)

        monkeypatch.setattr(writer, "_append", append)
    elif step in ("link", "replace"):
        monkeypatch.setattr(writer.os, step, lambda *a, **k: (_ for _ in ()).throw(ENOSPC))


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_write_failing_at_each_step_publishes_nothing_and_says_so(
    tmp_path,
    monkeypatch,
    written_run_path,
    overwrite,
):
    record, tables = _tables_of(written_run_path)
    folder = tmp_path / "runs"
    folder.mkdir()
    target = folder / "r.duckdb"
    if overwrite:  # a run already there must survive every failed overwrite bit for bit
        write_tables(target, record, tables)
        before = _digest(target)
    steps = [s for s in _steps(len(tables)) if s != ("link" if overwrite else "replace")]
    for step in steps:
        with monkeypatch.context() as m:
            _inject(m, step)
            with pytest.raises(NormvarError) as err:
                write_tables(target, record, tables, overwrite=overwrite)
        msg = str(err.value)
        assert "\n" not in msg and "nothing was published" in msg and "free space" in msg, (step, msg)
        left = sorted(p.name for p in folder.iterdir())
        assert left == (["r.duckdb"] if overwrite else []), (step, left)
        if overwrite:
            assert _digest(target) == before, step
    # and with nothing injected the same call works: the failures left no state behind
    write_tables(target, record, tables, overwrite=True)
    assert open_run(target).stats().n.sum() == open_run(written_run_path).stats().n.sum()


@pytest.mark.subprocess
def test_a_real_file_size_limit_hit_mid_write_gives_one_line_and_exit_2(tmp_path, written_run_path):
    """``normvar null`` in a child process whose files may not grow past 600 kB (RLIMIT_FSIZE: the
    kernel refuses the write with EFBIG, as a full disk refuses it with ENOSPC)."""
    data = tmp_path / "data"
    (data / "runs").mkdir(parents=True)
    src = data / "runs" / "src.duckdb"
    src.write_bytes(written_run_path.read_bytes())
    # an unrestricted null of the same run, to know the size the restricted one must exceed
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")
    free = subprocess.run(
        [
            sys.executable,
            "-m",
            "normvar_core.service.cli",
            "null",
            "src",
            "--kind",
            "isotropic",
            "--data-dir",
            str(data),
            "--name",
            "free",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert free.returncode == 0, free.stderr
    size = (data / "runs" / "free.duckdb").stat().st_size
    limit = size // 2
    code = textwrap.dedent(f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # EFBIG instead of being killed
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
        from normvar_core.service import cli
        sys.exit(cli.main(["null", "src", "--kind", "isotropic", "--data-dir", {str(data)!r}, "--name", "capped"]))
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    err = p.stderr.strip()
    assert p.returncode == 2, (p.returncode, err[-2000:])
    assert len(err.splitlines()) == 1 and err.startswith("normvar: error: could not write the run file capped"), err
    assert "free space" in err
    assert sorted(q.name for q in (data / "runs").iterdir()) == ["free.duckdb", "src.duckdb"]
