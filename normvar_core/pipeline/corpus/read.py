"""Corpora: a text file → the filtered, sampled sentences of a run (the study's §5.1.2).

Formats (``normvar_core.corpus_formats``): ``.txt``/``.txt.gz`` (one sentence a line; with
``split_sentences`` blank-line separated paragraphs are joined and split with nupunkt, offline),
``.jsonl``/``.csv``/``.parquet`` with ``text_column`` (optional when the file has exactly one
text column; a column that is not text is refused).

Selection, order preserved: drop empty lines; keep sentences with fewer than ``max_words``
whitespace words (0 = no limit); keep each remaining sentence with probability ``sample_frac``
(uniforms from ``numpy.random.default_rng(seed)``, one draw per non-empty sentence in file
order, so filtering and sampling commute as in the study's "1 % sample, < 64 words"); then
the first ``max_sentences``. Counts: n_read = n_empty + n_too_long + n_sampled_out + n_capped + n_kept.

Streaming: the file is read, hashed (sha256 of its bytes), decompressed, decoded, split and
selected block by block (``corpus_stream``, ``corpus_select``, ``corpus_tables``): memory grows
with the kept sentences, not with the file. The only unbounded buffer is one record: a line, or
with ``split_sentences`` one paragraph of a .txt file.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from normvar_core.config import RunConfig
from normvar_core.corpus_formats import CORPUS_SUFFIXES, TABLE_SUFFIXES, corpus_label, corpus_suffix
from normvar_core.datadir import DEFAULT_CORPUS, DataDir
from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus.select import CorpusText, Selection
from normvar_core.pipeline.corpus.stream import CorpusStream
from normvar_core.pipeline.corpus.tables import select_table

__all__ = ["CorpusText", "load_sentences", "resolve_corpus_path", "corpus_format"]
_SUPPORTED = ", ".join(CORPUS_SUFFIXES)


def resolve_corpus_path(corpus: str, data_dir=None) -> Path:
    """'' → the shipped novels; else the path, or a file of that name in <data dir>/corpora."""
    if not corpus:
        return DEFAULT_CORPUS
    p = Path(corpus).expanduser()
    if not p.exists() and not p.is_absolute():
        alt = DataDir.at(data_dir).corpora / corpus
        if alt.exists():
            p = alt
    if not p.exists():
        raise NormvarError(f"corpus file not found: {corpus}",
                           fix="check the path (omit --corpus for the shipped novels)")
    if p.is_dir():
        raise NormvarError(f"corpus path is a directory: {corpus}", fix=f"pass one file ({_SUPPORTED})")
    return p


def corpus_format(path: Path) -> str:
    """The supported suffix of ``path`` ('.txt.gz', '.csv', ...), else a NormvarError."""
    fmt = corpus_suffix(path.name)
    if fmt is None:
        raise NormvarError(f"unsupported corpus file type: {path.name}",
                           fix=f"use one of: {_SUPPORTED}")
    return fmt


def load_sentences(cfg: RunConfig, data_dir=None) -> CorpusText:
    """Stream ``cfg.corpus`` (or ``cfg.dataset``: ``corpus.dataset``, each row's text cell a record) and
    select sentences as described in the module docstring."""
    sel = Selection(cfg)
    sink = _SentenceSplitter(sel) if cfg.split_sentences else sel
    if getattr(cfg, "dataset", None):
        from normvar_core.pipeline.corpus.dataset import FORMAT, open_dataset

        src = open_dataset(cfg)
        src.feed(sink)
        return sel.result(name=src.label, path=Path(src.label), sha256=src.digest, fmt=FORMAT, column=src.column,
                          dataset=src.provenance)
    path = resolve_corpus_path(cfg.corpus, data_dir)
    fmt = corpus_format(path)
    column = None
    if fmt in TABLE_SUFFIXES:
        column, digest = select_table(path, fmt, cfg.text_column, sink)
    else:
        stream = CorpusStream(path, gzipped=fmt == ".txt.gz")
        lines = stream.lines()
        for batch in _paragraphs(lines) if cfg.split_sentences else lines:
            sink.add(batch)
        digest = stream.sha256
    return sel.result(name=corpus_label(path), path=path, sha256=digest, fmt=fmt, column=column)


def _paragraphs(batches: Iterator[list[str]]) -> Iterator[list[str]]:
    """Blank-line separated paragraphs, each joined to one line (hard-wrapped text)."""
    cur: list[str] = []
    for lines in batches:
        paras = []
        for line in lines:
            if line.strip():
                cur.append(line.strip())
            elif cur:
                paras.append(" ".join(cur))
                cur = []
        yield paras
    if cur:
        yield [" ".join(cur)]


class _SentenceSplitter:
    """Splits each record into sentences (nupunkt) before passing them on; empty records stay empty."""

    def __init__(self, sel: Selection):
        from nupunkt import sent_tokenize

        self._split = sent_tokenize
        self._sel = sel

    # JSONL cells that were not strings / were null or missing: counted on the selection (``tables._json_cells``)
    n_not_text = property(lambda self: self._sel.n_not_text, lambda self, v: setattr(self._sel, "n_not_text", v))
    n_null = property(lambda self: self._sel.n_null, lambda self, v: setattr(self._sel, "n_null", v))

    def add(self, records: list[str]) -> None:
        out: list[str] = []
        for r in records:
            if r and r.strip():
                out.extend(self._split(r.strip()))
            else:
                out.append("")
        self._sel.add(out)
