"""Test oracle: the read-everything corpus reader that ``load_sentences`` replaced.

The pre-streaming implementation of ``normvar_core.pipeline.corpus.read`` (commit 234b18c), kept
verbatim except for its name: file bytes, decoded text and every record in memory, then one
``rng.random(n)`` draw over all non-empty sentences. The streamed reader must select exactly
what this selects, and fail with the same messages.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import zlib
from pathlib import Path

import numpy as np

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus.formats import corpus_format, resolve_corpus_path
from normvar_core.pipeline.corpus.select import CorpusText


def brute_load(cfg: RunConfig, data_dir=None) -> CorpusText:
    """Read all of ``cfg.corpus`` at once, then select (the pre-streaming implementation)."""
    path = resolve_corpus_path(cfg.corpus, data_dir)
    fmt = corpus_format(path)
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if not raw.strip():
        raise NormvarError(f"corpus file is empty: {path.name}", fix="pass a file with one sentence a line")
    column = None
    if fmt == ".parquet":
        records, column = _parquet_records(raw, path, cfg.text_column)
    else:
        text = _decode(_gunzip(raw, path) if fmt == ".txt.gz" else raw, path)
        if fmt in (".txt", ".txt.gz"):
            records = _paragraphs(text) if cfg.split_sentences else text.splitlines()
        elif fmt == ".jsonl":
            records, column = _jsonl_records(text, path, cfg.text_column)
        else:
            records, column = _csv_records(text, path, cfg.text_column)
    if cfg.split_sentences:
        records = _split(records)
    return _select(records, cfg, name=_stem(path), path=path, sha256=digest, fmt=fmt, column=column)


# ----------------------------------------------------------------------------- selection
def _select(records: list[str], cfg: RunConfig, *, name, path, sha256, fmt, column) -> CorpusText:
    sents = [r.strip() for r in records]
    n_read = len(sents)
    nonempty = [s for s in sents if s]
    n_empty = n_read - len(nonempty)
    if not nonempty:
        raise NormvarError(f"corpus {path.name} holds no text", fix="pass a file with one sentence a line")
    words = np.fromiter((len(s.split()) for s in nonempty), dtype=np.int64, count=len(nonempty))
    short = words < cfg.max_words if cfg.max_words > 0 else np.ones(len(nonempty), bool)
    if cfg.sample_frac < 1.0:
        drawn = np.random.default_rng(cfg.seed).random(len(nonempty)) < cfg.sample_frac
    else:
        drawn = np.ones(len(nonempty), bool)
    keep = np.flatnonzero(short & drawn)
    n_capped = 0
    if cfg.max_sentences is not None and len(keep) > cfg.max_sentences:
        n_capped = len(keep) - int(cfg.max_sentences)
        keep = keep[: int(cfg.max_sentences)]
    n_too_long = int((~short).sum())
    n_sampled_out = int((short & ~drawn).sum())
    if len(keep) == 0:
        raise NormvarError(
            f"no sentences left after filtering {path.name}: {len(nonempty)} read, {n_too_long} with "
            f">= {cfg.max_words} words, {n_sampled_out} sampled out",
            fix="raise --max-words (0 = no limit) or --sample-frac",
        )
    return CorpusText(
        sentences=[nonempty[i] for i in keep],
        name=name,
        path=path,
        sha256=sha256,
        n_read=n_read,
        n_kept=len(keep),
        n_too_long=n_too_long,
        n_empty=n_empty,
        n_sampled_out=n_sampled_out,
        n_capped=n_capped,
        sentence_lengths=words[keep],
        text_column=column,
        format=fmt,
    )


def _stem(path: Path) -> str:
    name = path.name
    for ext in (".txt.gz", ".jsonl", ".csv", ".parquet", ".txt"):
        if name.lower().endswith(ext):
            return name[: -len(ext)]
    return path.stem


# ----------------------------------------------------------------------------- decoding
def _gunzip(raw: bytes, path: Path) -> bytes:
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise NormvarError(
            f"corpus {path.name} is not a valid gzip file ({exc})",
            fix="re-compress it with gzip, or pass the plain .txt",
        ) from None


def _decode(data: bytes, path: Path) -> str:
    """Strict UTF-8 (a BOM is dropped); NUL bytes mean a binary file."""
    nul = data.find(b"\x00")
    if nul >= 0:
        raise NormvarError(
            f"corpus {path.name} looks binary (NUL byte at byte offset {nul})",
            fix="pass a UTF-8 text file (one sentence a line), .jsonl, .csv or .parquet",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = " of the decompressed text" if path.name.lower().endswith(".gz") else ""
        raise NormvarError(
            f"corpus {path.name} is not UTF-8: invalid byte 0x{data[exc.start]:02x} at byte offset {exc.start}{where}",
            fix=f"convert it to UTF-8, e.g. iconv -f latin1 -t utf-8 {path.name} > fixed.txt",
        ) from None


def _paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs, each joined to one line (hard-wrapped text)."""
    paras, cur = [], []
    for line in text.splitlines():
        if line.strip():
            cur.append(line.strip())
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    if cur:
        paras.append(" ".join(cur))
    return paras


