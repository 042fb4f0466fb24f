"""The run file: one self-describing DuckDB database per run (``<runs>/<name>.duckdb``).

This module is the documented entry point; the work is done by ``record`` (the typed ``run`` row),
``tables`` (Arrow tables and their schemas), ``writer`` (atomic publish) and ``reader`` (``open_run``).

Tables (users may query them with SQL; ``layer`` is always the model's hidden-state index):
``run`` (one row, see ``record.RunRecord``), ``token_stats``, ``token_means``, ``layer_stats``,
``frequency_hist``, ``sentence_lengths``, ``samples``, ``sentences`` (see ``tables``), plus the
tables of every further accumulator the run holds (listed in ``run.accumulators``), e.g.
``layer_geometry`` and ``layer_spectrum``.

Example: ``SELECT token, n, q, m, v FROM token_stats WHERE layer = 3 ORDER BY n DESC LIMIT 10``.
"""
from __future__ import annotations

from normvar_core.runs.reader import LIST_COLUMNS, Run, list_runs, open_run, read_meta, resolve_run
from normvar_core.runs.record import RUN_COLUMNS, SCHEMA_VERSION, RunRecord
from normvar_core.runs.tables import frequency_table, sentence_length_table
from normvar_core.runs.writer import write_run, write_tables

__all__ = ["Run", "RunRecord", "open_run", "read_meta", "list_runs", "resolve_run", "write_run", "write_tables",
           "frequency_table", "sentence_length_table", "LIST_COLUMNS", "RUN_COLUMNS", "SCHEMA_VERSION"]
