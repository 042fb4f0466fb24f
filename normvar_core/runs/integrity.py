"""The cheap integrity check of a run file (``damage``): metadata only, no data block read. ``runs.reader``
runs it when it opens a run or lists the runs; the tables each measure requires come from
``runs.schema.REQUIRED_TABLES``, or, for a measure that is not built in, from what the run file recorded that it
declared (``runs.declared.required_tables``)."""

from __future__ import annotations

import duckdb

from normvar_core.runs.declared import required_tables
from normvar_core.runs.schema import REQUIRED_COLUMNS

HEADER_BYTES = 3 * 4096  # DuckDB's file header + two database headers precede the blocks


def table_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables of the open run file, by name."""
    return [
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY table_name"
        ).fetchall()
    ]


def missing_columns(con: duckdb.DuckDBPyConnection, tables: set[str]) -> str | None:
    """What the present tables of ``REQUIRED_COLUMNS`` lack ("token_stats lacks column v …"), or None."""
    have: dict[str, set[str]] = {}
    for table, column in con.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main'"
    ).fetchall():
        have.setdefault(table, set()).add(column)
    for table, needed in REQUIRED_COLUMNS.items():
        lacking = [c for c in needed if table in tables and c not in have.get(table, set())]
        if lacking:
            return (
                f"{table} lacks column{'s' if len(lacking) > 1 else ''} {', '.join(lacking)} (a file of an "
                "older or other program)"
            )
    return None


def damage(con: duckdb.DuckDBPyConnection, file_size: int, meta: dict) -> str | None:
    """A cheap integrity check (metadata only, no data block read): the file holds every block its
    header promises (a copy cut short fails here), the tables of its measures exist with the columns the pages
    need (``schema.REQUIRED_COLUMNS``) and the per-type tables have one row per (layer, type). Returns what is
    wrong, or None."""
    try:
        info = con.sql("PRAGMA database_size").df().iloc[0].to_dict()
        need = int(info["block_size"]) * int(info["total_blocks"])
        have = int(file_size) - HEADER_BYTES  # the size of the file opened (it may be replaced since)
        if have < need:
            return f"cut short ({have / 1e6:.1f} of {need / 1e6:.1f} MB)"
        tables = set(table_names(con))
        if "sentence_lengths" not in tables:
            return "missing table sentence_lengths"
        for measure in meta.get("accumulators") or []:
            missing = [t for t in required_tables(meta, measure) if t not in tables]
            if missing:
                return f"missing table(s) {', '.join(missing)}"
        if lacking := missing_columns(con, tables):
            return lacking
        if "moments" in (meta.get("accumulators") or []):
            rows = con.execute("SELECT count(*) FROM token_stats").fetchall()[0][0]
            want = len(meta.get("layers") or []) * int(meta.get("n_types") or 0)
            if rows != want:
                return f"token_stats has {rows} rows, expected {want}"
    except (duckdb.Error, OSError, KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"unreadable ({str(exc).splitlines()[0][:120]})"
    return None


__all__ = ["damage", "missing_columns", "table_names", "HEADER_BYTES"]
