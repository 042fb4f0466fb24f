"""Exports of a run for other tools: ``export_run(run_path, out, fmt)``.

``parquet``   one ``<table>.parquet`` per table of the run file (``run``, ``token_stats``, ``token_means``,
              ``samples``, every measure's tables ...); vector columns (``mean``, ``vector``) stay
              fixed-size lists of float32 (Arrow ``fixed_size_list<float>[d]``; pandas gives arrays,
              polars ``Array(Float32, d)``, DuckDB a list).
``csv``       one ``<table>.csv`` per table (header, RFC 4180 quoting); a vector column ``mean`` of
              width d becomes the d columns ``mean_0 .. mean_{d-1}`` (shortest round-trip text of each
              float32: read back and cast to float32 they are bit-identical); other list columns
              (``run.layers``) are JSON text.
both also     ``token_means.npy``: the per-type means μ(X_t) as one float32 array (L, T, d), axis 0 =
              ``manifest.json["layers"]`` (hidden-state indices), row t = line t of
              ``token_means_tokens.csv`` (token_id, token, n, token_readable); fits Embedding Atlas or any numpy user.
``projector`` TensorBoard Projector's pair for one layer (``--layer``, default the last stored):
              ``vectors.tsv`` (T rows of d tab-separated floats, no header) and ``metadata.tsv`` (header
              ``token  token_id  n  q  m  v  token_readable``; tabs, newlines and backslashes in tokens escaped as
              ``\\t``, ``\\n``, ``\\\\``).

Every format writes ``manifest.json`` (run name, format, layers, files and their row counts). The
export is written into a temporary folder beside ``out`` and renamed into place when complete
(``move_folder_into_place``): nothing half-written is ever visible under ``out``. ``out`` follows the rule of
every destination (``destination.py``): a link is refused, never followed; ``--overwrite`` replaces only a
folder that holds an earlier export (``made_by_export``). Tables are streamed in
record batches, the means layer by layer, so memory stays bounded by one layer of means.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from normvar_core.destination import is_regular_entry, resolve_folder_destination
from normvar_core.errors import NormvarError
from normvar_core.runs.reader import open_run
from normvar_core.runs.tables import list_to_matrix

FORMATS = ("parquet", "csv", "projector")
BATCH_ROWS = 8192


# ----------------------------------------------------------------------------- destination
def move_folder_into_place(out: Path, write: Callable[[Path], None], *, overwrite: bool = False) -> Path:
    """Run ``write(tmp)`` into ``.<name>.tmp-<pid>`` beside ``out``, then rename it to ``out``.

    ``out`` may be missing or an empty folder; a non-empty folder is replaced only with ``overwrite``
    (the old one is renamed aside first, then removed); anything else (a file) is refused. On any
    error the temporary folder is removed and ``out`` is as it was."""
    out = resolve_folder_destination(out)  # the one rule (destination.py): a link is refused, never followed
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise NormvarError(
                f"--out {out} is a folder that is not empty",
                fix="choose a new or empty folder, or pass --overwrite to replace it",
            )
        if not made_by_export(out):
            raise NormvarError(
                f"--out {out} is a folder that normvar did not export (no manifest.json of an "
                "export in it); --overwrite replaces only an earlier export",
                fix="choose a new or empty folder",
            )
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        write(tmp)
        if out.exists():
            os.rename(out, old)
        os.rename(tmp, out)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not out.exists():
            os.rename(old, out)
        raise NormvarError(
            f"could not write the export {out.name}: {exc.strerror or exc}; nothing was published",
            fix=f"check that {out.parent} is writable and has room, and run it again",
        ) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return out


def made_by_export(folder: Path) -> bool:
    """Whether ``folder`` holds an earlier export: its ``manifest.json`` a regular file (not a link) naming a run
    and one of ``FORMATS``."""
    manifest = folder / "manifest.json"
    if not is_regular_entry(manifest):
        return False
    try:
        got = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(got, dict) and got.get("format") in FORMATS and "run" in got


# ----------------------------------------------------------------------------- tables
def _plain_vectors(schema: pa.Schema) -> pa.Schema:
    """Name the child of fixed-size lists ``item`` (DuckDB leaves it empty, which some readers dislike)."""
    return pa.schema(
        [
            pa.field(f.name, pa.list_(pa.field("item", f.type.value_type), f.type.list_size))
            if pa.types.is_fixed_size_list(f.type)
            else f
            for f in schema
        ]
    )


def _csv_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Fixed-size list columns -> one column per component; other lists/structs -> JSON text."""
    cols, names = [], []
    for f, col in zip(batch.schema, batch.columns):
        if pa.types.is_fixed_size_list(f.type):
            mat = list_to_matrix(col, f.type.list_size)
            for k in range(f.type.list_size):
                cols.append(pa.array(mat[:, k]))
                names.append(f"{f.name}_{k}")
        elif pa.types.is_nested(f.type):
            cols.append(pa.array([None if v is None else json.dumps(v) for v in col.to_pylist()], pa.string()))
            names.append(f.name)
        else:
            cols.append(col)
            names.append(f.name)
    return pa.RecordBatch.from_arrays(cols, names=names)


