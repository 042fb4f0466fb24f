"""A corpus that is one very long line is read in bounded memory: the line streams past in blocks, its words
counted as they go (``stream.LongLine``: the first ``LONG_LINE`` characters and the whole line's word count), so
the reader's Python allocations (``tracemalloc``) stay far below the line's size whatever its length; the counts
agree with ``str.split`` on the whole line, and ``--max-words 0`` keeps the line's head (cut between words), whose
tokens are the whole line's first ones. (The peak RSS of ``normvar plan`` on 1-200 MB lines:
``benchmarks/bench_plan_long_line.py``, docs/benchmarks.md.)"""

from __future__ import annotations

import tracemalloc

import numpy as np

from normvar_core.config import RunConfig
from normvar_core.pipeline.corpus import stream
from normvar_core.pipeline.corpus.read import load_sentences

WORDS = np.array("the cat sat on a mat with its dog and ran far away".split())


def _line(path, n_words: int) -> int:
    """One line of ``n_words`` seeded words written in pieces, then a short line; returns the line's length."""
    rng = np.random.default_rng(0)
    size = 0
    with open(path, "w", encoding="utf-8") as fh:
        for start in range(0, n_words, 100_000):
            piece = " ".join(WORDS[rng.integers(0, len(WORDS), min(100_000, n_words - start))]) + " "
            fh.write(piece)
            size += len(piece)
        fh.write("\nshort line here\n")
    return size


def test_a_long_line_is_read_in_bounded_memory_with_its_words_counted(tmp_path):
    path = tmp_path / "one-line.txt"
    n_words = 8_000_000  # a ~30 MB line
    size = _line(path, n_words)
    assert size > 25 * stream.LONG_LINE
    tracemalloc.start()
    try:
        got = load_sentences(RunConfig(corpus=str(path)), tmp_path)  # the default word limit drops it
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got.n_read == 2 and got.n_too_long == 1 and got.sentences == ["short line here"]
    assert f"[{n_words} words]" in got.too_long[0]  # counted over the whole line, exactly
    # never the whole line (the old reader held it several times): a few 1 MiB blocks and the line's 1 MiB head
    assert peak < 12 * (1 << 20) < size / 2, (peak, size)

    kept = load_sentences(RunConfig(corpus=str(path), max_words=0), tmp_path)
    head = kept.sentences[0]
    assert kept.sentence_lengths.tolist() == [n_words, 3]
    assert stream.LONG_LINE - 8 <= len(head) <= stream.LONG_LINE and not head.endswith(" ")
    with open(path, encoding="utf-8") as fh:
        start = fh.read(len(head) + 1)
    assert start[: len(head)] == head and start[len(head)] == " "  # the line's own head, cut between two words
