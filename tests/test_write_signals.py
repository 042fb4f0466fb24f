"""A signal during the run file's write never reaches DuckDB (which would cancel its query and raise "Query
interrupted" in place of the KeyboardInterrupt, exit 1): each DuckDB call of the writer holds SIGINT and SIGTERM
and hands them over when it returns. In a loop over every step of the writer, a SIGTERM sent inside that step
ends the write with ``Terminated``, no temp file and nothing published; timed signals on a large write do the
same; and a real ``normvar compute`` told SIGTERM inside a DuckDB call of its write exits 143 with one line,
keeps its checkpoint and no temp file, and its rerun only writes."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from normvar_core.errors import Terminated, terminate_as_interrupt
from normvar_core.runs import writer
from normvar_core.runs.reader import open_run
from normvar_core.runs.record import RunRecord


def _tables(rows: int) -> dict:
    rng = np.random.default_rng(0)
    t = pa.table({"x": rng.random(rows), "y": rng.random(rows)})
    return {"a": t, "b": [t.slice(0, rows // 2), t.slice(rows // 2)], "c": lambda: t}


def _steps(tmp_path, monkeypatch) -> list[str]:
    seen, real = [], writer._db
    monkeypatch.setattr(writer, "_db", lambda g, step, call, *a: (seen.append(step), real(g, step, call, *a))[1])
    writer.write_tables(tmp_path / "probe", lambda: RunRecord(model="m"), _tables(100))
    monkeypatch.setattr(writer, "_db", real)
    return seen


def test_sigterm_inside_every_step_of_the_writer_ends_in_terminated_and_leaves_nothing(tmp_path, monkeypatch):
    steps = _steps(tmp_path / "p", monkeypatch)
    assert steps[0] == "connect" and steps[-1] == "publish" and "checkpoint" in steps and len(steps) >= 20
    real = writer._db
    for k, name in enumerate(steps):
        folder = tmp_path / f"step{k}"
        calls = [0]

        def db(guard, step, call, *args, calls=calls, k=k):
            calls[0] += 1
            if calls[0] - 1 != k:
                return real(guard, step, call, *args)

            def signalled(*a):
                os.kill(os.getpid(), signal.SIGTERM)  # arrives inside the held DuckDB call
                time.sleep(0.01)
                return call(*a)

            return real(guard, step, signalled, *args)

        monkeypatch.setattr(writer, "_db", db)
        with pytest.raises(Terminated), terminate_as_interrupt():
            writer.write_tables(folder / "r", lambda: RunRecord(model="m"), _tables(100))
        published = name == "publish"  # a signal in the publish itself lands once the file carries its name
        assert sorted(p.name for p in folder.iterdir()) == (["r.duckdb"] if published else []), (k, name)
    monkeypatch.setattr(writer, "_db", real)


def test_timed_sigterms_during_a_large_write_are_never_query_interrupted(tmp_path):
    tables = _tables(2_000_000)
    outcomes = []
    for i, delay in enumerate((0.02, 0.1, 0.2, 0.35, 0.5)):
        threading.Timer(delay, os.kill, (os.getpid(), signal.SIGTERM)).start()
        try:
            with terminate_as_interrupt():
                writer.write_tables(tmp_path / f"r{i}", lambda: RunRecord(model="m"), tables)
                time.sleep(1.0)  # the write ended before the signal: it lands here
            outcomes.append("no signal")
        except Terminated:
            outcomes.append("terminated")
    assert set(outcomes) == {"terminated"}, outcomes
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


@pytest.mark.subprocess
@pytest.mark.slow
def test_sigterm_inside_a_duckdb_call_of_a_compute_exits_143_keeps_the_checkpoint_and_the_rerun_only_writes(
    tmp_path, uninterrupted_compute
):
    from paused_compute import interrupt_at_pause, paused_compute

    from normvar_core.service import cli

    argv, ref = uninterrupted_compute
    data = tmp_path / "data"
    marker, go, log = tmp_path / "marker", tmp_path / "go", tmp_path / "log"
    p = paused_compute(argv(data), "write-held", marker, log, at=12, go=go)
    # the handler runs in the held call: the signal waits for the call's end, after go
    assert interrupt_at_pause(p, marker, go, log, exit_within_s=60) == 143, log.read_text()
    err = [x for x in log.read_text().splitlines() if x.strip()]
    assert len(err) == 1 and "SIGTERM" in err[0] and "Query interrupted" not in err[0], err
    assert os.listdir(data / "runs") == []  # no temp run file, no WAL, nothing published
    ckpt = tmp_path / "r.ckpt"
    assert ckpt.exists() and not [q for q in tmp_path.iterdir() if ".tmp-" in q.name]
    assert cli.main(argv(data)) == 0
    run = open_run(data / "runs" / "r.duckdb")
    assert run.meta["notes"]["resumed_from_batch"] == 15  # every batch kept: the rerun only wrote
    np.testing.assert_array_equal(run.stats().n, ref.stats().n)
    assert not ckpt.exists()


@pytest.mark.subprocess
def test_sigterm_while_the_command_imports_torch_ends_with_the_usual_line(tmp_path, tiny_models, corpus40):
    from paused_compute import interrupt_at_pause, paused_compute

    marker, log = tmp_path / "marker", tmp_path / "log"
    argv = [
        "compute",
        "--model",
        str(tiny_models["bert"]),
        "--corpus",
        str(corpus40),
        "--quiet",
        "--data-dir",
        str(tmp_path / "data"),
    ]
    p = paused_compute(argv, "import", marker, log)
    assert interrupt_at_pause(p, marker, None, log, exit_within_s=60) == 143  # no go: the SIGTERM ends the pause
    err = [x for x in log.read_text().splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("normvar: terminated (SIGTERM)"), err
