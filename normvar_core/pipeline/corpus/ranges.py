"""Byte-range corpus shares: the driver cuts the raw file, the workers parse, select and tokenize.

What travels where (the Ray executor, ``execute.on_ray``):

- **Driver** (``cut_ranges``): streams the file once with ``CorpusStream`` — sha256 of its bytes,
  emptiness and gzip checks, .gz decompressed — and cuts the (decompressed) bytes into at most ``k``
  ranges of about equal size *at record boundaries*: right after a ``\\n`` byte (always a line end
  of ``str.splitlines``, never inside a UTF-8 sequence); with ``split_sentences`` right after an
  empty line (``\\n\\n`` or ``\\n\\r\\n``), so no paragraph spans two ranges. It never decodes or parses
  them. A Parquet file's share is a list of row groups over the file's bytes (one object for all).
  CSV is not cut (a quoted cell may hold a newline, so a byte range cannot be known to start a row
  without parsing everything before it): the driver reads CSV itself and shares its sentences.
- **Worker, phase 1** (``parse_range``): decodes and parses its range with the readers' own code
  (``CorpusStream`` over the bytes, ``formats.jsonl_rows``, ``formats.parquet_cells``, the
  sentence splitter) into the records ``Selection`` takes; returns how many are non-empty (and, for
  JSONL without ``text_column``, the keys it saw, which the driver merges to pick the column).
- **Driver** (``skips``): the non-empty records before each range (prefix sums).
- **Worker, phase 2** (``select_range``): ``Selection(cfg, skip=s, capped=False)`` — the generator
  advanced past the ``s`` earlier uniforms (``PCG64.advance``), so every record gets the uniform the
  whole-file pass gives it; returns how many records it picked.
- **Driver** (``rooms``): the ``max_sentences`` cap from the running totals: range j keeps
  ``min(picked_j, max(cap - Σ_{i<j} picked_i, 0))``.
- **Worker, phase 3** (``keep_range``): cuts its selection to its room; then tokenizes the kept
  sentences and returns them with their encoding (``shares.encoded_arrays``).
- **Driver** (``merge_selections``): the per-range counts summed, the kept sentences concatenated in
  range order, through ``Selection.result`` (same errors): the ``CorpusText`` of ``load_sentences``.

A range that fails to decode or parse raises in its worker; the driver then reads the file itself
with ``load_sentences``, which raises the whole-file reader's error (its precedence and offsets).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from normvar_core.config import RunConfig
from normvar_core.corpus_formats import corpus_label
from normvar_core.pipeline.corpus.dataset import open_dataset
from normvar_core.pipeline.corpus.formats import (
    JsonColumns,
    SentenceSplitter,
    corpus_format,
    json_cells,
    jsonl_rows,
    paragraphs,
    parquet_cells,
    parquet_column,
    parquet_open,
    resolve_corpus_path,
)
from normvar_core.pipeline.corpus.select import KEEP_TOO_LONG, CorpusText, Selection
from normvar_core.pipeline.corpus.stream import CorpusStream

LINE_FORMATS = (".txt", ".txt.gz", ".jsonl")


class _Records:
    """A ``Selection`` stand-in that only collects the records (and JSONL's non-text count)."""

    def __init__(self):
        self.records: list[str] = []
        self.n_not_text = self.n_null = 0

    def add(self, records: list[str]) -> None:
        self.records.extend(records)


def cut_ranges(cfg: RunConfig, k: int, data_dir=None, put=None) -> dict:
    """The driver's side: {"path", "format", "sha256", "ranges": [bytes ...]} for .txt/.txt.gz/.jsonl,
    {"path", "format", "sha256", "data": bytes, "row_groups": [[int ...] ...], "column"} for .parquet.
    ``put(bytes)``: where each range goes as soon as it is cut (Ray: ``ray.put``; its result is kept
    in place of the bytes), so the driver holds one range at a time."""
    put = put or (lambda b: b)
    path = resolve_corpus_path(cfg.corpus, data_dir)
    fmt = corpus_format(path)
    if fmt not in (*LINE_FORMATS, ".parquet"):
        raise ValueError(f"{fmt} is not cut into byte ranges")
    stream = CorpusStream(path, gzipped=fmt == ".txt.gz")
    if fmt == ".parquet":
        import pyarrow as pa

        data = b"".join(stream.raw_blocks())
        pf = parquet_open(pa.BufferReader(data), path)
        try:
            column = parquet_column(pf, cfg.text_column, path)
            n = pf.num_row_groups
        finally:
            pf.close()
        groups = [g.tolist() for g in np.array_split(np.arange(n), max(1, min(int(k), n))) if g.size]
        return dict(path=path, format=fmt, sha256=stream.sha256, data=put(data), row_groups=groups, column=column)
    seps = (b"\n\n", b"\n\r\n") if fmt != ".jsonl" and cfg.split_sentences else (b"\n",)
    target = max(1, _size(path, fmt) // max(int(k), 1) + 1)
    ranges: list = []
    buf = bytearray()
    for block in stream.raw_blocks():
        buf += block
        while len(ranges) < int(k) - 1 and len(buf) >= target:
            cut = _boundary(buf, seps, target)
            if not cut:
                break
            ranges.append(put(bytes(buf[:cut])))
            del buf[:cut]
    if buf or not ranges:
        ranges.append(put(bytes(buf)))
    return dict(path=path, format=fmt, sha256=stream.sha256, ranges=ranges)


def _boundary(buf: bytearray, seps: tuple, target: int) -> int:
    """The end of the last separator in the first ``target`` bytes, else of the first after them, else 0."""
    before = [buf.rfind(s, 0, target) + len(s) for s in seps if buf.rfind(s, 0, target) >= 0]
    if before:
        return max(before)
    return min((buf.find(s, target) + len(s) for s in seps if buf.find(s, target) >= 0), default=0)


def _size(path: Path, fmt: str) -> int:
    """The (decompressed) size: a .gz file's ISIZE trailer (its size mod 2^32), else the file size."""
    size = path.stat().st_size
    if fmt == ".txt.gz" and size >= 4:
        with open(path, "rb") as fh:
            fh.seek(-4, 2)
            return max(int.from_bytes(fh.read(4), "little"), size)
    return size


def parse_range(cfg: RunConfig, share: dict, column: str | None = None) -> tuple[list[str], dict]:
    """Phase 1 (a worker): the records of one range in file order, and {"n_nonempty", "n_not_text", "n_null",
    "keys" (JSONL without a column: {key: [some value is a string, every value is str/null]}), "rows"}.
    ``share``: {"format", "name", "data" (bytes), "index"} plus "row_groups" for Parquet."""
    fmt, path, data = share["format"], Path(share["name"]), share["data"]
    sink = _Records()
    target = SentenceSplitter(sink) if cfg.split_sentences else sink  # type: ignore[arg-type]  # a records sink  # as ``load_sentences``, every format
    info: dict = {"keys": {}, "rows": 0}
    if fmt == ".parquet":
        import pyarrow as pa

        pf = parquet_open(pa.BufferReader(data), path)
        try:
            parquet_cells(pf, column, target, path, row_groups=list(share["row_groups"]))  # type: ignore[arg-type]  # a parquet share has its column
        finally:
            pf.close()
    elif fmt == ".dataset":  # the actor reads its own shard of the dataset (``dataset.dataset_cut``)
        spec = json.loads(bytes(data))
        open_dataset(cfg, hash_files=False).feed(target, spec["index"], spec["num"])  # the driver hashed the files
    elif fmt == ".jsonl":
        cols = JsonColumns()
        for rows in jsonl_rows(CorpusStream(path, data=data, at_start=share["index"] == 0), path):
            cols.add(rows)
            if column:
                json_cells(rows, column, target)  # type: ignore[arg-type]  # a records sink
        info = {"keys": cols.keys, "rows": cols.rows}
    else:
        lines = CorpusStream(path, data=data, at_start=share["index"] == 0).lines()
        for batch in paragraphs(lines) if cfg.split_sentences else lines:
            target.add(batch)
    n_nonempty = sum(1 for r in sink.records if r.strip())
    return sink.records, dict(info, n_nonempty=n_nonempty, n_not_text=sink.n_not_text, n_null=sink.n_null)


def jsonl_column(infos: list[dict], wanted: str | None, path: Path) -> str:
    """The text column from the ranges' keys, as the whole-file reader (``tables``) picks it."""
    cols = JsonColumns()
    for info in infos:
        cols.rows += int(info["rows"])
        for key, (some, every) in info["keys"].items():
            flags = cols.keys.setdefault(key, [False, True])
            flags[0], flags[1] = flags[0] or some, flags[1] and every
    return cols.pick(wanted, path)


def skips(n_nonempty: list[int]) -> list[int]:
    """Non-empty records before each range: the uniforms its generator skips."""
    return np.concatenate([[0], np.cumsum(n_nonempty, dtype=np.int64)[:-1]]).astype(int).tolist()


def select_range(cfg: RunConfig, records: list[str], skip: int) -> Selection:
    """Phase 2 (a worker): the range's selection, uncapped, with the whole file's uniforms."""
    sel = Selection(cfg, skip=skip, capped=False)
    sel.add(records)
    return sel


def rooms(cfg: RunConfig, picked: list[int]) -> list[int]:
    """How many of its picked sentences each range keeps under ``max_sentences`` (in range order)."""
    if cfg.max_sentences is None:
        return [int(p) for p in picked]
    before = np.concatenate([[0], np.cumsum(picked, dtype=np.int64)[:-1]])
    return np.minimum(picked, np.maximum(int(cfg.max_sentences) - before, 0)).astype(int).tolist()


def keep_range(sel: Selection, room: int) -> dict:
    """Phase 3 (a worker): the selection cut to ``room`` sentences; its counts, kept sentences,
    their word counts and its first too-long examples (plain values, for the driver)."""
    lengths = sel.word_lengths()
    room = min(int(room), len(sel.kept))
    # "word_lengths", not "lengths": an actor's part also carries its encoding's token lengths (``actor_keep``)
    return {
        "sentences": sel.kept[:room],
        "word_lengths": lengths[:room],
        "n_capped": len(sel.kept) - room,
        "n_read": sel.n_read,
        "n_empty": sel.n_empty,
        "n_too_long": sel.n_too_long,
        "n_sampled_out": sel.n_sampled_out,
        "too_long": list(sel.too_long),
    }


def merge_selections(
    cfg: RunConfig, cut: dict, parts: list[dict], *, n_not_text: int = 0, n_null: int = 0, column: str | None = None
) -> CorpusText:
    """The driver's ``CorpusText`` from the ranges' ``keep_range`` parts, in range order."""
    sel = Selection(cfg)
    for p in parts:
        for k in ("n_read", "n_empty", "n_too_long", "n_sampled_out", "n_capped"):
            setattr(sel, k, getattr(sel, k) + int(p[k]))
        sel.kept.extend(p["sentences"])
        sel.word_blocks.append(np.asarray(p["word_lengths"], np.int64))
        sel.too_long.extend(p["too_long"][: KEEP_TOO_LONG - len(sel.too_long)])
    sel.n_not_text, sel.n_null = int(n_not_text), int(n_null)
    path = Path(cut["path"])
    return sel.result(
        name=cut.get("name") or corpus_label(path),
        path=path,
        sha256=cut["sha256"],
        fmt=cut["format"],
        column=column,
        dataset=cut.get("dataset"),
    )


def shares_of(cut: dict) -> list[dict]:
    """The worker inputs of a ``cut_ranges`` result (what goes into the object store)."""
    name = Path(cut["path"]).name
    if cut["format"] == ".parquet":
        return [
            dict(format=".parquet", name=name, data=cut["data"], index=i, row_groups=g)
            for i, g in enumerate(cut["row_groups"])
        ]
    return [dict(format=cut["format"], name=name, data=r, index=i) for i, r in enumerate(cut["ranges"])]


__all__ = [
    "cut_ranges",
    "shares_of",
    "parse_range",
    "jsonl_column",
    "skips",
    "select_range",
    "rooms",
    "keep_range",
    "merge_selections",
    "LINE_FORMATS",
]
