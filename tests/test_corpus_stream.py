"""The streamed corpus reader selects exactly what the read-everything reader selected.

Oracle: ``tests/corpus_brute.py`` (the pre-streaming implementation). Block and chunk sizes are
shrunk to a few bytes / rows so that every boundary case (a UTF-8 sequence, "\\r\\n", a BOM, a
CSV type change split between blocks) happens on small files.
"""

from __future__ import annotations

import contextlib
import gzip
import json
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from corpus_brute import brute_load
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus import formats as corpus_formats
from normvar_core.pipeline.corpus import stream as corpus_stream
from normvar_core.pipeline.corpus import tables as corpus_tables
from normvar_core.pipeline.corpus.read import load_sentences

WORDS = ["the", "cat", "Ünïcödé", "—", "naïve", "日本語", "🙂", "007", "1.50", "True", "Mr.", "end.", "a,b", '"q"']
SEPS = ["\n", "\n", "\n", "\r\n", "\r", "\u2028", "\x85", "\x0c", "\n\n"]
FIELDS = (
    "sentences",
    "n_read",
    "n_kept",
    "n_too_long",
    "n_empty",
    "n_sampled_out",
    "n_capped",
    "sha256",
    "name",
    "format",
    "text_column",
    "path",
)


@contextlib.contextmanager
def small_blocks(block: int, rows: int):
    """Shrink the stream's byte blocks and the tables' row chunks."""
    with (
        mock.patch.object(corpus_stream, "BLOCK", block),
        mock.patch.object(corpus_tables, "CSV_ROWS", rows),
        mock.patch.object(corpus_formats, "PARQUET_ROWS", rows),
    ):
        yield


def outcome(load, c: RunConfig):
    """('ok', fields) or ('error', message) of one reader."""
    try:
        r = load(c)
    except NormvarError as exc:
        return "error", str(exc)
    return "ok", {**{k: getattr(r, k) for k in FIELDS}, "lengths": np.asarray(r.sentence_lengths).tolist()}


def assert_same(c: RunConfig, block: int = 3, rows: int = 2):
    want = outcome(brute_load, c)
    with small_blocks(block, rows):
        got = outcome(load_sentences, c)
    assert got == want
    return got


def make_records(seed: int, n: int) -> list[str]:
    """Sentences of 0-12 words from WORDS, some blank or padded with spaces/tabs."""
    rng = np.random.default_rng(seed)
    out = []
    for k in rng.integers(0, 13, size=n):
        s = " ".join(rng.choice(WORDS, size=int(k)))
        out.append(rng.choice(["", " ", "\t"]) + s + rng.choice(["", "  "]))
    return out


def write_all(tmp_path, records: list[str], seed: int) -> dict[str, object]:
    """The same records as .txt (mixed line ends, a BOM), .txt.gz, .jsonl, .csv and .parquet."""
    rng = np.random.default_rng(seed + 1)
    text = "\ufeff" + "".join(r + rng.choice(SEPS) for r in records)
    (tmp_path / "c.txt").write_bytes(text.encode("utf-8"))
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    rows = [{"id": i, "text": r, "flag": bool(i % 2)} for i, r in enumerate(records)]
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    pd.DataFrame(rows).to_csv(tmp_path / "c.csv", index=False)
    pd.DataFrame(rows).to_parquet(tmp_path / "c.parquet", row_group_size=7)
    return {ext: tmp_path / f"c{ext}" for ext in (".txt", ".txt.gz", ".jsonl", ".csv", ".parquet")}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data_seed=st.integers(0, 2**16),
    frac=st.sampled_from([1.0, 0.5, 0.13, 0.01]),
    seed=st.integers(0, 2**32 - 1),
    max_words=st.sampled_from([0, 1, 4, 9, 64]),
    cap=st.sampled_from([None, 1, 5, 40]),
    block=st.sampled_from([1, 2, 5, 64, 1 << 20]),
    rows=st.sampled_from([1, 3, 20_000]),
)
def test_streamed_equals_read_everything_all_formats(tmp_path, data_seed, frac, seed, max_words, cap, block, rows):
    files = write_all(tmp_path, make_records(data_seed, 60), data_seed)
    for ext, p in files.items():
        c = RunConfig(
            corpus=str(p),
            sample_frac=frac,
            seed=seed,
            max_words=max_words,
            max_sentences=cap,
            text_column="text" if ext in (".jsonl", ".csv", ".parquet") else None,
        )
        assert_same(c, block, rows)


