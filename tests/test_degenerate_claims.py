"""Degenerate runs of the real MiniLM, every measure on: one sentence (5 embeddings of 384 dimensions: fewer than
k = 10 neighbours, fewer embeddings than dimensions, one half empty) and thirty sentences with ``--id-sample 1``
(no TwoNN sample). The findings, the ``findings`` command and the Findings page answer each claim without a
traceback, and no claim that compares a measured value with a threshold holds or fails without an interval:
"untestable" or "cannot tell", with the reason. A run file whose ``layer_linearity`` table lacks a column is
listed as damaged, and ``findings`` says so in one line (exit status 2), not a KeyError."""

from __future__ import annotations

import re

import duckdb
import pytest
from dashboard_run import APP

pytestmark = pytest.mark.model

SENTENCE = "The sea."  # [CLS] the sea . [SEP]: 5 embeddings


@pytest.fixture(scope="module")
def data(tmp_path_factory, minilm_path):
    from conftest import _lines

    from normvar_core.service import cli

    root = tmp_path_factory.mktemp("degenerate_claims")
    (root / "one.txt").write_text(SENTENCE + "\n", encoding="utf-8")
    (root / "thirty.txt").write_text("\n".join(_lines(30)) + "\n", encoding="utf-8")
    for name, corpus, extra in (("one", "one.txt", []), ("ids1", "thirty.txt", ["--id-sample", "1"])):
        code = cli.main(
            ["compute", "--model", str(minilm_path), "--corpus", str(root / corpus), "--name", name, "--quiet"]
            + ["--data-dir", str(root / "data"), *extra]  # the neighbourhoods and the linearity: on by default
        )
        assert code == 0
    return root / "data"


def _findings(data, name):
    from normvar_core.runs.reader import open_run
    from normvar_core.stats.findings import findings

    return {f.id: f for f in findings(open_run(data / "runs" / f"{name}.duckdb"), resamples=100)}


def test_one_sentence_gets_no_verdict_resting_on_rounding(data):
    from normvar_core.stats.findings import CLAIMS

    f = _findings(data, "one")
    # 5 embeddings, k = 10: every point's neighbourhood is every other point (the "holds: 5.55e-17")
    assert f["overlap_profile"].verdict == "untestable" and "1 by construction" in f["overlap_profile"].why
    # 5 embeddings of 384 dimensions: a map fits anything (the "fails: 1")
    lin = f["layers_linear"]
    assert lin.verdict == "cannot tell" and "no more embeddings than dimensions" in lin.why
    assert "5 / 384" in lin.why
    for c in CLAIMS:  # one sentence: one half is empty, so no split-half interval and no verdict on a bare value
        if c.needs_interval:
            assert f[c.id].verdict in ("cannot tell", "untestable"), (c.id, f[c.id])
            assert f[c.id].why


def test_id_sample_one_answers_every_claim(data):
    f = _findings(data, "ids1")
    assert f["id_profile"].verdict == "untestable" and "no TwoNN" in f["id_profile"].why
    assert f["overlap_profile"].verdict == "untestable" and "no TwoNN peak" in f["overlap_profile"].why


@pytest.mark.subprocess
@pytest.mark.parametrize("name", ["one", "ids1"])
def test_the_findings_command_and_page_answer_on_degenerate_runs(data, monkeypatch, name):
    from streamlit.testing.v1 import AppTest

    from normvar_core.service import cli

    assert cli.main(["findings", name, "--data-dir", str(data)]) == 0
    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"run": name})
    at.run()
    at.switch_page("views/findings.py").run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    cells = table.set_index("id")[name]
    assert cells["overlap_profile"].startswith(("untestable", "cannot tell"))
    assert cells["layers_linear"].startswith("cannot tell")


def test_a_linearity_table_missing_a_column_is_listed_as_damaged(data, tmp_path, capsys):
    import shutil

    from normvar_core.runs.reader import list_runs
    from normvar_core.service import cli

    (tmp_path / "runs").mkdir()
    shutil.copy(data / "runs" / "ids1.duckdb", tmp_path / "runs" / "ids1.duckdb")
    with duckdb.connect(str(tmp_path / "runs" / "ids1.duckdb")) as con:
        con.execute("ALTER TABLE layer_linearity DROP COLUMN linearity_b")
    listed = list_runs(tmp_path, include_damaged=True).set_index("name")
    assert listed.loc["ids1", "status"] == "damaged"
    capsys.readouterr()
    assert cli.main(["findings", "ids1", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "layer_linearity lacks column linearity_b" in err and len(err.splitlines()) == 1


def _raw_names(path) -> re.Pattern:
    """The run file's table and column names that no reader would take for words (those with an underscore), as a
    pattern matching one standing alone."""
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall()
    names = sorted({x for row in rows for x in row if "_" in x}, key=len, reverse=True)
    return re.compile(r"(?<![\w./-])(" + "|".join(map(re.escape, names)) + r")(?![\w(])")


def _page_texts(at) -> list[str]:
    out = [
        str(e.value)
        for kind in ("markdown", "caption", "info", "warning", "error", "success", "subheader", "header", "title")
        for e in getattr(at, kind)
    ]
    out += [e.label for e in at.expander] + [t.label for t in at.tabs] + [m.label for m in at.metric]
    return out + [str(c) for d in at.dataframe for c in d.value.columns]


@pytest.mark.subprocess
def test_no_raw_column_or_table_name_on_any_page_or_slide(data, monkeypatch):
    """Every page's text (markdown, captions, messages, tab and expander labels, metric labels, the tables' column
    headers) and every slide's (title, takeaway, notes, text and table cells) of a run with every measure names no
    table or column of its run file."""
    from streamlit.testing.v1 import AppTest

    from normvar_core.report.slides import build_slides
    from normvar_core.runs.reader import open_run
    from normvar_core.viz.pages import PAGES

    path = data / "runs" / "ids1.duckdb"
    raw = _raw_names(path)
    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"run": "ids1"})
    at.run()
    found = []
    for page in PAGES:
        at.switch_page(f"views/{page.file}").run()
        assert not at.exception, (page.key, [e.value for e in at.exception])
        found += [(page.key, m, t[:100]) for t in _page_texts(at) for m in raw.findall(t)]
    for s in build_slides([open_run(path)]):
        texts = [s.title, s.takeaway, s.notes, *s.lines]
        if s.table is not None:
            texts += [str(c) for row in s.table.rows for c in row]
        found += [(s.title, m, t[:100]) for t in texts for m in raw.findall(t)]
    assert not found, found
