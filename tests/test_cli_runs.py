"""`normvar compute / show / models` through the CLI: every bad input gives one line on stderr,
exit status 2 and nothing published; the happy path prints the published path and the table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_bad, run_cli, without_log

from normvar_core.pipeline import batches as B
from normvar_core.pipeline.models import resolve as R

ROOT = Path(__file__).resolve().parent.parent


def test_bad_corpus_inputs(capsys, tmp_path, tiny_models):
    data = tmp_path / "data"
    model = ["--model", tiny_models["bert"]]
    assert_bad(capsys, data, "compute", *model, "--corpus", tmp_path / "missing.txt", match="not found")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert_bad(capsys, data, "compute", *model, "--corpus", empty, match="empty")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n")
    assert_bad(capsys, data, "compute", *model, "--corpus", blank, match="")
    long = tmp_path / "long.txt"
    long.write_text("one two three four five six\nseven eight nine ten eleven twelve\n")
    assert_bad(capsys, data, "compute", *model, "--corpus", long, "--max-words", "3", match="")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(bytes(range(256)) * 20)
    assert_bad(capsys, data, "compute", *model, "--corpus", binary, match="")
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("caf\xe9 au lait\nna\xefve sentence here\n".encode("latin-1"))
    assert_bad(capsys, data, "compute", *model, "--corpus", latin, match="utf-8")
    csv = tmp_path / "c.csv"
    csv.write_text("id,text\n1,hello there\n2,general kenobi\n")
    assert_bad(capsys, data, "compute", *model, "--corpus", csv, "--text-column", "body", match="body")


@pytest.mark.model  # --layers checks load the installed MiniLM
def test_bad_model_inputs(capsys, tmp_path, corpus40, monkeypatch):
    data = tmp_path / "data"
    corpus = ["--corpus", corpus40]
    assert_bad(capsys, data, "compute", "--model", "nobody/no-such-model-xyz", *corpus, match="no-such-model")
    assert_bad(capsys, data, "compute", "--model", tmp_path / "nope" / "model", *corpus, match="not found")
    gguf_dir = tmp_path / "g"
    gguf_dir.mkdir()
    (gguf_dir / "m.gguf").write_bytes(b"GGUF" + b"\0" * 64)
    monkeypatch.setattr(R, "has_accelerate", lambda: False)
    assert_bad(capsys, data, "compute", "--model", gguf_dir / "m.gguf", *corpus, match="accelerate")
    assert_bad(capsys, data, "compute", "--model", "minilm", *corpus, "--layers", "0,99", match="layer")
    assert_bad(capsys, data, "compute", "--model", "minilm", *corpus, "--layers", "a,b", match="layers")


def test_oom_on_single_sentence(capsys, tmp_path, tiny_models, corpus40, monkeypatch):
    def oom(*a, **k):
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(B, "extract", oom)
    assert_bad(
        capsys,
        tmp_path / "data",
        "compute",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus40,
        match="out of memory",
    )


def test_compute_show_and_refused_overwrite(capsys, tmp_path, tiny_models, corpus40):
    data = tmp_path / "data"
    args = [
        "compute",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus40,
        "--name",
        "cli-run",
        "--samples-per-token",
        "3",
        "--data-dir",
        data,
        "--quiet",
    ]
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    published = data / "runs" / "cli-run.duckdb"
    assert out.strip() == str(published) and published.exists()

    code, out, err = run_cli(capsys, *args)
    assert code == 2 and "already exists" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in (data / "runs").iterdir()) == ["cli-run.duckdb"]
    code, out, err = run_cli(capsys, *args, "--overwrite")
    assert code == 0 and out.strip() == str(published)

    code, out, err = run_cli(capsys, "show", "cli-run", "--data-dir", data, "--n-min", "1")
    assert code == 0, err
    lines = out.strip().splitlines()
    header = next(x for x in lines if x.strip().startswith("layer"))
    for col in ("n", "Q(X)", "M(X)", "V_W(X)", "V_B(X)", "C.V.(Q)", "slope", "R²"):
        assert col in header
    assert len(lines) - lines.index(header) - 1 == 3  # hidden states 0..2 of the tiny BERT
    code, out2, _ = run_cli(capsys, "show", published, "--n-min", "1")
    assert code == 0 and out2.splitlines()[-3:] == lines[-3:]
    code, out, _ = run_cli(capsys, "show", "--data-dir", data)
    assert code == 0 and "cli-run" in out
    code, _, err = run_cli(capsys, "show", "no-such-run", "--data-dir", data)
    assert code == 2 and "no run named" in err and len(err.strip().splitlines()) == 1


def test_models_lists_aliases(capsys, tmp_path):
    code, out, err = run_cli(capsys, "models", "--data-dir", tmp_path)
    assert code == 0
    rows = {line.split()[0]: line for line in out.strip().splitlines()}
    assert set(rows) >= {"minilm", "mpnet", "smollm2", "gemma3-270m"}
    assert " installed " in rows["minilm"] + " "


@pytest.mark.subprocess
def test_entry_point_subprocess(tmp_path):
    """The real process: exit status 2 and exactly one stderr line for a missing corpus."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "normvar_core.service.cli",
            "compute",
            "--corpus",
            str(tmp_path / "x.txt"),
            "--data-dir",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert res.returncode == 2
    assert len(without_log(res.stderr).strip().splitlines()) == 1 and "corpus file not found" in res.stderr
    assert not (tmp_path / "d" / "runs").exists() or not list((tmp_path / "d" / "runs").iterdir())
