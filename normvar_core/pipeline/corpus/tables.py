"""Tables (.jsonl, .csv, .parquet): stream the cells of the text column into a ``Selection``.

The text column is ``text_column``, or the one text column when there is exactly one (which
needs the whole file, so without ``text_column`` a .jsonl/.csv file is read twice: once for its
columns, once for the cells). A column that is not text (numbers, booleans, only nulls) is
refused. What counts as text is what a whole-file read gives: in JSONL a key with some string
value (its other values — numbers, booleans, objects — are skipped, counted as ``n_not_text`` and
printed by ``compute``); in CSV some non-empty cell is neither a number nor a boolean as pandas
parses them (empty cells are missing, so numbers with blanks are numbers, not text);
in Parquet the type is a string type (or, when named, a dictionary of strings).

Errors come in the whole-file reader's order: byte-level errors (``CorpusStream``) > a bad
JSON line / unparsable CSV / unreadable Parquet > an empty table > column errors > no text.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus.select import Selection
from normvar_core.pipeline.corpus.stream import CorpusStream

CSV_ROWS = 20_000
PARQUET_ROWS = 20_000


def select_table(path: Path, fmt: str, wanted: str | None, sel: Selection) -> tuple[str, str]:
    """Feed the text column of ``path`` to ``sel``; return (column, sha256 of the file)."""
    read = {".jsonl": _jsonl, ".csv": _csv, ".parquet": _parquet}[fmt]
    return read(path, wanted, sel)


def cell(v) -> str:
    """A cell as text: None (null) -> ''."""
    return "" if v is None else v if isinstance(v, str) else str(v)


def pick_column(available: list[str], text_cols: list[str], wanted: str | None, path: Path,
                named_ok: list[str] | None = None) -> str:
    """``wanted`` (which must exist and hold text), else the only text column."""
    if wanted:
        if wanted not in available:
            raise NormvarError(f"column {wanted!r} not in {path.name}; columns: {', '.join(available)}",
                               fix=f"pass --text-column with one of: {', '.join(text_cols or available)}")
        if wanted not in (named_ok if named_ok is not None else text_cols):
            others = ", ".join(text_cols)
            raise NormvarError(f"column {wanted!r} of {path.name} is not text (numbers, booleans or only nulls)",
                               fix=f"pass --text-column with a text column: {others}" if others
                               else "write the sentences as a column of strings")
        return wanted
    if len(text_cols) == 1:
        return text_cols[0]
    if not text_cols:  # --text-column cannot help: nothing holds strings
        example = _EXAMPLE.get(path.suffix.lower(), "a column of text")
        raise NormvarError(f"{path.name} has no text column: none of its columns ({', '.join(available) or 'none'}) "
                           "holds strings", fix=f"write the sentences as strings in one column ({example})")
    raise NormvarError(
        f"{path.name} has {len(text_cols)} text columns ({', '.join(text_cols) or 'none'}); "
        f"columns: {', '.join(available)}",
        fix="pass --text-column NAME")


_EXAMPLE = {".jsonl": 'one object a line, e.g. {"text": "A sentence."}', ".csv": "a header row and a column of text",
            ".parquet": "a string column"}


def _same_file(first: str, second: str, path: Path) -> None:
    if first != second:
        raise NormvarError(f"corpus {path.name} changed while it was read",
                           fix="run again once the file is no longer being written")


# ----------------------------------------------------------------------------- JSONL
class _JsonColumns:
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


def _jsonl_rows(stream: CorpusStream, path: Path) -> Iterator[list[dict]]:
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
                err = NormvarError(f"{path.name} line {lineno} is not JSON ({exc.msg})",
                                   fix="write one JSON object per line")
                break
            if not isinstance(obj, dict):
                err = NormvarError(f"{path.name} line {lineno} is not a JSON object",
                                   fix='write one object per line, e.g. {"text": "..."}')
                break
            rows.append(obj)
        if err is not None:
            for _ in batches:
                pass
            raise err
        yield rows


def _json_cells(rows: list[dict], col: str, sel: Selection) -> None:
    """The string values of ``col`` to ``sel``; a value that is not a string (3, true, {...}) is
    skipped like an empty cell and counted in ``sel.n_not_text``, a null (or missing) one in ``sel.n_null``."""
    values = [r.get(col) for r in rows]
    sel.n_not_text += sum(v is not None and not isinstance(v, str) for v in values)
    sel.n_null += sum(v is None for v in values)
    sel.add([v if isinstance(v, str) else "" for v in values])


def _jsonl(path: Path, wanted: str | None, sel: Selection) -> tuple[str, str]:
    cols = _JsonColumns()
    first = CorpusStream(path)
    for rows in _jsonl_rows(first, path):
        cols.add(rows)
        if wanted:
            _json_cells(rows, wanted, sel)
    col = cols.pick(wanted, path)
    if not wanted:
        second = CorpusStream(path)
        for rows in _jsonl_rows(second, path):
            _json_cells(rows, col, sel)
        _same_file(first.sha256, second.sha256, path)
    return col, first.sha256


# ----------------------------------------------------------------------------- CSV
class _TextFile:
    """A read(n) file over text blocks, for pandas."""

    def __init__(self, blocks: Iterator[str]):
        self._blocks = blocks
        self._buf = ""

    def read(self, n: int = -1) -> str:
        while n is None or n < 0 or len(self._buf) < n:
            block = next(self._blocks, None)
            if block is None:
                break
            self._buf += block
        if n is None or n < 0:
            n = len(self._buf)
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def drain(self) -> None:
        for _ in self._blocks:
            pass


def _csv_chunks(stream: CorpusStream, path: Path, **kw) -> Iterator:
    import pandas as pd

    src = _TextFile(stream.text_blocks())
    try:
        yield from pd.read_csv(src, keep_default_na=False, chunksize=CSV_ROWS, **kw)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        src.drain()  # byte-level errors anywhere come first
        raise NormvarError(f"{path.name} is not a readable CSV file ({str(exc).splitlines()[0]})",
                           fix="write a header row and quote fields that contain commas") from None
    src.drain()


def _csv_kind(series) -> str:
    """'text' when a non-empty cell is not a number or a boolean; else 'number', 'bool' or 'null'
    (cells read with only the empty cell as missing, so a column of numbers with blanks is numbers)."""
    import pandas as pd

    vals = series.dropna()
    if not len(vals):
        return "null"
    if pd.api.types.is_bool_dtype(vals):
        return "bool"
    if pd.api.types.is_numeric_dtype(vals):
        return "number"
    if any(isinstance(v, str) for v in vals):
        return "text"
    return "bool" if all(isinstance(v, (bool, np.bool_)) for v in vals) else "number"


def _csv(path: Path, wanted: str | None, sel: Selection) -> tuple[str, str]:
    first = CorpusStream(path)
    available: list[str] = []
    kinds: dict[str, set[str]] = {}
    for chunk in _csv_chunks(first, path, na_values=[""]):
        available = [str(c) for c in chunk.columns]
        if len(chunk) or not kinds:  # a header-only file: one empty chunk, every column text
            for c in chunk.columns:
                kinds.setdefault(str(c), set()).add(_csv_kind(chunk[c]) if len(chunk) else "text")
    # as whole-file inference: text if any chunk is text, or booleans mixed with numbers (read as text)
    text = [c for c in available if "text" in kinds.get(c, {"text"}) or {"bool", "number"} <= kinds.get(c, set())]
    col = pick_column(available, text, wanted, path)
    second = CorpusStream(path)
    for chunk in _csv_chunks(second, path, dtype=str):
        sel.add([cell(v) for v in chunk[col].tolist()])
    _same_file(first.sha256, second.sha256, path)
    return col, first.sha256


# ----------------------------------------------------------------------------- Parquet
def _parquet(path: Path, wanted: str | None, sel: Selection) -> tuple[str, str]:
    sha = CorpusStream(path).finish()
    pf = parquet_open(path, path)
    try:
        col = parquet_column(pf, wanted, path)
        parquet_cells(pf, col, sel, path)
    finally:
        pf.close()
    return col, sha


def _unreadable(exc, path: Path) -> NormvarError:
    return NormvarError(f"{path.name} is not a readable Parquet file ({str(exc).splitlines()[0]})",
                        fix="write it with pandas.DataFrame.to_parquet or pyarrow")


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
        for batch in pf.iter_batches(batch_size=PARQUET_ROWS, row_groups=row_groups, columns=[col],
                                     use_threads=False):
            sel.add([cell(v) for v in batch.column(0).to_pylist()])
    except (pa.ArrowInvalid, OSError) as exc:
        raise _unreadable(exc, path) from None
