"""corpus.load_sentences: every format, the filter → sample → cap semantics, every bad input."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from normvar_core.config import RunConfig
from normvar_core.datadir import DEFAULT_CORPUS
from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus.read import load_sentences

SENTS = [
    "The cat sat on the mat.",
    "",
    "A rather long sentence with exactly ten words in it, see?",
    "Short one.",
    "   ",
    "Ünïcödé wörds are fine — even dashes.",
    "one two three four five",
]


def cfg(path, **kw) -> RunConfig:
    return RunConfig(corpus=str(path), **kw)


def write_txt(tmp_path, lines, name="c.txt"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def expected(lines, max_words=64, frac=1.0, seed=0, max_sentences=None):
    """Independent re-statement of the selection rule (module docstring of corpus.py)."""
    nonempty = [s.strip() for s in lines if s.strip()]
    u = np.random.default_rng(seed).random(len(nonempty)) if frac < 1 else np.zeros(len(nonempty))
    out = [s for s, x in zip(nonempty, u) if (max_words == 0 or len(s.split()) < max_words) and x < frac]
    return out[:max_sentences] if max_sentences else out


# ----------------------------------------------------------------------------- formats
def test_txt_counts_and_lengths(tmp_path):
    p = write_txt(tmp_path, SENTS)
    c = load_sentences(cfg(p))
    assert c.sentences == [s.strip() for s in SENTS if s.strip()]
    assert (c.n_read, c.n_empty, c.n_kept, c.n_too_long, c.n_sampled_out) == (7, 2, 5, 0, 0)
    assert c.name == "c" and c.format == ".txt"
    import hashlib

    assert c.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    assert c.sentence_lengths.tolist() == [6, 11, 2, 7, 5]


def test_txt_gz_and_bom(tmp_path):
    p = tmp_path / "c.txt.gz"
    p.write_bytes(gzip.compress(("\ufeff" + "\n".join(SENTS)).encode("utf-8")))
    c = load_sentences(cfg(p))
    assert c.name == "c" and c.format == ".txt.gz"
    assert c.sentences == [s.strip() for s in SENTS if s.strip()]


def test_split_sentences_nupunkt(tmp_path):
    p = write_txt(
        tmp_path, ["Mr. Smith went to Washington. He said hi!", "Did he", "really? Yes.", "", "Next paragraph here."]
    )
    c = load_sentences(cfg(p, split_sentences=True))
    assert c.sentences == [
        "Mr. Smith went to Washington.",
        "He said hi!",
        "Did he really?",
        "Yes.",
        "Next paragraph here.",
    ]


def test_jsonl_csv_parquet_same_sentences(tmp_path):
    rows = [{"id": i, "text": s, "label": "x"} for i, s in enumerate(SENTS)]
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    pd.DataFrame(rows).to_csv(tmp_path / "c.csv", index=False)
    pd.DataFrame(rows).to_parquet(tmp_path / "c.parquet")
    want = [s.strip() for s in SENTS if s.strip()]
    for ext in ("jsonl", "csv", "parquet"):
        c = load_sentences(cfg(tmp_path / f"c.{ext}", text_column="text"))
        assert c.sentences == want, ext
        assert c.text_column == "text" and c.n_read == 7 and c.n_empty == 2


def test_single_string_column_is_picked(tmp_path):
    rows = [{"n": i, "sentence": s} for i, s in enumerate(SENTS)]
    pd.DataFrame(rows).to_parquet(tmp_path / "one.parquet")
    pd.DataFrame(rows).to_csv(tmp_path / "one.csv", index=False)
    (tmp_path / "one.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    for ext in ("parquet", "csv", "jsonl"):
        c = load_sentences(cfg(tmp_path / f"one.{ext}"))
        assert c.text_column == "sentence" and c.n_kept == 5, ext


def test_default_corpus():
    c = load_sentences(RunConfig(corpus="", max_sentences=50))
    assert c.path == DEFAULT_CORPUS and c.name == "novels_en"
    assert c.n_read == 58258 and c.n_kept == 50 and c.n_capped == 58258 - 50
    assert c.sentences[0] == "By Jane Austen"


# ----------------------------------------------------------------------------- selection
def test_filter_sample_cap_match_independent_rule(tmp_path):
    rng = np.random.default_rng(123)
    words = [f"w{i}" for i in range(50)]
    lines = [" ".join(rng.choice(words, size=int(k))) for k in rng.integers(0, 30, size=2000)]
    p = write_txt(tmp_path, lines)
    for mw, frac, seed, cap in [
        (64, 1.0, 0, None),
        (10, 1.0, 0, None),
        (0, 0.3, 0, None),
        (12, 0.25, 7, None),
        (12, 0.25, 7, 40),
        (5, 1.0, 0, 3),
    ]:
        c = load_sentences(cfg(p, max_words=mw, sample_frac=frac, seed=seed, max_sentences=cap))
        want = expected(lines, mw, frac, seed, cap)
        assert c.sentences == want, (mw, frac, seed, cap)
        assert c.sentence_lengths.tolist() == [len(s.split()) for s in want]
        assert c.n_read == c.n_empty + c.n_too_long + c.n_sampled_out + c.n_capped + c.n_kept
        nonempty = [s for s in lines if s.strip()]
        assert c.n_too_long == (sum(len(s.split()) >= mw for s in nonempty) if mw else 0)


def test_sampling_is_deterministic_and_order_preserving(tmp_path):
    lines = [f"sentence number {i}" for i in range(5000)]
    p = write_txt(tmp_path, lines)
    a = load_sentences(cfg(p, sample_frac=0.01, seed=0))
    b = load_sentences(cfg(p, sample_frac=0.01, seed=0))
    c = load_sentences(cfg(p, sample_frac=0.01, seed=1))
    assert a.sentences == b.sentences and a.sentences != c.sentences
    idx = [int(s.split()[-1]) for s in a.sentences]
    assert idx == sorted(idx) and 20 <= len(idx) <= 85  # ~50 expected (binomial, 5000 x 1 %)


# ----------------------------------------------------------------------------- bad input
def bad(c: RunConfig, *needles: str) -> str:
    with pytest.raises(NormvarError) as ei:
        load_sentences(c)
    msg = str(ei.value)
    assert "\n" not in msg and ei.value.fix, msg
    for n in needles:
        assert n.lower() in msg.lower(), (n, msg)
    return msg


def test_missing_file(tmp_path):
    bad(cfg(tmp_path / "nope.txt"), "not found", "check the path")


def test_empty_files(tmp_path):
    for name, data in [("e.txt", b""), ("w.txt", b"\n  \n\n"), ("e.jsonl", b"\n")]:
        (tmp_path / name).write_bytes(data)
        bad(cfg(tmp_path / name), "empty")
    (tmp_path / "e.txt.gz").write_bytes(gzip.compress(b"\n\n"))
    bad(cfg(tmp_path / "e.txt.gz"), "no text")


def test_nothing_left_after_filtering(tmp_path):
    p = write_txt(tmp_path, ["one two three four", "five six seven eight nine"])
    bad(cfg(p, max_words=3), "no sentences left", "--max-words")


def test_binary_file(tmp_path):
    p = tmp_path / "b.txt"
    p.write_bytes(b"hello\x00\x01\x02world")
    bad(cfg(p), "binary", "offset 5", "utf-8 text")


def test_non_utf8_reports_offset(tmp_path):
    p = tmp_path / "latin.txt"
    p.write_bytes("Café au lait.\n".encode("latin-1"))
    bad(cfg(p), "not utf-8", "byte offset 3", "0xe9", "iconv")
    g = tmp_path / "latin.txt.gz"
    g.write_bytes(gzip.compress("ok\nna\xefve\n".encode("latin-1")))
    bad(cfg(g), "byte offset 5", "decompressed")


def test_bad_gzip(tmp_path):
    p = tmp_path / "x.txt.gz"
    p.write_bytes(b"plain text, not gzip")
    bad(cfg(p), "gzip")


def test_unknown_and_ambiguous_column(tmp_path):
    rows = [{"a": "x y", "b": "z"}, {"a": "p", "b": "q"}]
    pd.DataFrame(rows).to_csv(tmp_path / "t.csv", index=False)
    pd.DataFrame(rows).to_parquet(tmp_path / "t.parquet")
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    for ext in ("csv", "parquet", "jsonl"):
        msg = bad(cfg(tmp_path / f"t.{ext}", text_column="body"), "'body'", "columns: a, b", "--text-column")
        assert "a" in msg
        bad(cfg(tmp_path / f"t.{ext}"), "2 text columns", "--text-column")


def test_bad_jsonl_and_parquet(tmp_path):
    (tmp_path / "j.jsonl").write_text('{"text": "ok"}\nnot json\n')
    bad(cfg(tmp_path / "j.jsonl"), "line 2", "json")
    (tmp_path / "p.parquet").write_bytes(b"PAR1 definitely not parquet")
    bad(cfg(tmp_path / "p.parquet"), "parquet")


def test_unsupported_extension(tmp_path):
    p = tmp_path / "c.docx"
    p.write_text("hello")
    bad(cfg(p), "unsupported", ".txt")
