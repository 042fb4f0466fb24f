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

from pathlib import Path

from normvar_core.config import RunConfig
from normvar_core.corpus_formats import TABLE_SUFFIXES, corpus_label
from normvar_core.pipeline.corpus.dataset import FORMAT, open_dataset
from normvar_core.pipeline.corpus.formats import SentenceSplitter, corpus_format, paragraphs, resolve_corpus_path
from normvar_core.pipeline.corpus.select import CorpusText, Selection
from normvar_core.pipeline.corpus.stream import CorpusStream
from normvar_core.pipeline.corpus.tables import select_table

__all__ = ["load_sentences"]


def load_sentences(cfg: RunConfig, data_dir=None) -> CorpusText:
    """Stream ``cfg.corpus`` (or ``cfg.dataset``: ``corpus.dataset``, each row's text cell a record) and
    select sentences as described in the module docstring."""
    sel = Selection(cfg)
    sink = SentenceSplitter(sel) if cfg.split_sentences else sel
    if cfg.dataset:
        src = open_dataset(cfg)
        src.feed(sink)
        return sel.result(
            name=src.label,
            path=Path(src.label),
            sha256=src.digest,
            fmt=FORMAT,
            column=src.column,
            dataset=src.provenance,
        )
    path = resolve_corpus_path(cfg.corpus, data_dir)
    fmt = corpus_format(path)
    column = None
    if fmt in TABLE_SUFFIXES:
        column, digest = select_table(path, fmt, cfg.text_column, sink)  # type: ignore[arg-type]  # a splitter is a selection sink too
    else:
        stream = CorpusStream(path, gzipped=fmt == ".txt.gz")
        lines = stream.lines()
        for batch in paragraphs(lines) if cfg.split_sentences else lines:
            sink.add(batch)
        digest = stream.sha256
    return sel.result(name=corpus_label(path), path=path, sha256=digest, fmt=fmt, column=column)
