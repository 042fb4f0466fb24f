"""A damaged job database (``queue/jobs.sqlite``, the one file of the queue): every command says so on one
line naming the fix and exits 2; the file is left where it is; the dashboard's Runs page keeps showing the
published runs. ``submit`` runs the same destination check as ``run`` before it queues anything, and an
older version's second queue file is never read."""

from __future__ import annotations

import os
import sqlite3

import pytest

from normvar_core.service import cli
from normvar_core.service.jobs import JobStore


def _garbage(path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(6000))


def _truncated(path) -> None:
    JobStore(path.parent.parent)  # a real database with its schema, then cut to a third
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _one_line_error(capsys, argv, data) -> str:
    assert cli.main([*argv, "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("normvar: error:") and "Traceback" not in err
    return err


@pytest.mark.parametrize("damage", [_garbage, _truncated])
def test_damaged_job_database_is_one_line_and_exit_2(tmp_path, capsys, damage):
    data = tmp_path / "data"
    damage(data / "queue" / "jobs.sqlite")
    for argv in (
        ["jobs"],
        ["cancel", "abc"],
        ["worker", "--once"],
        ["submit", "--model", "minilm", "--max-sentences", "10"],
    ):
        before = (data / "queue" / "jobs.sqlite").read_bytes()
        err = _one_line_error(capsys, argv, data)
        assert "job database" in err and "is damaged" in err and "mv " in err
        assert (data / "queue" / "jobs.sqlite").read_bytes() == before  # nothing deleted or rewritten


def test_an_older_versions_damaged_queue_file_is_not_read(tmp_path, capsys):
    """Older versions kept a second queue file (``queue/huey.sqlite``); damaged, it stops nothing now."""
    data = tmp_path / "data"
    JobStore(data)
    _garbage(data / "queue" / "huey.sqlite")
    before = (data / "queue" / "huey.sqlite").read_bytes()
    assert cli.main(["submit", "--model", "minilm", "--max-sentences", "10", "--data-dir", str(data)]) == 0
    job_id = capsys.readouterr().out.strip()
    assert cli.main(["jobs", "--data-dir", str(data)]) == 0 and job_id in capsys.readouterr().out
    rows = sqlite3.connect(data / "queue" / "jobs.sqlite").execute("select id, state from jobs").fetchall()
    assert rows == [(job_id, "queued")]
    assert (data / "queue" / "huey.sqlite").read_bytes() == before  # left alone, not rewritten


def test_submit_checks_the_destination_before_queueing(tmp_path, capsys):
    data = tmp_path / "data"
    JobStore(data)
    (data / "runs").rmdir() if (data / "runs").is_dir() else None
    (data / "runs").write_text("not a folder")
    err = _one_line_error(capsys, ["submit", "--model", "minilm", "--max-sentences", "10"], data)
    assert "runs" in err and "data directory" in err
    rows = sqlite3.connect(data / "queue" / "jobs.sqlite").execute("select count(*) from jobs").fetchone()[0]
    assert rows == 0


def test_runs_page_survives_a_damaged_job_database(tmp_path, monkeypatch, data_dir):
    import shutil

    from dashboard_run import APP, RUN
    from streamlit.testing.v1 import AppTest

    data = tmp_path / "data"
    shutil.copytree(data_dir / "runs", data / "runs")
    _garbage(data / "queue" / "jobs.sqlite")
    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"run": RUN})
    at.run()
    at.switch_page("views/runs.py").run()
    assert not at.exception
    shown = " ".join(str(e.value) for e in at.error)
    assert "job database" in shown and "damaged" in shown
    assert any(RUN in str(df.value.to_dict()) for df in at.dataframe)  # the runs are still listed
