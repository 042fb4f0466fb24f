"""``DataDir.at``: the one reading of a "path or DataDir" argument, and the callers that take either."""

from __future__ import annotations

from normvar_core.config import RunConfig
from normvar_core.datadir import DataDir
from normvar_core.pipeline.execute.prepare import run_path_for
from normvar_core.runs.reader import list_runs, resolve_run
from normvar_core.service.corpus_store import store_corpus
from normvar_core.service.jobs import JobStore


def test_at_keeps_a_datadir_and_resolves_a_path(tmp_path, monkeypatch):
    dd = DataDir(tmp_path / "d")
    assert DataDir.at(dd) is dd
    monkeypatch.chdir(tmp_path)
    assert DataDir.at("d") == dd  # relative -> absolute
    monkeypatch.setenv("NORMVAR_DATA", str(tmp_path / "env"))
    assert DataDir.at(None).root == tmp_path / "env"


def test_callers_take_a_path_or_a_datadir_alike(tmp_path):
    dd = DataDir(tmp_path / "d")
    as_dd, as_path = store_corpus(dd, b"one sentence.\n", ".txt"), store_corpus(dd.root, b"one sentence.\n", ".txt")
    assert as_dd == as_path and as_dd.parent == dd.corpora
    assert JobStore(dd).db_path == JobStore(str(dd.root)).db_path == dd.queue / "jobs.sqlite"
    dd.run_path("r").write_text("x")
    assert resolve_run("r", dd) == resolve_run("r", dd.root) == dd.run_path("r")
    listed = [list_runs(d, include_damaged=True)["path"].tolist() for d in (dd, dd.root)]  # a damaged file is listed
    assert listed == [[str(dd.run_path("r"))]] * 2
    cfg = RunConfig(model="minilm", name="r")
    assert run_path_for(cfg, dd) == run_path_for(cfg, dd.root) == dd.run_path("r")
