"""The Gaussian null runs of a run, as names (no torch): the kinds (``constants.NULL_KINDS``), the name a null of
a run is published under and the published nulls of a run. The writer that draws one is
``pipeline.execute.null_run.write_null_run``."""

from __future__ import annotations

from normvar_core.constants import NULL_KINDS
from normvar_core.errors import NormvarError
from normvar_core.runs.reader import Run


def check_kind(kind: str) -> None:
    """A NormvarError naming the kinds (``constants.NULL_KINDS``) unless ``kind`` is one."""
    if kind not in NULL_KINDS:
        raise NormvarError(f"unknown null kind {kind!r}", fix=f"use one of {', '.join(NULL_KINDS)}")


def null_name(run: Run, kind: str, seed: int) -> str:
    """``<run>__null-<kind>-s<seed>`` (at most 128 characters): the name a null of ``run`` is published under."""
    return f"{run.name}__null-{kind}-s{seed}"[:128]


def nulls_of(runs_table, name: str) -> list[str]:
    """Names of the published null runs drawn from run ``name`` (a ``list_runs`` table with a source column)."""
    if "source" not in runs_table:
        return []
    src = runs_table["source"].fillna("")
    return runs_table.loc[src.str.startswith("null:") & src.str.endswith(f":{name}"), "name"].tolist()


__all__ = ["check_kind", "null_name", "nulls_of"]
