"""Broken models and unwritable destinations: one line naming the fix, exit status 2, nothing
published — and checked before any model is loaded where that is possible."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_helpers import assert_bad


def _copy_model(src: Path, dst: Path, skip=()) -> Path:
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file() and f.name not in skip:
            shutil.copy(f, dst / f.name)
    return dst


def test_truncated_weights(capsys, tmp_path, tiny_models, corpus40):
    model = _copy_model(tiny_models["bert"], tmp_path / "trunc")
    w = model / "model.safetensors"
    w.write_bytes(w.read_bytes()[:5000])
    line = assert_bad(
        capsys, tmp_path / "data", "compute", "--model", model, "--corpus", corpus40, match="damaged or incomplete"
    )
    assert "copy or download" in line


def test_model_without_tokenizer_files(capsys, tmp_path, tiny_models, corpus40):
    src = tiny_models["bert"]
    tok_files = [
        f.name
        for f in src.iterdir()
        if "token" in f.name or f.name.startswith("vocab") or f.name == "special_tokens_map.json"
    ]
    model = _copy_model(src, tmp_path / "notok", skip=tok_files)
    assert (model / "config.json").exists() and not (model / "tokenizer.json").exists()
    assert_bad(
        capsys, tmp_path / "data", "compute", "--model", model, "--corpus", corpus40, match="lacks tokenizer files"
    )


def test_model_without_weights(capsys, tmp_path, tiny_models, corpus40):
    model = _copy_model(tiny_models["bert"], tmp_path / "now", skip=("model.safetensors",))
    assert_bad(capsys, tmp_path / "data", "compute", "--model", model, "--corpus", corpus40, match="lacks weights")


def test_out_is_a_regular_file(capsys, tmp_path, corpus40, monkeypatch):
    """--out pointing at a regular file fails before the model is loaded."""
    from normvar_core.pipeline import models as M

    def boom(*a, **k):
        raise AssertionError("the model must not be loaded")

    monkeypatch.setattr(M, "load_model", boom)
    f = tmp_path / "afile"
    f.write_text("x")
    assert_bad(capsys, tmp_path / "data", "compute", "--corpus", corpus40, "--out", f, match="cannot create")


def test_max_length_above_the_models_limit(capsys, tmp_path, tiny_models, corpus40):
    assert_bad(
        capsys,
        tmp_path / "data",
        "compute",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus40,
        "--max-length",
        100000,
        match="exceeds the model's limit",
    )


def test_a_run_mostly_of_unknown_tokens_is_flagged_in_its_row_and_on_the_pages(
    capsys, tmp_path, tiny_models, monkeypatch
):
    """Text the tokenizer cannot read (emoji for a WordPiece vocabulary) gives a run of [UNK]s: the run
    row records the share (checked against the tokenizer itself) and flags it; every page says so."""
    import json

    import duckdb
    from cli_helpers import run_cli
    from dashboard_run import APP
    from streamlit.testing.v1 import AppTest
    from transformers import AutoTokenizer

    lines = [
        f"the {'🦜🐙🦑🦀'[i % 4] * (1 + i % 3)} and {'🐳🦈'[i % 2]} {i % 7} {'🪼' * (1 + i % 2)}" for i in range(60)
    ]
    corpus = tmp_path / "emoji.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = tmp_path / "data"
    code, out, err = run_cli(
        capsys,
        "compute",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus,
        "--name",
        "unk",
        "--no-geometry",
        "--allow-unknown",
        "--data-dir",
        data,
    )
    assert code == 0, err
    tok = AutoTokenizer.from_pretrained(tiny_models["bert"])
    ids = [i for s in lines for i in tok(s)["input_ids"]]
    share = sum(i == tok.unk_token_id for i in ids) / len(ids)
    assert share > 0.3
    con = duckdb.connect(str(data / "runs" / "unk.duckdb"), read_only=True)
    notes = json.loads(con.execute("SELECT notes FROM run").fetchone()[0])
    con.close()
    assert notes["unk_flag"] is True and notes["unk_share"] == pytest.approx(share, abs=1e-6)

    monkeypatch.setenv("NORMVAR_DATA", str(data))
    for page in ("views/runs.py", "views/tradeoff.py", "views/layers.py"):
        at = AppTest.from_file(APP, default_timeout=90)
        at.query_params.update({"run": "unk"})
        at.run()
        at.switch_page(page).run()
        assert not at.exception, page
        assert any("unknown token" in str(w.value) for w in at.warning), (page, [w.value for w in at.warning])
