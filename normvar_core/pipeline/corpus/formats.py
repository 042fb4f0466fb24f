"""Corpus formats, record by record: what the whole-file reader (``read``, ``tables``, ``dataset``) and the
byte-range reader (``ranges``: the Ray workers) share, so both parse a record the same way.

* the file: ``resolve_corpus_path`` (a path, or a name in ``<data dir>/corpora``), ``corpus_format`` (its suffix);
* text: ``paragraphs`` (blank-line separated, joined: hard-wrapped text) and ``SentenceSplitter``
  (``split_sentences``: nupunkt, offline);
* tables: ``cell``, ``pick_column`` (the text column and its one-line errors); JSONL's ``jsonl_rows``,
  ``JsonColumns`` and ``json_cells``; Parquet's ``parquet_open``, ``parquet_column`` and ``parquet_cells``.

Reading order in the corpus stage: ``stream`` (bytes -> lines) and ``select`` (records -> the run's sentences)
below this module; ``tables``, ``read``, ``dataset`` and ``ranges`` above it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from normvar_core.corpus_formats import CORPUS_SUFFIXES, corpus_suffix
from normvar_core.datadir import DEFAULT_CORPUS, DataDir
from normvar_core.destination import check_regular_input
from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus.select import Selection
from normvar_core.pipeline.corpus.stream import CorpusStream

PARQUET_ROWS = 20_000
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
        raise NormvarError(
            f"corpus file not found: {corpus}", fix="check the path (omit --corpus for the shipped novels)"
        )
    if p.is_dir():
        raise NormvarError(f"corpus path is a directory: {corpus}", fix=f"pass one file ({_SUPPORTED})")
    return check_regular_input(p, "--corpus", f"pass one regular file ({_SUPPORTED})")


def corpus_format(path: Path) -> str:
    """The supported suffix of ``path`` ('.txt.gz', '.csv', ...), else a NormvarError."""
    fmt = corpus_suffix(path.name)
    if fmt is None:
        raise NormvarError(f"unsupported corpus file type: {path.name}", fix=f"use one of: {_SUPPORTED}")
    return fmt


def paragraphs(batches: Iterator[list[str]]) -> Iterator[list[str]]:
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


class SentenceSplitter:
    """Splits each record into sentences (nupunkt) before passing them on; empty records stay empty."""

    def __init__(self, sel: Selection):
        from nupunkt import sent_tokenize

        self._split = sent_tokenize
        self._sel = sel

    # JSONL cells that were not strings / were null or missing: counted on the selection (``json_cells``)
    n_not_text = property(lambda self: self._sel.n_not_text, lambda self, v: setattr(self._sel, "n_not_text", v))
    n_null = property(lambda self: self._sel.n_null, lambda self, v: setattr(self._sel, "n_null", v))

    def add(self, records: list[str]) -> None:
        out: list[str] = []
        for r in records:
            if r and r.strip():
                out.extend(self._split(r.strip()))  # type: ignore[arg-type]  # strings (no scores asked)
            else:
                out.append("")
        self._sel.add(out)


# ----------------------------------------------------------------------------- tables
def cell(v) -> str:
    """A cell as text: None (null) -> ''."""
    return "" if v is None else v if isinstance(v, str) else str(v)


def pick_column(
    available: list[str], text_cols: list[str], wanted: str | None, path: Path, named_ok: list[str] | None = None
) -> str:
    """``wanted`` (which must exist and hold text), else the only text column."""
    if wanted:
        if wanted not in available:
            raise NormvarError(
                f"column {wanted!r} not in {path.name}; columns: {', '.join(available)}",
                fix=f"pass --text-column with one of: {', '.join(text_cols or available)}",
            )
        if wanted not in (named_ok if named_ok is not None else text_cols):
            others = ", ".join(text_cols)
            raise NormvarError(
                f"column {wanted!r} of {path.name} is not text (numbers, booleans or only nulls)",
                fix=f"pass --text-column with a text column: {others}"
                if others
                else "write the sentences as a column of strings",
            )
        return wanted
    if len(text_cols) == 1:
        return text_cols[0]
    if not text_cols:  # --text-column cannot help: nothing holds strings
        example = _EXAMPLE.get(path.suffix.lower(), "a column of text")
        raise NormvarError(
            f"{path.name} has no text column: none of its columns ({', '.join(available) or 'none'}) holds strings",
            fix=f"write the sentences as strings in one column ({example})",
        )
    raise NormvarError(
        f"{path.name} has {len(text_cols)} text columns ({', '.join(text_cols) or 'none'}); "
        f"columns: {', '.join(available)}",
        fix="pass --text-column NAME",
    )


_EXAMPLE = {
    ".jsonl": 'one object a line, e.g. {"text": "A sentence."}',
    ".csv": "a header row and a column of text",
    ".parquet": "a string column",
}


# ----------------------------------------------------------------------------- JSONL
class JsonColumns:
    """Keys in first-seen order; a key holds text when one of its values is a string."""

    def __init__(self):
        self.rows = 0
        self.keys: dict[str, list[bool]] = {}  # key -> [some value is a string, every value is str/null]

    def add(self, rows: list[dict]) -> None:
        self.rows += len(rows)
        for r in rows:
            for k, v in r.items():
                flags = self.keys.setdefault(k, [False, True])
                if isinstance(v, str):
                    flags[0] = True
                elif v is not None:
                    flags[1] = False

    def pick(self, wanted: str | None, path: Path) -> str:
        if not self.rows:
            raise NormvarError(f"corpus file is empty: {path.name}", fix="pass a file with one JSON object per line")
        text = [k for k, (some, _) in self.keys.items() if some]
        return pick_column(list(self.keys), text, wanted, path)


def jsonl_rows(stream: CorpusStream, path: Path) -> Iterator[list[dict]]:
    """Batches of JSON objects; a bad line raises only once the bytes after it are checked."""
    lineno = 0
    batches = stream.lines()
    for lines in batches:
        rows, err = [], None
        for line in lines:
            lineno += 1
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                err = NormvarError(
                    f"{path.name} line {lineno} is not JSON ({exc.msg})", fix="write one JSON object per line"
                )
                break
            if not isinstance(obj, dict):
                err = NormvarError(
                    f"{path.name} line {lineno} is not a JSON object",
                    fix='write one object per line, e.g. {"text": "..."}',
                )
                break
            rows.append(obj)
        if err is not None:
            for _ in batches:
                pass
            raise err
        yield rows


def json_cells(rows: list[dict], col: str, sel: Selection) -> None:
    """The string values of ``col`` to ``sel``; a value that is not a string (3, true, {...}) is
    skipped like an empty cell and counted in ``sel.n_not_text``, a null (or missing) one in ``sel.n_null``."""
    values = [r.get(col) for r in rows]
    sel.n_not_text += sum(v is not None and not isinstance(v, str) for v in values)
    sel.n_null += sum(v is None for v in values)
    sel.add([v if isinstance(v, str) else "" for v in values])


# ----------------------------------------------------------------------------- Parquet
def _unreadable(exc, path: Path) -> NormvarError:
    return NormvarError(
        f"{path.name} is not a readable Parquet file ({str(exc).splitlines()[0]})",
        fix="write it with pandas.DataFrame.to_parquet or pyarrow",
    )


def parquet_open(source, path: Path):
    """``pyarrow.parquet.ParquetFile`` over ``source`` (a path, or a ``pyarrow.BufferReader`` of its bytes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(source, pre_buffer=False)  # pre-buffered ranges stayed allocated: +40 MB at 2M rows
    except (pa.ArrowInvalid, OSError) as exc:
        raise _unreadable(exc, path) from None


def parquet_column(pf, wanted: str | None, path: Path) -> str:
    """The text column of an open Parquet file (string types; when named, a dictionary of strings too)."""
    import pyarrow as pa

    def is_string(t) -> bool:
        return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)

    try:
        schema = pf.schema_arrow
    except (pa.ArrowInvalid, OSError) as exc:
        raise _unreadable(exc, path) from None
    text = [f.name for f in schema if is_string(f.type)]
    named_ok = text + [f.name for f in schema if pa.types.is_dictionary(f.type) and is_string(f.type.value_type)]
    return pick_column(list(schema.names), text, wanted, path, named_ok=named_ok)


def parquet_cells(pf, col: str, sel, path: Path, row_groups: list[int] | None = None) -> None:
    """The cells of ``col`` (of ``row_groups``, default all) to ``sel.add`` in file order."""
    import pyarrow as pa

    try:
        for batch in pf.iter_batches(batch_size=PARQUET_ROWS, row_groups=row_groups, columns=[col], use_threads=False):
            sel.add([cell(v) for v in batch.column(0).to_pylist()])
    except (pa.ArrowInvalid, OSError) as exc:
        raise _unreadable(exc, path) from None


__all__ = [
    "resolve_corpus_path",
    "corpus_format",
    "paragraphs",
    "SentenceSplitter",
    "cell",
    "pick_column",
    "JsonColumns",
    "jsonl_rows",
    "json_cells",
    "parquet_open",
    "parquet_column",
    "parquet_cells",
    "PARQUET_ROWS",
]
