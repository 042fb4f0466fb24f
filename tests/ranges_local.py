"""``select_locally``: every phase of the byte-range corpus read (``pipeline.corpus.ranges``) in one
process, range by range — what the Ray workers and the driver do between them — for the tests that
compare it with the whole-file reader."""

from __future__ import annotations

from pathlib import Path

from normvar_core.config import RunConfig
from normvar_core.pipeline.corpus.ranges import (
    jsonl_column,
    keep_range,
    merge_selections,
    parse_range,
    rooms,
    select_range,
    shares_of,
    skips,
)
from normvar_core.pipeline.corpus.select import CorpusText


def select_locally(cfg: RunConfig, cut: dict) -> CorpusText:
    """The ``CorpusText`` of ``cut`` (a ``ranges.cut_ranges`` result) through parse, select, keep and merge."""
    shares = shares_of(cut)
    column = cut.get("column") or cfg.text_column or None
    parsed = [parse_range(cfg, s, column) for s in shares]
    if cut["format"] == ".jsonl":  # the column's checks as the whole-file reader makes them
        column = jsonl_column([i for _, i in parsed], cfg.text_column, Path(cut["path"]))
        if not cfg.text_column:
            parsed = [parse_range(cfg, s, column) for s in shares]
    sels = [select_range(cfg, recs, s) for (recs, _), s in zip(parsed, skips([i["n_nonempty"] for _, i in parsed]))]
    parts = [keep_range(sel, r) for sel, r in zip(sels, rooms(cfg, [len(s.kept) for s in sels]))]
    return merge_selections(
        cfg,
        cut,
        parts,
        n_not_text=sum(i["n_not_text"] for _, i in parsed),
        n_null=sum(i["n_null"] for _, i in parsed),
        column=column if cut["format"] not in (".txt", ".txt.gz") else None,
    )
