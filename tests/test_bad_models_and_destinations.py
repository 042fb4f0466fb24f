"""Broken models and unwritable destinations: one line naming the fix, exit status 2, nothing
published — and checked before any model is loaded where that is possible."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from test_cli_runs import assert_bad, corpus40  # noqa: F401  (fixture)


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
    line = assert_bad(capsys, tmp_path / "data", "compute", "--model", model, "--corpus", corpus40,
                      match="damaged or incomplete")
    assert "copy or download" in line


def test_model_without_tokenizer_files(capsys, tmp_path, tiny_models, corpus40):
    src = tiny_models["bert"]
    tok_files = [f.name for f in src.iterdir() if "token" in f.name or f.name.startswith("vocab") or
                 f.name == "special_tokens_map.json"]
    model = _copy_model(src, tmp_path / "notok", skip=tok_files)
    assert (model / "config.json").exists() and not (model / "tokenizer.json").exists()
    assert_bad(capsys, tmp_path / "data", "compute", "--model", model, "--corpus", corpus40,
               match="lacks tokenizer files")


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
    assert_bad(capsys, tmp_path / "data", "compute", "--model", tiny_models["bert"], "--corpus", corpus40,
               "--max-length", 100000, match="exceeds the model's limit")
