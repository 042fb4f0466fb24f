"""What a measure shows, as plain data (no torch), and how a run file carries it.

A measure class declares its per-layer curves (``Measure.curves``: :class:`LayerCurve`); publish records, in
the run row's ``notes`` under :data:`NOTES_KEY`, what the run's measures declare — their tables and curves —
whenever one of them declares a curve or is not built in (``runs.schema.MEASURE_TABLES``):

    notes["declared"] = {measure: {"tables": [table, …], "curves": [LayerCurve as a dict, …]}}

so that the reader (``runs.reader.Run.curves``, ``runs.integrity.required_tables``), the dashboard and the
deck know a measure that is not built in without importing it. A run of built-in measures that declare no
curve has no such key (its file is as it was).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields

from normvar_core.runs.schema import MEASURE_TABLES, REQUIRED_TABLES

NOTES_KEY = "declared"
"""The run row's ``notes`` key that holds the declarations."""


@dataclass(frozen=True)
class LayerCurve:
    """One per-layer curve of a run-file table: ``column`` of ``table`` (one row per ``layer``) against depth,
    one line per run, drawn on the page ``page`` (a key of ``viz.pages.PAGES``) as a tab titled ``title``
    and in the deck as a slide of that title; ``y_title`` names the y axis, ``log_y`` puts it on a log scale,
    ``description`` says how to read it (under the title)."""

    table: str
    column: str
    title: str
    y_title: str
    page: str = "geometry"
    log_y: bool = False
    description: str = ""

    @property
    def key(self) -> str:
        """The tab's key and ``?section=`` slug: ``<table>-<column>``."""
        return f"{self.table}-{self.column}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping) -> LayerCurve:
        """The curve a run file recorded (keys this version does not know are left out)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def declarations(measures: Mapping[str, tuple[Iterable[str], Iterable[LayerCurve]]]) -> dict | None:
    """The ``notes["declared"]`` of a run of ``measures`` ({name: (its tables, its curves)}, in the run's order),
    or None when every measure is built in and declares no curve (the run row stays as it was)."""
    measures = {n: (tuple(t), tuple(c)) for n, (t, c) in measures.items()}
    if all(n in MEASURE_TABLES and not curves for n, (_, curves) in measures.items()):
        return None
    return {
        n: {"tables": list(tables), "curves": [c.to_dict() for c in curves]} for n, (tables, curves) in measures.items()
    }


def declared(meta: Mapping) -> dict[str, Mapping]:
    """{measure: {"tables": [...], "curves": [...]}} a run row's notes record ({} for a file without)."""
    notes = meta.get("notes")
    got = notes.get(NOTES_KEY) if isinstance(notes, Mapping) else None
    return {str(k): v for k, v in got.items() if isinstance(v, Mapping)} if isinstance(got, Mapping) else {}


def curves_of(meta: Mapping) -> tuple[LayerCurve, ...]:
    """The curves that the measures a run holds (its ``accumulators``) declare, in the run's order."""
    held = declared(meta)
    return tuple(
        LayerCurve.from_dict(c) for m in (meta.get("accumulators") or []) for c in held.get(m, {}).get("curves", ())
    )


def required_tables(meta: Mapping, measure: str) -> tuple[str, ...]:
    """The tables every run holding ``measure`` has: a built-in one's ``REQUIRED_TABLES`` (none for a built-in
    measure not listed there), else the tables the run file recorded that it declared."""
    if measure in MEASURE_TABLES:
        return REQUIRED_TABLES.get(measure, ())
    return tuple(declared(meta).get(measure, {}).get("tables", ()))


__all__ = ["LayerCurve", "NOTES_KEY", "declarations", "declared", "curves_of", "required_tables"]
