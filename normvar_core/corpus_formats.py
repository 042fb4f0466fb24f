"""The corpus file types normvar reads, defined once.

Base layer: no heavy imports, so ``config`` (default run names), the upload code
(``service/jobs``, ``views/new_run``) and the reader (``pipeline/corpus``) can share it.
"""

from __future__ import annotations

TEXT_SUFFIXES = (".txt.gz", ".txt")
"""One sentence (or, with ``split_sentences``, one paragraph line) a line; UTF-8."""
TABLE_SUFFIXES = (".jsonl", ".csv", ".parquet")
"""Tables with a text column (``text_column``, optional when there is exactly one)."""
CORPUS_SUFFIXES = TEXT_SUFFIXES + TABLE_SUFFIXES
"""Every supported suffix, compound ones before their tails (".txt.gz" before ".txt")."""
UPLOAD_TYPES = tuple(sorted({s.rsplit(".", 1)[-1] for s in CORPUS_SUFFIXES}))
"""Last extensions as Streamlit's ``file_uploader(type=...)`` wants them: gz, txt, jsonl, ..."""


def corpus_suffix(name: str) -> str | None:
    """The supported suffix ``name`` ends with, lower-cased ('A.TXT.GZ' -> '.txt.gz'); None if none."""
    low = str(name).lower()
    for suffix in CORPUS_SUFFIXES:
        if low.endswith(suffix):
            return suffix
    return None


def corpus_stem(name: str) -> str:
    """``name`` without its supported suffix ('novels.txt.gz' -> 'novels'); unchanged if none."""
    suffix = corpus_suffix(name)
    return str(name)[: -len(suffix)] if suffix else str(name)


LABEL_SUFFIX = ".name"
"""An uploaded corpus ``corpora/<sha256><ext>`` keeps the upload's file name (a label, never a path)
beside it in ``corpora/<sha256><ext>.name``."""


def corpus_label(path) -> str:
    """The name a run records for its corpus: an upload's own file name (from its ``.name`` file),
    else the file's stem ('novels.txt.gz' -> 'novels')."""
    from pathlib import Path

    p = Path(path)
    side = p.with_name(p.name + LABEL_SUFFIX)
    try:
        label = side.read_text(encoding="utf-8").strip()[:80]
    except (OSError, UnicodeDecodeError):
        label = ""
    return label or corpus_stem(p.name)
