"""Publish the Gaussian null run of a run (``stats.null``): same token ids and strings, counts n_t,
layers and d; statistics drawn from the null. The run row says where it came from:
``source = 'null:<kind>:<run>'``, the seed in its notes. No torch: O(L·T·d) numpy draws for the
moments; when the run has the layer geometry, the null's too (``stats.null_geometry``: O(L·T·d²)
for the exact between-type scatter, a sample of the run's TwoNN size for the rest, and GRIDE on another draw
when the run has ``layer_gride``); and when the run has the layer linearity, the null's
(``stats.layer_linearity.null_table``: the layers drawn independently given the type)."""
from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from normvar_core.errors import NormvarError
from normvar_core.runs.reader import Run
from normvar_core.runs.schema import MEASURE_TABLES
from normvar_core.runs.record import RunRecord
from normvar_core.runs.tables import geometry_tables, moments_tables, sentence_length_table
from normvar_core.runs.writer import write_tables
from normvar_core.constants import ID_SAMPLE, NULL_KINDS
from normvar_core.stats.null import null_params, null_stats
from normvar_core.stats import layer_linearity
from normvar_core.stats.gride import sample_rows
from normvar_core.stats.layer_geometry import recorded_sample, twonn_batch_of
from normvar_core.stats.null_geometry import null_layer_geometry, null_sample


def check_kind(kind: str) -> None:
    """A NormvarError naming the kinds (``constants.NULL_KINDS``) unless ``kind`` is one."""
    if kind not in NULL_KINDS:
        raise NormvarError(f"unknown null kind {kind!r}", fix=f"use one of {', '.join(NULL_KINDS)}")


def null_name(run: Run, kind: str, seed: int) -> str:
    return f"{run.name}__null-{kind}-s{seed}"[:128]


def null_geometry_tables(run: Run, kind: str, stats, null, *, seed: int = 0, search=None) -> dict:
    """The geometry tables of the null ``null`` (a ``null_stats`` draw of ``stats``): same layers and
    sample size as the run's own geometry. ``search``: the TwoNN candidate search (numpy's by default)."""
    geo = run.table("layer_geometry")
    size = recorded_sample(geo)[0] or ID_SAMPLE
    rows, spectra, cosines, gride_rows = [], [], [], []
    for li, mu, s2 in null_params(kind, stats, run.layer_stats(), seed=seed):
        layer = int(stats.layer_index[li])
        rng = np.random.default_rng([seed, NULL_KINDS.index(kind), 2, layer])
        row, eig, cos = null_layer_geometry(mu, s2, null.mean[li], null.v[li] * null.n, null.n, size, rng,
                                            search=search)
        rows.append({"layer": layer, **row})
        spectra.append(eig)
        cosines.append(cos)
        if run.has("layer_gride"):  # GRIDE on an independent draw of the same null layer
            X = null_sample(mu, s2, null.n, size, np.random.default_rng([seed, NULL_KINDS.index(kind), 3, layer]))
            gride_rows += [{"layer": layer, **r} for r in sample_rows(X, twonn_batch_of(size))]
    out = geometry_tables(stats.layer_index, rows, spectra, cosines)
    if gride_rows:
        out["layer_gride"] = pa.table({c: [r[c] for r in gride_rows] for c in gride_rows[0]})
    return out


def write_null_run(run: Run, kind: str, out_path: Path, *, seed: int = 0, overwrite: bool = False,
                   search=None, progress=None) -> Path:
    """Draw the null ``kind`` of ``run`` and publish it at ``out_path`` (atomically); with the
    run's layer geometry, the null's geometry too. ``progress(phase, done, total, unit, detail)``:
    phases draw, geometry, write."""
    report = progress or (lambda *a: None)
    check_kind(kind)
    if seed < 0:
        raise NormvarError(f"seed must be >= 0, got {seed}", fix="pass --seed 0 or more")
    if str(run.meta.get("source") or "model").startswith("null:"):
        raise NormvarError(f"run {run.name!r} is itself a null run", fix="draw the null of the real run")
    t0 = time.monotonic()
    report("draw", 0, 1, "steps", f"{kind} null of the moments")
    stats = run.stats()
    null = null_stats(kind, stats, run.layer_stats(), seed=seed)
    tokens = run.tokens()["token"].tolist()
    tables = dict(moments_tables(null, tokens))
    hist = run.sentence_length_hist()
    tables["sentence_lengths"] = sentence_length_table(np.repeat(hist["words"].to_numpy(), hist["count"].to_numpy()))
    if run.has("layer_geometry"):
        report("geometry", 0, 1, "steps", "spectra and TwoNN of the null")
        tables.update(null_geometry_tables(run, kind, stats, null, seed=seed, search=search))
    if run.has(layer_linearity.TABLE):
        report("geometry", 0, 1, "steps", "layer linearity and CKA of the null")
        tables[layer_linearity.TABLE] = pa.table(layer_linearity.null_table(kind, stats, run.layer_stats(), null,
                                                                            seed=seed))
    measures = [m for m, written in MEASURE_TABLES.items() if set(written) & set(tables)]  # moments, geometry
    measures += [layer_linearity.MEASURE] if layer_linearity.TABLE in tables else []
    known = set(RunRecord.__dataclass_fields__)
    meta = {k: v for k, v in run.meta.items() if k in known}
    record = RunRecord(**{**meta, "source": f"null:{kind}:{run.name}", "accumulators": measures,
                          "created_at": _dt.datetime.now(_dt.timezone.utc), "seconds": time.monotonic() - t0,
                          "notes": {**(run.meta.get("notes") or {}), "null": {"kind": kind, "seed": int(seed),
                                                                                "of": run.name}}})
    return write_tables(out_path, record, tables, overwrite=overwrite,
                        on_table=lambda i, n, name: report("write", i, n, "tables", name))


def nulls_of(runs_table, name: str) -> list[str]:
    """Names of the published null runs drawn from run ``name`` (a ``list_runs`` table with a source column)."""
    if "source" not in runs_table:
        return []
    src = runs_table["source"].fillna("")
    return runs_table.loc[src.str.startswith("null:") & src.str.endswith(f":{name}"), "name"].tolist()


__all__ = ["write_null_run", "null_name", "nulls_of"]
