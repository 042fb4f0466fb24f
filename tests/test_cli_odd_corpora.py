"""Odd corpora through the real CLI: corpora of unknown tokens, raw warnings, truncated sentences,
``--layers 0,0``, JSONL text columns with numbers, corpus text on the Token page, ``--overwrite`` of a
queued run — each through the real CLI (or the real dashboard / job store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_bad, run_cli
from corpus_files import EMOJI


def _unk_share(model: Path, lines: list[str], max_length: int | None = None) -> float:
    """The share of non-special tokens that are [UNK], from the tokenizer itself (truncated as the run)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    kw = dict(truncation=True, max_length=max_length) if max_length else {}
    special = set(tok.all_special_ids) - {tok.unk_token_id}
    ids = [i for s in lines for i in tok(s, **kw)["input_ids"] if i not in special]
    return sum(i == tok.unk_token_id for i in ids) / len(ids)


def test_a_corpus_mostly_of_unknown_tokens_is_refused_naming_the_share(capsys, tmp_path, tiny_models):
    corpus = tmp_path / "emoji.txt"
    corpus.write_text("\n".join(EMOJI) + "\n", encoding="utf-8")
    share = _unk_share(tiny_models["bert"], EMOJI)
    assert share > 0.5
    line = assert_bad(
        capsys,
        tmp_path / "data",
        "compute",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus,
        match="--allow-unknown",
    )
    assert f"{share:.0%} of the corpus's tokens" in line and "[UNK]" in line


@pytest.mark.slow
def test_allow_unknown_runs_with_no_raw_warning_on_stderr(tmp_path, tiny_models):
    """A real ``normvar compute`` process on the emoji corpus with --allow-unknown (the run whose TwoNN
    is NaN in every layer): exit 0, and every stderr line is normvar's own, the share among them."""
    corpus = tmp_path / "emoji.txt"
    corpus.write_text("\n".join(EMOJI) + "\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.getcwd(), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("NORMVAR_WARNINGS", None)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "normvar_core.service.cli",
            "compute",
            "--model",
            str(tiny_models["bert"]),
            "--corpus",
            str(corpus),
            "--name",
            "e",
            "--allow-unknown",
            "--id-sample",
            "100",
            "--quiet",
            "--data-dir",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    err = [x for x in p.stderr.splitlines() if x.strip()]
    assert err and all(x.startswith("normvar: note:") for x in err), err
    share = _unk_share(tiny_models["bert"], EMOJI)
    assert any(f"{share:.1%} of the counted non-special tokens" in x for x in err), (share, err)


def test_a_few_unknown_tokens_and_truncated_sentences_are_notes(capsys, tmp_path, tiny_models):
    """Below half: the run is computed and compute prints the share; a sentence cut at --max-length
    is printed too (how many, and the length)."""
    lines = [f"the cat {i % 7} sat on the mat" + (" 🦜" if i % 4 == 0 else "") for i in range(40)]
    lines[3] = " ".join(["word"] * 30)
    lines[5] = " ".join(["long"] * 25)
    corpus = tmp_path / "few.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = run_cli(
        capsys,
        "compute",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus,
        "--name",
        "f",
        "--max-length",
        20,
        "--no-geometry",
        "--quiet",
        "--data-dir",
        tmp_path / "data",
    )
    assert code == 0, err
    share = _unk_share(tiny_models["bert"], lines, max_length=20)
    notes = [x for x in err.splitlines() if x.startswith("normvar: note:")]
    assert any(f"{share:.1%} of the counted non-special tokens" in x for x in notes), (share, notes)
    assert any("2 sentences longer than 20 tokens" in x and "truncated" in x for x in notes), notes


def test_layers_given_twice_and_a_jsonl_text_field_that_is_sometimes_a_number(capsys, tmp_path, tiny_models):
    """``--layers 0,2,0`` is recorded as what ran ([0, 2], in the options too); a JSONL text field
    holding numbers in some rows: the strings are the corpus, compute says how many cells it skipped."""
    from normvar_core.runs.reader import open_run

    rows = [
        {"text": f"the cat {i % 7} sat on the mat", "id": i} if i % 5 else {"text": i, "id": i} for i in range(40)
    ] + [{"text": None, "id": 99}, {"text": True, "id": 100}]
    corpus = tmp_path / "mixed.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    code, out, err = run_cli(
        capsys,
        "compute",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus,
        "--name",
        "m",
        "--layers",
        "0,2,0",
        "--no-geometry",
        "--quiet",
        "--data-dir",
        tmp_path / "data",
    )
    assert code == 0, err
    run = open_run(Path(out.strip()))
    assert list(run.layers) == [0, 2] and run.meta["options"]["layers"] == [0, 2]
    strings = [r["text"] for r in rows if isinstance(r["text"], str)]
    assert run.meta["n_sentences"] == len(strings) == 32
    assert "normvar: note: 9 cells of column 'text' were not text" in err, err


def test_overwrite_of_a_queued_run_says_so_instead_of_queuing_a_duplicate(capsys, tmp_path, tiny_models, corpus40):
    from normvar_core.datadir import DataDir
    from normvar_core.service.jobs import JobStore

    data = tmp_path / "data"
    base = ["submit", "--model", tiny_models["bert"], "--corpus", corpus40, "--name", "q", "--data-dir", data]
    code, out, err = run_cli(capsys, *base)
    assert code == 0, err
    first = out.strip()
    code, out, err = run_cli(capsys, *base, "--overwrite")
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and f"already queued as job {first}" in lines[0], err
    assert f"normvar cancel {first}" in lines[0]
    code, out, err = run_cli(capsys, *base, "--overwrite", "--seed", "1")  # other options: a real replacement
    assert code == 0, err
    jobs = JobStore(DataDir.at(data)).list(limit=None)
    assert sorted(j.id for j in jobs) == sorted([first, out.strip()])


@pytest.mark.browser
def test_token_page_shows_corpus_sentences_as_plain_text_in_a_browser(tmp_path, tiny_models):
    """A sentence holding a Markdown image link (to 127.0.0.1) and emphasis is shown on the Token page
    as the text it is: no <img>, no <em>, the characters visible."""
    from browser_helpers import ARGS, CHROMIUM, start_streamlit, stop_streamlit

    from normvar_core.service import cli

    link = "![pic](http://127.0.0.1:9/x.png)"
    lines = [f"the cat {i % 7} saw {link} and *stars* on the mat" for i in range(30)]
    corpus = tmp_path / "md.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = tmp_path / "data"
    assert (
        cli.main(
            [
                "compute",
                "--model",
                str(tiny_models["bert"]),
                "--corpus",
                str(corpus),
                "--name",
                "md",
                "--no-geometry",
                "--quiet",
                "--data-dir",
                str(data),
            ]
        )
        == 0
    )
    proc, base, log = start_streamlit(data, tmp_path / "streamlit.log")
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            page = b.new_page(viewport={"width": 1400, "height": 1100})
            page.goto(f"{base}/?page=token&run=md&token=the")
            page.get_by_role("tab", name="Contexts").click(timeout=90000)
            page.get_by_text("Most typical").wait_for(timeout=90000)
            page.wait_for_function("() => document.querySelectorAll('mark b').length >= 2", timeout=60000)
            body = page.inner_text("body")
            assert link in body and "*stars*" in body
            imgs = page.evaluate("() => [...document.querySelectorAll('img')].map(i => i.src)")
            assert not [s for s in imgs if "127.0.0.1:9" in s], imgs
            assert page.locator("em", has_text="stars").count() == 0
            b.close()
    finally:
        stop_streamlit(proc, log)
