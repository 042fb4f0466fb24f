"""The words of refusals say what is there: a byte count is called bytes, a FIFO or a folder is not "a link", a
symbolic link under a run's name is a link (not a run that "already exists"), UTF-16 text is UTF-16 (with the
command that converts it), not "binary"; and runfile.md says what ``export`` does with a link. Every link points
at a canary whose bytes are checked at the end."""

from __future__ import annotations

import codecs
import os
from pathlib import Path

import pytest
from cli_helpers import assert_bad

from normvar_core import destination
from normvar_core.errors import NormvarError
from normvar_core.runs.writer import write_tables

ROOT = Path(__file__).resolve().parent.parent
CANARY = b"another application's file\n"


def test_a_byte_count_is_called_bytes(capsys, tmp_path, tiny_models):
    corpus = tmp_path / "c.txt"
    corpus.write_text("a short line of text\n" * 252)  # 5,292 bytes
    line = assert_bad(
        capsys,
        tmp_path / "d",
        "plan",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus,
        "--sample-frac",
        "1e-300",
        match="--sample-frac 1e-300 keeps no sentence of c.txt",
    )
    assert "its 5,292 bytes: at most 5,292 records" in line, line


def test_a_fifo_or_a_folder_is_not_called_a_link(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkfifo("pipe.html")
    Path("folder.html").mkdir()
    for name, kind in (("pipe.html", "a FIFO (named pipe)"), ("folder.html", "a folder")):
        with pytest.raises(NormvarError) as err:
            destination.resolve_destination(name, what="--out")
        text = str(err.value)
        assert f"--out {name} ({tmp_path / name}) is {kind}" in text and "link" not in text, text


def test_a_symbolic_link_under_a_run_name_is_a_link_not_a_run(capsys, tmp_path):
    canary = tmp_path / "canary.duckdb"
    canary.write_bytes(CANARY)
    run = tmp_path / "runs" / "r.duckdb"
    run.parent.mkdir()
    run.symlink_to(canary)
    with pytest.raises(NormvarError) as err:  # the writer's own check (a link planted after the first one)
        write_tables(run, lambda: None, {})
    assert "is a symbolic link, not a run" in str(err.value) and "already exists" not in str(err.value)
    with pytest.raises(NormvarError) as err:
        raise destination.taken(run)
    assert "is a symbolic link, not a run" in str(err.value)
    tmp = tmp_path / "runs" / ".r.tmp.duckdb"
    tmp.write_bytes(b"complete run")
    with pytest.raises(NormvarError, match="is a symbolic link, not a run"):  # publishing by link(2) meets the link
        destination.move_into_place(tmp, run, overwrite=False)
    assert canary.read_bytes() == CANARY and run.is_symlink()


@pytest.mark.parametrize("encoding,kind", [("utf-16", "UTF-16"), ("utf-16-le", "UTF-16LE"), ("utf-16-be", "UTF-16BE")])
def test_utf16_text_is_called_utf16_with_the_conversion(capsys, tmp_path, tiny_models, encoding, kind):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes("the first sentence.\nthe second one.\n".encode(encoding))
    assert corpus.read_bytes().startswith(codecs.BOM_UTF16_LE) == (encoding == "utf-16")
    line = assert_bad(
        capsys,
        tmp_path / "d",
        "plan",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus,
        match=f"corpus c.txt is {kind} text, not UTF-8",
    )
    assert "binary" not in line and f"iconv -f {kind} -t UTF-8 c.txt" in line, line
    cjk = tmp_path / "cjk.txt"
    cjk.write_bytes("日本語の文。".encode("utf-16"))  # UTF-16 with a BOM and no NUL byte at all
    assert b"\x00" not in cjk.read_bytes()
    line = assert_bad(
        capsys, tmp_path / "d", "plan", "--model", tiny_models["bert"], "--corpus", cjk, match="is UTF-16"
    )


def test_runfile_md_says_export_refuses_a_link(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "keep.txt").write_bytes(CANARY)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(NormvarError, match="is a symbolic link"):  # export's --out check
        destination.resolve_folder_destination(link, what="--out")
    text = (ROOT / "docs" / "runfile.md").read_text()
    assert "link to a folder is written through" not in text
    assert "and so is a symbolic link, to a folder too" in text
    assert (real / "keep.txt").read_bytes() == CANARY and sorted(p.name for p in real.iterdir()) == ["keep.txt"]
