"""Publish the Gaussian null run of a published run (``stats.null``): same token ids and strings, counts n_t,
layers and d; statistics drawn from the null. The run row says where it came from:
``source = 'null:<kind>:<run>'``, the seed in its notes.

The draw every measure's null builds on is the null's per-type moments (``stats.null.null_stats``: O(L·T·d)
numpy draws); then every measure of ``MEASURES`` whose tables the run holds gives its own null tables
(``Measure.null_tables``), in registry order, and the run row's ``accumulators`` names those that gave some.
No model and no pass over the corpus: numpy draws, and the TwoNN search ``search`` for the geometry's sample."""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path

import numpy as np

from normvar_core.errors import NormvarError
from normvar_core.pipeline.measures import MEASURES, Measure
from normvar_core.runs.declared import NOTES_KEY, declarations
from normvar_core.runs.null import check_kind
from normvar_core.runs.reader import Run
from normvar_core.runs.record import RunRecord
from normvar_core.runs.tables import sentence_length_table
from normvar_core.runs.writer import write_tables
from normvar_core.stats.null import null_stats


def has_null(cls: type[Measure], run: Run) -> bool:
    """The measure declares a null (overrides ``Measure.null_tables``) and ``run`` holds one of its tables."""
    declares = cls.null_tables.__func__ is not Measure.null_tables.__func__  # type: ignore[attr-defined]  # a classmethod's function
    return declares and any(run.has(t) for t in cls.table_names)


def write_null_run(
    run: Run,
    kind: str,
    out_path: Path,
    *,
    seed: int = 0,
    overwrite: bool = False,
    search=None,
    progress=None,
    registry=MEASURES,
) -> Path:
    """Draw the null ``kind`` of ``run`` and publish it at ``out_path`` (atomically): the run's sentence lengths
    and every measure's ``null_tables`` (``registry``'s, in its order). ``search``: the TwoNN candidate search
    (numpy's by default). ``progress(phase, done, total, unit, detail)``: phases draw (the null's per-type moments),
    measures (one step per measure with a null, labelled by its ``title``) and write."""
    report = progress or (lambda *a: None)
    check_kind(kind)
    if seed < 0:
        raise NormvarError(f"seed must be >= 0, got {seed}", fix="pass --seed 0 or more")
    if str(run.meta.get("source") or "model").startswith("null:"):
        raise NormvarError(f"run {run.name!r} is itself a null run", fix="draw the null of the real run")
    t0 = time.monotonic()
    report("draw", 0, 1, "steps", f"{kind} null of the per-type moments")
    stats = run.stats()
    null = null_stats(kind, stats, run.layer_stats(), seed=seed)
    hist = run.sentence_length_hist()
    tables = {"sentence_lengths": sentence_length_table(np.repeat(hist["words"].to_numpy(), hist["count"].to_numpy()))}
    steps = [cls for cls in registry if has_null(cls, run)]
    written: dict[str, type[Measure]] = {}
    held: dict[str, tuple[str, ...]] = {}
    for i, cls in enumerate(steps):
        report("measures", i, len(steps), "measures", f"the null's {cls.title}")
        got = cls.null_tables(run, kind, stats, null, seed=seed, search=search)
        if got:
            tables.update(got)
            written[cls.name], held[cls.name] = cls, tuple(got)
    return write_tables(
        out_path,
        null_record(run, kind, seed, written, held, time.monotonic() - t0),
        tables,
        overwrite=overwrite,
        on_table=lambda i, n, name: report("write", i, n, "tables", name),
    )


def null_record(
    run: Run,
    kind: str,
    seed: int,
    measures: dict[str, type[Measure]],
    tables: dict[str, tuple[str, ...]],
    seconds: float,
) -> RunRecord:
    """The null run's row: the run's, with ``source = 'null:<kind>:<run>'``, ``accumulators`` the measures that
    gave null tables, and notes the run's with ``notes.null`` = {kind, seed, of} and the declarations
    (``runs.declared``) of the tables the null holds (the run's own declared its tables)."""
    notes = {**(run.meta.get("notes") or {}), "null": {"kind": kind, "seed": int(seed), "of": run.name}}
    notes.pop(NOTES_KEY, None)
    if declared := declarations({name: (tables[name], cls.curves) for name, cls in measures.items()}):
        notes[NOTES_KEY] = declared
    known = set(RunRecord.__dataclass_fields__)
    meta = {k: v for k, v in run.meta.items() if k in known}
    return RunRecord(
        **{
            **meta,
            "source": f"null:{kind}:{run.name}",
            "accumulators": list(measures),
            "created_at": _dt.datetime.now(_dt.UTC),
            "seconds": seconds,
            "notes": notes,
        }
    )


__all__ = ["has_null", "null_record", "write_null_run"]
