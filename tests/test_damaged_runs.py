"""Damaged run files: every table of a run dropped or the file cut short — the reader names the
damage in one line, the listing marks the file damaged instead of healthy, and `normvar show`
reports it (exit 2 for the run itself) while the other runs stay usable."""

from __future__ import annotations

import os
import shutil

import duckdb
import pytest

from normvar_core.errors import NormvarError
from normvar_core.runs.reader import list_runs, open_run
from normvar_core.service import cli

TABLES = ("run", "token_stats", "token_means", "layer_stats", "frequency_hist", "samples", "sentence_lengths")


def _data_dir_with(tmp_path, src, name):
    runs = tmp_path / "data" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, runs / "good.duckdb")
    dst = runs / f"{name}.duckdb"
    shutil.copy(src, dst)
    return tmp_path / "data", dst


def _drop(path, table):
    con = duckdb.connect(str(path))
    con.execute(f'DROP TABLE "{table}"')
    con.execute("CHECKPOINT")
    con.close()


def _cut(path, frac=0.5):
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(int(size * frac))


@pytest.mark.parametrize("damage", [f"drop:{t}" for t in TABLES] + ["cut:0.5", "cut:0.9", "cut:0.01", "garbage"])
def test_damaged_file_is_named_and_listed(damage, tmp_path, capsys, written_run_path):
    data, bad = _data_dir_with(tmp_path, written_run_path, "bad")
    kind, _, arg = damage.partition(":")
    if kind == "drop":
        _drop(bad, arg)
    elif kind == "cut":
        _cut(bad, float(arg))
    else:
        bad.write_bytes(b"this is not a duckdb file\n" * 100)
    with pytest.raises(NormvarError) as ei:
        run = open_run(bad)
        run.stats()
        run.samples(run.layers[0])
    msg = str(ei.value)
    assert "\n" not in msg and ("recompute" in msg or "normvar run file" in msg)

    listing = list_runs(data, include_damaged=True).set_index("name")
    assert listing.loc["good", "status"] == "ok"
    assert listing.loc["bad", "status"] == "damaged" and listing.loc["bad", "problem"]
    assert list(list_runs(data)["name"]) == ["good"]  # never offered as a healthy run

    assert cli.main(["show", "--data-dir", str(data)]) == 0
    out, err = capsys.readouterr()
    assert "damaged" in out and "bad" in err
    assert cli.main(["show", "bad", "--data-dir", str(data)]) == 2
    out, err = capsys.readouterr()
    assert len([x for x in err.splitlines() if x.strip()]) == 1 and err.startswith("normvar: error:")
    assert cli.main(["show", "good", "--data-dir", str(data)]) == 0


@pytest.mark.subprocess
def test_a_writer_removes_temp_files_of_dead_processes(tmp_path, written_run_path):
    """A kill during the write leaves .<name>.tmp-<pid>.duckdb behind: the next write cleans it."""
    import subprocess
    import sys

    from normvar_core.runs.reader import open_run as _open
    from normvar_core.runs.writer import write_tables

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    runs = tmp_path / "runs"
    runs.mkdir()
    stale = [runs / f".x.tmp-{pid}.duckdb", runs / f".x.tmp-{pid}.duckdb.wal"]
    for p in stale:
        p.write_bytes(b"\0" * 1000)
    alive = runs / f".y.tmp-{os.getppid()}.duckdb"  # a live process's temp file stays
    alive.write_bytes(b"\0")
    run = _open(written_run_path)
    write_tables(runs / "new.duckdb", run.record, {"sentence_lengths": run.sentence_length_hist()})
    assert not any(p.exists() for p in stale) and alive.exists()


@pytest.mark.slow
def test_every_page_survives_a_damaged_newest_run(tmp_path, monkeypatch, data_dir):
    """A run file cut short is the newest in the folder: it is never selected, the Runs page names it,
    every page renders with the good run."""
    import time

    from dashboard_run import APP, RUN
    from streamlit.testing.v1 import AppTest

    from normvar_core.viz.pages import PAGES

    runs = tmp_path / "data" / "runs"
    shutil.copytree(data_dir / "runs", runs)
    bad = runs / "zz-newest.duckdb"
    shutil.copy(runs / f"{RUN}.duckdb", bad)
    _cut(bad, 0.6)
    os.utime(bad, (time.time() + 60, time.time() + 60))
    monkeypatch.setenv("NORMVAR_DATA", str(tmp_path / "data"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception and at.selectbox(key="w_run").value == RUN
    assert any("zz-newest" in w.value and "damaged" in w.value for w in at.warning)
    for page in PAGES:
        at.switch_page(f"views/{page.file}").run()
        assert not at.exception, (page.key, [e.value for e in at.exception])
        assert not at.error, (page.key, [e.value for e in at.error])
