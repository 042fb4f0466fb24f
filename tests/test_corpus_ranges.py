"""Byte-range corpus shares (``corpus.ranges``), without Ray: the driver's cut, the workers' three
phases run one range at a time, and the driver's merge select exactly what ``load_sentences``
selects from the whole file (sentences, order, counts, word lengths, too-long examples, sha256) —
for every format the ranges cover, with sampling and ``max_sentences``, and with cuts in awkward
places. The ground truth is ``load_sentences`` (itself checked against the read-everything reader)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from corpus_files import corpus_lines, write_corpus
from ranges_local import select_locally

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus.ranges import cut_ranges, parse_range, rooms, shares_of, skips
from normvar_core.pipeline.corpus.read import load_sentences


def _same(got, want) -> None:
    assert got.sentences == want.sentences
    for k in (
        "sha256",
        "n_read",
        "n_kept",
        "n_too_long",
        "n_empty",
        "n_sampled_out",
        "n_capped",
        "n_not_text",
        "too_long",
        "text_column",
        "format",
        "name",
    ):
        assert getattr(got, k) == getattr(want, k), k
    np.testing.assert_array_equal(got.sentence_lengths, want.sentence_lengths)


CONFIGS = [
    dict(),
    dict(sample_frac=0.4, seed=7),
    dict(max_words=9, sample_frac=0.6, seed=3, max_sentences=25),
    dict(max_sentences=1),
    dict(max_words=4, max_sentences=40),
]


@pytest.mark.parametrize("fmt", [".txt", ".txt.gz", ".jsonl", ".parquet"])
@pytest.mark.parametrize("opts", CONFIGS)
def test_ranges_select_what_the_whole_file_reader_selects(tmp_path, fmt, opts):
    path = write_corpus(tmp_path / f"c{fmt}", fmt, corpus_lines(150))
    cfg = RunConfig(corpus=str(path), **opts)
    want = load_sentences(cfg)
    assert want.n_kept > 0
    for k in (1, 2, 3, 5, 16, 400):
        cut = cut_ranges(cfg, k)
        n = len(cut.get("ranges") or cut.get("row_groups"))
        assert 1 <= n <= k
        _same(select_locally(cfg, cut), want)


def test_cuts_fall_at_line_ends_and_the_bytes_are_the_files(tmp_path):
    lines = corpus_lines(300, seed=1)
    raw_path = write_corpus(tmp_path / "c.txt", ".txt", lines, newline="\r\n", final_newline=False)
    gz_path = write_corpus(tmp_path / "c.txt.gz", ".txt.gz", lines, newline="\r\n", final_newline=False)
    for path in (raw_path, gz_path):
        cut = cut_ranges(RunConfig(corpus=str(path)), 6)
        assert len(cut["ranges"]) == 6
        assert b"".join(cut["ranges"]) == ("\r\n".join(lines)).encode()
        assert all(r.endswith(b"\n") for r in cut["ranges"][:-1])
        assert cut["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        put = []  # each range handed on as it is cut, the handle kept in its place
        handles = cut_ranges(RunConfig(corpus=str(path)), 6, put=lambda b, put=put: put.append(b) or len(put) - 1)
        assert put == cut["ranges"] and handles["ranges"] == list(range(6))


@pytest.mark.parametrize("fmt", [".txt", ".jsonl"])
def test_awkward_cuts(tmp_path, fmt):
    """Multi-byte characters around every cut, CRLF, a BOM, no final newline, a range of empty lines
    only (no kept record), and the cap reached exactly at the end of a range."""
    lines = ["ééé 日本", "€€ a"] * 20 + [""] * 150 + ["日本語 the sea"] * 20
    path = tmp_path / f"a{fmt}"
    write_corpus(path, fmt, lines, newline="\r\n", final_newline=False)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    for opts in (dict(), dict(sample_frac=0.5, seed=1), dict(max_sentences=40), dict(max_sentences=13)):
        cfg = RunConfig(corpus=str(path), **opts)
        want = load_sentences(cfg)
        for k in range(1, 12):
            cut = cut_ranges(cfg, k)
            _same(select_locally(cfg, cut), want)
    cfg = RunConfig(corpus=str(path), text_column="text" if fmt == ".jsonl" else None)
    cut = cut_ranges(cfg, 8)
    counts = [parse_range(cfg, s, cfg.text_column)[1]["n_nonempty"] for s in shares_of(cut)]
    assert len(counts) == 8 and 0 in counts[1:-1]  # a range with no record to keep, between two with some


def test_cap_right_at_a_range_end_and_rooms():
    cfg = RunConfig(max_sentences=10)
    assert rooms(cfg, [4, 6, 3, 0, 5]) == [4, 6, 0, 0, 0]
    assert rooms(cfg, [0, 12, 3]) == [0, 10, 0]
    assert rooms(RunConfig(), [3, 0, 2]) == [3, 0, 2]
    assert skips([3, 0, 5, 2]) == [0, 3, 3, 8]


def test_split_sentences_cuts_between_paragraphs(tmp_path):
    paras = [
        "The old man looked.\nHe saw the sea. It was blue.",
        "Émile said «non».\n\nNext one! Yes.",
        "A line\nwrapped here. And done.",
    ] * 15
    path = tmp_path / "p.txt"
    path.write_text("\n\n".join(paras) + "\n", encoding="utf-8")
    for opts in (dict(), dict(sample_frac=0.5, seed=2, max_sentences=30)):
        cfg = RunConfig(corpus=str(path), split_sentences=True, **opts)
        want = load_sentences(cfg)
        for k in (1, 3, 8):
            cut = cut_ranges(cfg, k)
            assert all(r.endswith(b"\n\n") for r in cut["ranges"][:-1])
            _same(select_locally(cfg, cut), want)


@pytest.mark.parametrize("fmt", [".jsonl", ".parquet"])
def test_split_sentences_in_table_cells(tmp_path, fmt):
    """``--split-sentences`` splits every cell of a table (and, for JSONL, keeps counting the cells that
    are not strings: the splitter passes ``n_not_text`` on to the selection)."""
    cells = ["The old man looked. He saw the sea!", "Émile said «non». Then left.", "", "One more here."] * 12
    path = write_corpus(tmp_path / f"t{fmt}", fmt, cells)
    for opts in (dict(), dict(sample_frac=0.6, seed=4, max_sentences=40)):
        cfg = RunConfig(corpus=str(path), split_sentences=True, text_column="text", **opts)
        want = load_sentences(cfg)
        if not opts:  # cells really were split into sentences
            assert want.n_kept > sum(1 for c in cells if c)
        assert want.n_not_text == (4 if fmt == ".jsonl" else 0)  # rows 5, 16, 27, 38 hold the number 42
        for k in (1, 2, 5):
            _same(select_locally(cfg, cut_ranges(cfg, k)), want)


def test_bad_ranges_raise_the_whole_file_errors(tmp_path):
    path = tmp_path / "c.jsonl"
    write_corpus(path, ".jsonl", corpus_lines(60))
    for wanted in ("nope", "id"):
        cfg = RunConfig(corpus=str(path), text_column=wanted)
        with pytest.raises(NormvarError) as local:
            load_sentences(cfg)
        with pytest.raises(NormvarError) as ranged:
            select_locally(cfg, cut_ranges(cfg, 4))
        assert str(ranged.value) == str(local.value)
    blank = tmp_path / "b.txt"
    blank.write_text("\n  \n\n")
    with pytest.raises(NormvarError, match="empty"):
        cut_ranges(RunConfig(corpus=str(blank)), 3)


@pytest.mark.parametrize("fmt", [".txt", ".txt.gz", ".jsonl"])
def test_one_line_per_range_puts_a_range_end_right_after_the_cap(tmp_path, fmt):
    """Every line its own range: the ``max_sentences`` cap then falls exactly at a range end, and
    most ranges hold one record (or none)."""
    path = write_corpus(tmp_path / f"c{fmt}", fmt, corpus_lines(90, seed=4), newline="\r\n", final_newline=False)
    for opts in (dict(max_sentences=17), dict(sample_frac=0.5, seed=5, max_sentences=9), dict(max_words=5)):
        cfg = RunConfig(corpus=str(path), **opts)
        whole = cut_ranges(cfg, 1)
        one_each = dict(whole, ranges=whole["ranges"][0].splitlines(keepends=True))
        assert len(one_each["ranges"]) == 90
        _same(select_locally(cfg, one_each), load_sentences(cfg))