def _write_table(con: duckdb.DuckDBPyConnection, table: str, dest: Path, fmt: str) -> int:
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    reader = con.sql(f'SELECT * FROM "{table}"').fetch_record_batch(BATCH_ROWS)
    rows, writer = 0, None
    try:
        for batch in reader:
            if fmt == "parquet":
                batch = batch.cast(_plain_vectors(batch.schema))
                writer = writer or pq.ParquetWriter(dest, batch.schema)
            else:
                batch = _csv_batch(batch)
                writer = writer or pcsv.CSVWriter(dest, batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
        if writer is None:  # an empty table: header / schema only
            schema = _plain_vectors(reader.schema)
            if fmt == "parquet":
                pq.write_table(schema.empty_table(), dest)
            else:
                pcsv.write_csv(_csv_batch(pa.RecordBatch.from_pylist([], schema=schema)), dest)
    finally:
        if writer is not None:
            writer.close()
    return rows


def _layer_means(con: duckdb.DuckDBPyConnection, layer: int, token_ids: np.ndarray, dim: int) -> np.ndarray:
    tab = con.sql(
        f"SELECT token_id, mean FROM token_means WHERE layer = {int(layer)} ORDER BY token_id"
    ).to_arrow_table()
    if not np.array_equal(tab.column("token_id").to_numpy(), token_ids):
        raise NormvarError(f"token_means of layer {layer} does not match token_stats", fix="recompute the run")
    return list_to_matrix(tab.column("mean"), dim)


def _escape_tsv(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


# ----------------------------------------------------------------------------- export
def export_run(run_path, out, fmt: str, *, layer: int | None = None, overwrite: bool = False) -> Path:
    """Write the export of the run file ``run_path`` to the folder ``out`` (see the module docstring)."""
    if fmt not in FORMATS:
        raise NormvarError(f"unknown export format {fmt!r}", fix=f"use one of {', '.join(FORMATS)}")
    run = open_run(run_path)  # the integrity check; one read-only connection below reads everything
    if not run.has("token_means"):
        raise NormvarError(f"run {run.name!r} holds no per-type means", fix="export a run computed with moments")
    if fmt == "projector":
        layer = run.layers[-1] if layer is None else int(layer)
        if layer not in run.layers:
            raise NormvarError(f"layer {layer} is not stored in run {run.name!r}", fix=f"use one of {run.layers}")
    elif layer is not None:
        raise NormvarError("--layer applies to --format projector only", fix="drop --layer, or use --format projector")
    tokens = run.tokens()  # token_id, token, n of every type, by token id
    ids = tokens["token_id"].to_numpy(np.int64)
    manifest = {
        "run": run.name,
        "format": fmt,
        "source": str(Path(run_path).name),
        "layers": run.layers,
        "dim": run.dim,
        "n_types": int(ids.size),
        "files": {},
    }

    def write(tmp: Path) -> None:
        con = duckdb.connect(str(run.path), read_only=True)
        try:
            if fmt == "projector":
                _write_projector(con, run, layer, tokens, tmp, manifest)  # type: ignore[arg-type]  # projector exports name a layer
            else:
                for table in run.table_names:
                    name = f"{table}.{fmt}"
                    manifest["files"][name] = _write_table(con, table, tmp / name, fmt)  # type: ignore[index]  # a dict
                _write_means(con, run, tokens, tmp, manifest)
        except duckdb.Error as exc:
            raise NormvarError(
                f"run file {run.path} could not be read: {str(exc).splitlines()[0]}", fix="recompute the run"
            ) from None
        finally:
            con.close()
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")

    return move_folder_into_place(Path(out), write, overwrite=overwrite)


def _write_means(con, run, tokens, tmp: Path, manifest: dict) -> None:
    ids = tokens["token_id"].to_numpy(np.int64)
    arr = np.lib.format.open_memmap(
        tmp / "token_means.npy", mode="w+", dtype=np.float32, shape=(len(run.layers), ids.size, run.dim)
    )
    for li, layer in enumerate(run.layers):
        arr[li] = _layer_means(con, layer, ids, run.dim)
    arr.flush()
    del arr
    # the tokenizer's own string as ``token`` (what the run file holds), the readable one beside it
    raw = tokens.rename(columns={"token": "token_readable", "token_raw": "token"})
    raw[["token_id", "token", "n", "token_readable"]].to_csv(tmp / "token_means_tokens.csv", index=False)
    manifest["files"]["token_means.npy"] = [len(run.layers), int(ids.size), run.dim]
    manifest["files"]["token_means_tokens.csv"] = int(ids.size)


def _write_projector(con, run, layer: int, tokens, tmp: Path, manifest: dict) -> None:
    import pyarrow.csv as pcsv

    ids = tokens["token_id"].to_numpy(np.int64)
    mat = _layer_means(con, layer, ids, run.dim)
    # Arrow writes each float32 as its shortest round-trip text
    cols = pa.RecordBatch.from_arrays(
        [pa.array(mat[:, k]) for k in range(mat.shape[1])], names=[f"d{k}" for k in range(mat.shape[1])]
    )
    pcsv.write_csv(
        cols, tmp / "vectors.tsv", pcsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none")
    )
    table = run.token_table(layer)
    with open(tmp / "metadata.tsv", "w", encoding="utf-8") as fh:
        fh.write("token\ttoken_id\tn\tq\tm\tv\ttoken_readable\n")
        for r in table.itertuples(index=False):
            fh.write(
                f"{_escape_tsv(str(r.token_raw))}\t{r.token_id}\t{r.n}\t{float(r.q)!r}\t{float(r.m)!r}\t{float(r.v)!r}"
                f"\t{_escape_tsv(str(r.token))}\n"
            )
    manifest["projector_layer"] = layer
    manifest["files"]["vectors.tsv"] = int(ids.size)
    manifest["files"]["metadata.tsv"] = int(ids.size)


__all__ = ["FORMATS", "export_run", "move_folder_into_place"]