def test_split_sentences_streamed_equals_read_everything(tmp_path):
    paras = [
        "Mr. Smith went to Washington. He said hi!",
        "Did he",
        "really? Yes.",
        "",
        "",
        "Dr. Who arrived at 5 p.m. on Tuesday. Then he left.",
        "   ",
        "Last one",
    ] * 4
    p = tmp_path / "p.txt"
    p.write_text("\r\n".join(paras), encoding="utf-8")
    rows = [{"t": x} for x in paras]
    pd.DataFrame(rows).to_csv(tmp_path / "p.csv", index=False)
    for path in (p, tmp_path / "p.csv"):
        for frac, cap in [(1.0, None), (0.5, 4)]:
            kind, got = assert_same(
                RunConfig(corpus=str(path), split_sentences=True, sample_frac=frac, seed=3, max_sentences=cap),
                block=4,
                rows=3,
            )
            assert kind == "ok" and got["n_kept"] >= 4


def test_auto_picked_columns_equal_read_everything(tmp_path):
    """Without --text-column: the one text column, decided over the whole file (chunks of 2 rows
    where 'mixed' is numeric in the first chunk and text later; 'flag' booleans then numbers)."""
    rows = [{"n": i, "mixed": str(i) if i < 4 else f"w{i}", "flag": "True" if i < 4 else "1"} for i in range(9)]
    pd.DataFrame(rows).to_csv(tmp_path / "m.csv", index=False)
    kind, msg = assert_same(RunConfig(corpus=str(tmp_path / "m.csv")))
    assert kind == "error" and "2 text columns (mixed, flag)" in msg
    kind, got = assert_same(RunConfig(corpus=str(tmp_path / "m.csv"), text_column="mixed"))
    assert kind == "ok" and got["sentences"][:5] == ["0", "1", "2", "3", "w4"]
    for r in rows:
        del r["flag"]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    pd.DataFrame(rows).to_csv(tmp_path / "m2.csv", index=False)
    for name in ("m.jsonl", "m2.csv"):
        kind, got = assert_same(RunConfig(corpus=str(tmp_path / name)))
        assert kind == "ok" and got["text_column"] == "mixed" and got["n_kept"] == 9


def test_sample_drawn_in_batches_is_the_one_shot_sample(tmp_path):
    """Independent of the oracle: keep line i iff the i-th of rng.random(n) is below frac."""
    lines = [f"sentence number {i}" for i in range(3000)]
    p = tmp_path / "s.txt"
    p.write_text("\n".join(lines))
    u = np.random.default_rng(11).random(len(lines))
    with small_blocks(block=777, rows=1):
        c = load_sentences(RunConfig(corpus=str(p), sample_frac=0.05, seed=11))
    assert c.sentences == [s for s, x in zip(lines, u) if x < 0.05]
    assert c.n_sampled_out == int((u >= 0.05).sum())


# ----------------------------------------------------------------------------- errors
def _bad_files(tmp_path) -> dict[str, bytes]:
    noise = "".join(f"line {i} {np.random.default_rng(i).bytes(8).hex()}\n" for i in range(300)).encode()
    gz_ok = gzip.compress(b"x\x00y\n" + noise)  # a NUL first, then a truncated stream
    return {
        "utf8_then_nul.txt": b"ok line\ncaf\xe9\n" + b"more\n" * 20 + b"bin\x00ary\n",
        "nul_then_utf8.txt": b"a\x00b\n" + b"caf\xe9\n",
        "split_sequence.txt": b"abc\xe2\x82\xac\xe2\x82x\n",
        "truncated_sequence.txt": b"abc\n\xe2\x82",
        "lone_bom_prefix.txt": b"\xef\xbb",
        "blank.txt": b" \n\t\r\n",
        "blank.txt.gz": b" \n \n",
        "nul_in_truncated.txt.gz": gz_ok[:-12],
        "bad_json_then_utf8.jsonl": b'{"text": "a"}\nnot json\n{"text": "caf\xe9"}\n',
        "not_object.jsonl": b'{"text": "a"}\n[1, 2]\n',
        "blank_lines.jsonl": b"\n \n",
        "csv_parse_then_nul.csv": b"a,b\n1,x\n2,y,z\n3,w\x00\n",
        "csv_parse.csv": b"a,b\n1,x\n2,y,z\n" + b"3,w\n" * 10,
        "only_bom.txt": b"\xef\xbb\xbf",
        "bom_blank.txt": b"\xef\xbb\xbf\n\n",
    }


