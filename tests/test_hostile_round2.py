"""Hostile input, round two (issue 23): corpora of unknown tokens, raw warnings, truncated sentences,
``--layers 0,0``, JSONL text columns with numbers, corpus text on the Token page, ``--overwrite`` of a
queued run — each through the real CLI (or the real dashboard / job store)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli_runs import assert_bad, run_cli

EMOJI = [f"{'🦜🐙🦑🦀'[i % 4] * (1 + i % 3)} {'🐳🦈'[i % 2]} {'🪼' * (1 + i % 2)} ok" for i in range(40)]


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
    line = assert_bad(capsys, tmp_path / "data", "compute", "--model", tiny_models["bert"], "--corpus", corpus,
                      match="--allow-unknown")
    assert f"{share:.0%} of the corpus's tokens" in line and "[UNK]" in line


@pytest.mark.slow
def test_allow_unknown_runs_with_no_raw_warning_on_stderr(tmp_path, tiny_models):
    """A real ``normvar compute`` process on the emoji corpus with --allow-unknown (the run whose TwoNN
    is NaN in every layer): exit 0, and every stderr line is normvar's own, the share among them."""
    corpus = tmp_path / "emoji.txt"
    corpus.write_text("\n".join(EMOJI) + "\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.getcwd(), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("NORMVAR_WARNINGS", None)
    p = subprocess.run([sys.executable, "-m", "normvar_core.service.cli", "compute", "--model",
                        str(tiny_models["bert"]), "--corpus", str(corpus), "--name", "e", "--allow-unknown",
                        "--id-sample", "100", "--quiet", "--data-dir", str(tmp_path / "data")],
                       capture_output=True, text=True, env=env, timeout=600)
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
    code, out, err = run_cli(capsys, "compute", "--model", tiny_models["bert"], "--corpus", corpus, "--name", "f",
                             "--max-length", 20, "--no-geometry", "--quiet", "--data-dir", tmp_path / "data")
    assert code == 0, err
    share = _unk_share(tiny_models["bert"], lines, max_length=20)
    notes = [x for x in err.splitlines() if x.startswith("normvar: note:")]
    assert any(f"{share:.1%} of the counted non-special tokens" in x for x in notes), (share, notes)
    assert any("2 sentences longer than 20 tokens" in x and "truncated" in x for x in notes), notes
