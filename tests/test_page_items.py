"""Small things a newcomer reads on the Runs and Findings pages, under Streamlit's AppTest over a data directory
of its own (a small published run, a finished report job, a failed run job): no literal "None" in the tables,
a finished job says so in green (no theme-red progress bar), the findings' seed column explained, and no
TwoNN note on Compare, whose tabs plot no TwoNN."""

from __future__ import annotations

import shutil

import pytest
from dashboard_run import APP, ok, open_section


@pytest.fixture()
def jobs_dir(tmp_path, written_run_path, monkeypatch):
    from normvar_core.config import RunConfig
    from normvar_core.datadir import DataDir
    from normvar_core.service.job import JobState
    from normvar_core.service.jobs import JobStore

    (tmp_path / "runs").mkdir()
    shutil.copy(written_run_path, tmp_path / "runs" / "small.duckdb")
    store = JobStore(DataDir.at(tmp_path))
    report = store.submit_report(["small"], "html")  # a task job: its config names no model
    store.finish(store.claim_next().id, JobState.DONE, run_path=str(tmp_path / "reports" / f"{report}.html"))
    store.submit(RunConfig(model="minilm", max_sentences=5, name="never"))
    store.finish(store.claim_next().id, JobState.FAILED)  # no message
    monkeypatch.setenv("NORMVAR_DATA", str(tmp_path))
    return tmp_path


def _object_cells(df) -> list:
    return [x for c in df.columns if df[c].dtype == object for x in df[c]]


def test_runs_and_jobs_tables_hold_no_none_and_a_finished_job_is_green(jobs_dir):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=90).run()
    ok(at)
    tables = {
        name: d.value
        for d in at.dataframe
        for name, col in (("runs_table", "|T|"), ("jobs_table", "job"))
        if col in d.value.columns
    }
    assert set(tables) == {"runs_table", "jobs_table"} and len(tables["jobs_table"]) == 2
    for key, df in tables.items():
        assert not [x for x in _object_cells(df) if x is None or str(x) == "None"], key
    assert set(tables["jobs_table"]["state"]) == {"done", "failed"}
    assert any("finished" in s.value for s in at.success)  # the report that just ended: a green line ...
    assert not at.get("progress")  # ... and no progress bar in the theme's red


def test_findings_explain_the_seed_column(jobs_dir):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params["run"] = "small"
    at.run()
    at.switch_page("views/findings.py").run()
    ok(at)
    table = next(d.value for d in at.dataframe if "claim" in d.value.columns)
    assert "ENV" in set(table["seed"])
    assert any("ENV" in c.value and "002" in c.value and "004" in c.value for c in at.caption)


def test_compare_shows_the_twonn_note_only_on_its_tab_that_plots_twonn(tmp_path, written_run_path, monkeypatch):
    """Two runs whose TwoNN samples differ and whose same-sentence shares differ by 30 points: Compare's tabs that
    plot no TwoNN say nothing of it; its Layer geometry tab, which plots both runs' TwoNN, says both."""
    import duckdb

    from normvar_core.stats.layer_geometry import samples_differ

    (tmp_path / "runs").mkdir()
    for name in ("one", "two"):
        shutil.copy(written_run_path, tmp_path / "runs" / f"{name}.duckdb")
    with duckdb.connect(str(tmp_path / "runs" / "two.duckdb")) as con:
        con.execute("update layer_geometry set id_sample = id_sample * 2, same_sentence_nn = same_sentence_nn + 0.3")
    monkeypatch.setenv("NORMVAR_DATA", str(tmp_path))
    from normvar_core.runs.reader import open_run
    from normvar_core.stats.layer_geometry import recorded_sample

    assert samples_differ(
        {
            n: recorded_sample(open_run(tmp_path / "runs" / f"{n}.duckdb").table("layer_geometry"))
            for n in ("one", "two")
        }
    )
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"run": "one", "run2": "two"})
    at.run()
    at.switch_page("views/compare.py").run()
    for tab in ("Fig. 4", "Fig. 5/6", "Trade-off at the matched depth"):
        open_section(at, "compare", tab)
        assert not [w.value for w in at.warning if "TwoNN" in w.value], tab
    open_section(at, "compare", "Layer geometry")
    said = [w.value for w in at.warning if "TwoNN" in w.value]
    assert any("samples differ" in w for w in said) and any("same sentence differ" in w for w in said), said
    assert [f for f in at.get("plotly_chart")], "the tab plots both runs' layer geometry"
