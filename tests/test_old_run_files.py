"""Run files that lack a column today's normvar writes (an older normvar's, or another program's), on copies of the
dashboard tests' real MiniLM run with the column dropped in DuckDB: a figure whose column is missing says "not
measured" and the rest of the page stands; a file that lacks a column every page needs (``token_stats.v``) is
listed as damaged, naming the column, and no page opens it (no traceback anywhere)."""

from __future__ import annotations

import shutil

import duckdb
import pytest
from dashboard_run import APP, RUN, RUN2, figure, open_page
from streamlit.testing.v1 import AppTest

from normvar_core.errors import NormvarError
from normvar_core.runs.reader import list_runs, open_run
from normvar_core.service import cli


def _without(tmp_path, data_dir, table: str, column: str):
    """A copy of the dashboard data whose RUN file lacks ``table.column``."""
    d = tmp_path / "data"
    shutil.copytree(data_dir, d)
    con = duckdb.connect(str(d / "runs" / f"{RUN}.duckdb"))
    con.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
    con.execute("CHECKPOINT")
    con.close()
    return d


def _app(monkeypatch, d) -> AppTest:
    monkeypatch.setenv("NORMVAR_DATA", str(d))
    return AppTest.from_file(APP, default_timeout=120)


def test_geometry_without_the_cross_context_estimate(tmp_path, data_dir, monkeypatch):
    d = _without(tmp_path, data_dir, "layer_geometry", "twonn_id_cross")
    at = open_page(_app(monkeypatch, d), "geometry")  # no exception, no error box
    fig = figure(at, "Layer geometry")
    names = [t.get("name") for t in fig["data"]]
    assert RUN in names and f"{RUN} (TwoNN, cross-context)" not in names  # seed 004's TwoNN drawn, the other not
    said = " ".join(w.value for w in at.warning)
    assert "cross-context estimate" in said and "not measured" in said


@pytest.mark.parametrize("page", ["runs", "tradeoff", "layers", "findings", "token"])
def test_a_file_without_token_stats_v_is_listed_damaged_and_no_page_fails(tmp_path, data_dir, monkeypatch, page):
    d = _without(tmp_path, data_dir, "token_stats", "v")
    listing = list_runs(d, include_damaged=True).set_index("name")
    assert listing.loc[RUN, "status"] == "damaged" and "token_stats lacks column v" in listing.loc[RUN, "problem"]
    assert listing.loc[RUN2, "status"] == "ok"
    with pytest.raises(NormvarError, match="token_stats lacks column v"):
        open_run(d / "runs" / f"{RUN}.duckdb")
    at = open_page(_app(monkeypatch, d), page, **({"token": "the"} if page == "token" else {}))
    if page == "runs":
        assert any(RUN in w.value and "damaged" in w.value for w in at.warning)


def test_show_names_the_missing_column_in_one_line(tmp_path, data_dir, capsys):
    d = _without(tmp_path, data_dir, "token_stats", "v")
    assert cli.main(["show", RUN, "--data-dir", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "token_stats lacks column v" in err[0]
