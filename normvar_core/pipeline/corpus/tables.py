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

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus.formats import (
    JsonColumns,
    cell,
    json_cells,
    jsonl_rows,
    parquet_cells,
    parquet_column,
    parquet_open,
    pick_column,
)
from normvar_core.pipeline.corpus.select import Selection
from normvar_core.pipeline.corpus.stream import CorpusStream

CSV_ROWS = 20_000


def select_table(path: Path, fmt: str, wanted: str | None, sel: Selection) -> tuple[str, str]:
    """Feed the text column of ``path`` to ``sel``; return (column, sha256 of the file)."""
    read = {".jsonl": _jsonl, ".csv": _csv, ".parquet": _parquet}[fmt]
    return read(path, wanted, sel)


def _same_file(first: str, second: str, path: Path) -> None:
    if first != second:
        raise NormvarError(
            f"corpus {path.name} changed while it was read", fix="run again once the file is no longer being written"
        )


# ----------------------------------------------------------------------------- JSONL
def _jsonl(path: Path, wanted: str | None, sel: Selection) -> tuple[str, str]:
    cols = JsonColumns()
    first = CorpusStream(path)
    for rows in jsonl_rows(first, path):
        cols.add(rows)
        if wanted:
            json_cells(rows, wanted, sel)
    col = cols.pick(wanted, path)
    if not wanted:
        second = CorpusStream(path)
        for rows in jsonl_rows(second, path):
            json_cells(rows, col, sel)
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
        raise NormvarError(
            f"{path.name} is not a readable CSV file ({str(exc).splitlines()[0]})",
            fix="write a header row and quote fields that contain commas",
        ) from None
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