def _split(records: list[str]) -> list[str]:
    from nupunkt import sent_tokenize

    out: list[str] = []
    for r in records:
        if r and r.strip():
            out.extend(sent_tokenize(r.strip()))
        else:
            out.append("")
    return out


# ----------------------------------------------------------------------------- tables
def _pick_column(available: list[str], string_cols: list[str], wanted: str | None, path: Path) -> str:
    if wanted:
        if wanted not in available:
            raise NormvarError(
                f"column {wanted!r} not in {path.name}; columns: {', '.join(available)}",
                fix=f"pass --text-column with one of: {', '.join(string_cols or available)}",
            )
        return wanted
    if len(string_cols) == 1:
        return string_cols[0]
    raise NormvarError(
        f"{path.name} has {len(string_cols)} text columns ({', '.join(string_cols) or 'none'}); "
        f"columns: {', '.join(available)}",
        fix="pass --text-column NAME",
    )


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return ""
    return v if isinstance(v, str) else str(v)


def _jsonl_records(text: str, path: Path, wanted: str | None) -> tuple[list[str], str]:
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise NormvarError(
                f"{path.name} line {lineno} is not JSON ({exc.msg})", fix="write one JSON object per line"
            ) from None
        if not isinstance(obj, dict):
            raise NormvarError(
                f"{path.name} line {lineno} is not a JSON object", fix='write one object per line, e.g. {"text": "..."}'
            )
        rows.append(obj)
    if not rows:
        raise NormvarError(f"corpus file is empty: {path.name}", fix="pass a file with one JSON object per line")
    available = list(dict.fromkeys(k for r in rows for k in r))
    string_cols = [k for k in available if any(isinstance(r.get(k), str) for r in rows)]
    col = _pick_column(available, string_cols, wanted, path)
    return [r.get(col) if isinstance(r.get(col), str) else "" for r in rows], col  # non-strings skipped


def _csv_records(text: str, path: Path, wanted: str | None) -> tuple[list[str], str]:
    import pandas as pd

    try:
        df = pd.read_csv(io.StringIO(text), keep_default_na=False, dtype=str)
        typed = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise NormvarError(
            f"{path.name} is not a readable CSV file ({str(exc).splitlines()[0]})",
            fix="write a header row and quote fields that contain commas",
        ) from None
    available = [str(c) for c in df.columns]
    # text: some non-empty cell that pandas does not parse as a number or a boolean (whole file);
    # a file with a header only: every column
    string_cols = [
        str(c) for c in typed.columns if not len(typed) or any(isinstance(v, str) for v in typed[c].dropna())
    ]
    col = _pick_column(available, string_cols, wanted, path)
    return [_cell(v) for v in df[col].tolist()], col


def _parquet_records(raw: bytes, path: Path, wanted: str | None) -> tuple[list[str], str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(raw))
    except (pa.ArrowInvalid, OSError) as exc:
        raise NormvarError(
            f"{path.name} is not a readable Parquet file ({str(exc).splitlines()[0]})",
            fix="write it with pandas.DataFrame.to_parquet or pyarrow",
        ) from None
    available = list(table.column_names)
    string_cols = [
        f.name
        for f in table.schema
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type) or pa.types.is_string_view(f.type)
    ]
    col = _pick_column(available, string_cols, wanted, path)
    return [_cell(v) for v in table.column(col).to_pylist()], col