@pytest.mark.parametrize("block", [1, 4, 1 << 20])
def test_errors_and_their_precedence_equal_read_everything(tmp_path, block):
    for name, data in _bad_files(tmp_path).items():
        p = tmp_path / name
        p.write_bytes(data)
        want = outcome(brute_load, RunConfig(corpus=str(p)))
        with small_blocks(block, 2):
            got = outcome(load_sentences, RunConfig(corpus=str(p)))
        assert want[0] == "error" and got[0] == "error", name
        if "gzip" in want[1]:  # the zlib detail differs between gzip.decompress and GzipFile.read
            assert "not a valid gzip file" in got[1], (name, got)
        else:
            assert got[1] == want[1], name


def test_non_utf8_after_a_bom_reports_the_file_offset(tmp_path):
    """The whole-file reader counted from after the BOM and printed the wrong byte; offsets are file offsets."""
    p = tmp_path / "bom.txt"
    p.write_bytes(b"\xef\xbb\xbfok\n\xff\n")
    with small_blocks(2, 2), pytest.raises(NormvarError, match=r"invalid byte 0xff at byte offset 6\b"):
        load_sentences(RunConfig(corpus=str(p)))


def test_columns_that_are_not_text_are_refused(tmp_path):
    rows = [{"n": i, "x": i / 2, "ok": i % 2 == 0, "none": None, "text": f"sentence {i}"} for i in range(6)]
    pd.DataFrame(rows).to_csv(tmp_path / "t.csv", index=False)
    pd.DataFrame(rows).to_parquet(tmp_path / "t.parquet")
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    for ext in ("csv", "parquet", "jsonl"):
        for col in ["n", "x", "ok", "none"]:
            with pytest.raises(NormvarError) as ei:
                load_sentences(RunConfig(corpus=str(tmp_path / f"t.{ext}"), text_column=col))
            msg, fix = str(ei.value), ei.value.fix
            assert f"column '{col}'" in msg and "not text" in msg, msg
            # a column of empty cells is nulls in every format (CSV: empty cells are missing)
            assert fix == "pass --text-column with a text column: text"
        assert load_sentences(RunConfig(corpus=str(tmp_path / f"t.{ext}"), text_column="text")).n_kept == 6


def test_mixed_jsonl_column_takes_its_strings_and_no_text_column_at_all(tmp_path):
    """A JSONL text field that is sometimes a number: its strings are the corpus, the rest counted."""
    (tmp_path / "m.jsonl").write_text('{"t": "a b"}\n{"t": 3}\n{"t": null}\n{"t": true}\n{"t": "c"}\n')
    for col in ("t", None):
        c = load_sentences(RunConfig(corpus=str(tmp_path / "m.jsonl"), text_column=col))
        assert c.sentences == ["a b", "c"] and c.n_not_text == 2 and c.n_empty == 3 and c.text_column == "t"
    pd.DataFrame({"n": [1, 2, 3]}).to_csv(tmp_path / "n.csv", index=False)
    with pytest.raises(NormvarError) as ei:
        load_sentences(RunConfig(corpus=str(tmp_path / "n.csv"), text_column="n"))
    assert ei.value.fix == "write the sentences as a column of strings"


def test_parquet_dictionary_strings_accepted_when_named(tmp_path):
    df = pd.DataFrame({"cat": pd.Categorical(["a b", "c", "a b", None]), "id": [1, 2, 3, 4]})
    df.to_parquet(tmp_path / "d.parquet")
    c = load_sentences(RunConfig(corpus=str(tmp_path / "d.parquet"), text_column="cat"))
    assert c.sentences == ["a b", "c", "a b"] and c.n_empty == 1


def test_file_changed_between_the_two_passes_is_refused(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("a,b\nx,1\ny,2\n")
    real = corpus_tables.CorpusStream
    opened = []

    def stream(path, gzipped=False):
        if opened:  # the second pass: someone appended a row meanwhile
            with open(path, "a") as fh:
                fh.write("z,3\n")
        opened.append(path)
        return real(path, gzipped)

    with (
        mock.patch.object(corpus_tables, "CorpusStream", stream),
        pytest.raises(NormvarError, match="changed while it was read"),
    ):
        load_sentences(RunConfig(corpus=str(p)))
