"""``write_run``: a run file of moments (+ optional samples) from a TokenStats, for tests and benchmarks.

The pipeline publishes through ``pipeline.publish`` -> ``runs.writer.write_tables``; this helper builds
the same tables (``runs.tables.moments_tables``/``samples_tables``) from numbers a test made itself.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from normvar_core.destination import taken
from normvar_core.runs.record import RunRecord
from normvar_core.runs.tables import TableData, moments_tables, samples_tables, sentence_length_table
from normvar_core.runs.writer import run_path, write_tables
from normvar_core.stats.tokenstats import TokenStats


def write_run(
    path,
    *,
    meta: dict,
    stats: TokenStats,
    tokens: list[str],
    sentence_lengths: np.ndarray,
    samples: dict | None,
    overwrite: bool = False,
) -> Path:
    """Write a run of moments (+ optional samples) and publish it atomically at ``path``.

    ``tokens[i]`` is the string of ``stats.token_ids[i]``. ``samples`` (optional) maps
    ``token_ids`` (P,), ``tokens`` (P,), ``i`` (P,) and ``vectors`` (L, P, d) — raw embeddings of the
    layers of ``stats.layer_index`` — and optionally ``sentence_ids``, ``positions`` (P,) and
    ``sentences`` {sentence_id: text}. An existing run of that name is refused unless ``overwrite``."""
    path = run_path(path)
    if path.exists() and not overwrite:
        raise taken(path)
    record = RunRecord.from_dict(dict(meta))
    if record.dim is None:
        record.dim = stats.dim
    if not record.layers:
        record.layers = [int(x) for x in stats.layer_index]
    if record.n_types is None:
        record.n_types = stats.num_types
    if record.n_embeddings is None:
        record.n_embeddings = int(stats.n.sum())
    tables: dict[str, TableData] = dict(moments_tables(stats, tokens))
    tables["sentence_lengths"] = sentence_length_table(sentence_lengths)
    measures = ["moments"]
    if samples is not None and len(samples.get("token_ids", [])):
        P = len(samples["token_ids"])
        tables.update(
            samples_tables(
                stats.layer_index,
                token_ids=samples["token_ids"],
                tokens=samples["tokens"],
                i=samples["i"],
                vectors=samples["vectors"],
                sentence_ids=samples.get("sentence_ids", np.full(P, -1)),
                positions=samples.get("positions", np.full(P, -1)),
                sentences=samples.get("sentences"),
            )
        )
        measures.append("samples")
    record.accumulators = measures  # what this file really holds, whatever the meta said
    return write_tables(path, record, tables, overwrite=overwrite)


def query(path, sql: str):
    """The result of ``sql`` on the run file at ``path``, read by DuckDB alone (read-only), as a DataFrame: the
    tests' independent reading of what a page or a claim shows."""
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.sql(sql).df()
    finally:
        con.close()
