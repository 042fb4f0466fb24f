"""Corpora the tests write: ``corpus_lines`` (seeded lines of a mixed-script vocabulary, some blank),
``write_corpus`` (those lines as a .txt, .txt.gz, .jsonl or .parquet file) and ``EMOJI`` (a corpus of emoji,
mostly unknown tokens to a WordPiece vocabulary)."""

from __future__ import annotations

import gzip
import json

import numpy as np

WORDS = ["the", "sea", "Émile", "café", "naïve", "Zwölf", "Boxkämpfer", "«quoi»", "日本語", "—", "a", "x"]
EMOJI = [f"{'🦜🐙🦑🦀'[i % 4] * (1 + i % 3)} {'🐳🦈'[i % 2]} {'🪼' * (1 + i % 2)} ok" for i in range(40)]


def corpus_lines(n: int, seed: int = 0) -> list[str]:
    """``n`` lines of 1–13 words drawn from ``WORDS``, every seventh one empty or blank."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        if i % 7 == 3:
            out.append("" if i % 2 else "   ")
        else:
            out.append(" ".join(rng.choice(WORDS, size=int(rng.integers(1, 14)))))
    return out


def write_corpus(path, fmt: str, lines: list[str], newline: str = "\n", final_newline: bool = True):
    """``lines`` written to ``path`` in format ``fmt`` (JSONL: some text cells numbers; Parquet: row groups of 13)."""
    if fmt in (".txt", ".txt.gz"):
        raw = (newline.join(lines) + (newline if final_newline else "")).encode()
        path.write_bytes(gzip.compress(raw) if fmt == ".txt.gz" else raw)
    elif fmt == ".jsonl":
        rows = [
            json.dumps({"id": i, "text": t if i % 11 != 5 else 42}, ensure_ascii=i % 2 == 0)
            for i, t in enumerate(lines)
        ]
        path.write_text(newline.join(rows) + (newline if final_newline else ""), encoding="utf-8")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"n": list(range(len(lines))), "text": lines}), path, row_group_size=13)
    return path
