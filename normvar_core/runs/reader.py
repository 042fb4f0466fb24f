"""Reading run files: ``open_run`` (the small tables in memory, the file closed at once),
``read_meta``, ``list_runs`` and ``resolve_run``. DuckDB, pandas and pyarrow only: reading a run
never imports torch or transformers.

``open_run`` opens read-only, copies what it needs and closes at once, so another process may
replace the file at any time (while a DuckDB file is open read-write, another process cannot open it at
all, even read-only: runs are published by atomic rename and never held open); the large parts (means,
samples, any measure's table) are read on first use by reopening the file briefly and checking
it is still the same file.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from normvar_core.destination import refuse_entry
from normvar_core.errors import NormvarError
from normvar_core.runs.declared import LayerCurve, curves_of
from normvar_core.runs.integrity import damage, table_names
from normvar_core.runs.record import JSON_COLUMNS, RunRecord
from normvar_core.runs.schema import LEGACY_MARKERS
from normvar_core.runs.tables import list_to_matrix
from normvar_core.stats.token_text import with_readable
from normvar_core.stats.tokenstats import TokenStats


def _connect_ro(path: Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection to ``path``, opened only when the name holds a regular file itself (a FIFO would
    block DuckDB's open forever; a link is not followed: ``destination.refuse_entry``)."""
    refuse_entry(path, "run file", fix="remove it or move it out of the runs folder; a run file is a regular file")
    try:
        return duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise NormvarError(
            f"cannot open run file {path}: {str(exc).splitlines()[0]}",
            fix="check that it is a normvar run file (normvar show lists runs)",
        ) from None


def _clean(k: str, v):
    if k in JSON_COLUMNS:
        return json.loads(v) if isinstance(v, str) and v else ({} if k != "accumulators" else [])
    if k == "layers":
        return [int(x) for x in v] if v is not None else []
    if k == "created_at":
        return pd.Timestamp(v).strftime("%Y-%m-%dT%H:%M:%SZ") if v is not None and not pd.isna(v) else None
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return None if math.isnan(v) else float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def _read_meta(con: duckdb.DuckDBPyConnection) -> dict:
    df = con.sql("SELECT * FROM run").df()
    if len(df) != 1:
        raise NormvarError("run file has no single run row", fix="recompute the run")
    meta = {k: _clean(k, v) for k, v in df.iloc[0].to_dict().items()}
    if not meta.get("accumulators"):
        tables = set(table_names(con))
        meta["accumulators"] = [a for t, a in LEGACY_MARKERS.items() if t in tables]
    meta.setdefault("source", "model")
    return meta


def _damaged(path: Path, why: str) -> NormvarError:
    return NormvarError(
        f"run file {path} is damaged: {why}",
        fix="recompute the run (normvar compute ... --overwrite) or delete the file",
    )


def file_version(path) -> tuple[int, int, int]:
    """A run file's version (inode, size, mtime_ns): runs are replaced by atomic rename, never edited."""
    st = os.lstat(path)  # the name itself: a link is never followed
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class Run:
    """A published run, held in memory (the DuckDB file is never kept open).

    ``meta`` is the ``run`` row as a dict (``meta["options"]`` the RunConfig dict), ``record`` the
    same as a typed RunRecord; ``layers`` the stored hidden-state indices; ``table_names`` the
    tables in the file. Large parts are read on first use by reopening the file briefly; if the
    file was replaced meanwhile a NormvarError asks to reopen the run."""

    name: str
    path: Path
    meta: dict
    layers: list[int]
    table_names: list[str]
    sample_columns: list[str]
    _token_stats: pd.DataFrame = field(repr=False)
    _layer_stats: pd.DataFrame = field(repr=False)
    _sentence_lengths: pd.DataFrame = field(repr=False)
    _frequency_hist: pd.DataFrame = field(repr=False)
    version: tuple = field(repr=False)
    _stats: TokenStats | None = field(default=None, repr=False)
    _samples: dict = field(default_factory=dict, repr=False)
    _sampled: pd.DataFrame | None = field(default=None, repr=False)
    _tables: dict = field(default_factory=dict, repr=False)

    # ---------------------------------------------------------------- what the run has
    @property
    def record(self) -> RunRecord:
        known = {f for f in RunRecord.__dataclass_fields__}
        return RunRecord(**{k: v for k, v in self.meta.items() if k in known})

    @property
    def measures(self) -> list[str]:
        return list(self.meta.get("accumulators") or [])

    @property
    def curves(self) -> tuple[LayerCurve, ...]:
        """The per-layer curves that the run's measures declare (``runs.declared``; none in a file without)."""
        return curves_of(self.meta)

    def has(self, what: str) -> bool:
        """True if the run holds the measure or the table ``what``."""
        return what in self.measures or what in self.table_names

    def skipped(self, what: str) -> str | None:
        """Why the run lacks the measure ``what`` although it asked for it (notes.skipped), or None."""
        return skipped_measures(self.meta).get(what)

    @property
    def dim(self) -> int:
        return int(self.meta["dim"])

    @property
    def num_hidden_states(self) -> int:
        n = self.meta.get("num_layers")
        return int(n) + 1 if n is not None else max(self.layers) + 1

    # ---------------------------------------------------------------- small tables
    def token_table(self, layer: int) -> pd.DataFrame:
        """DataFrame[token_id, token, n, q, m, v] of one hidden-state index, by token id."""
        self.check_layer(layer)
        df = self._token_stats[self._token_stats["layer"] == layer]
        return df[["token_id", "token", "n", "q", "m", "v", "token_raw"]].reset_index(drop=True)

    def tokens(self) -> pd.DataFrame:
        """DataFrame[token_id, token, n, token_raw] of every type (aligned with ``stats().token_ids``): ``token`` as a
        reader reads it, ``token_raw`` as the tokenizer writes it (``stats.token_text``)."""
        df = self._token_stats[self._token_stats["layer"] == self.layers[0]]
        return df[["token_id", "token", "n", "token_raw"]].reset_index(drop=True)

    def layer_stats(self) -> pd.DataFrame:
        """DataFrame[layer, n, q, m, v, v_w, v_b] over all types (eqs. 8–11)."""
        return self._layer_stats.copy()

    def sentence_length_hist(self) -> pd.DataFrame:
        """DataFrame[words, count] (Fig. 9)."""
        return self._sentence_lengths.copy()

    def frequency_hist(self) -> pd.DataFrame:
        """DataFrame[log10_n_left, log10_n_right, count] (Fig. 10)."""
        return self._frequency_hist.copy()

    def check_layer(self, layer: int) -> None:
        """A NormvarError naming the stored layers when ``layer`` is not one of them."""
        if layer not in self.layers:
            raise NormvarError(f"layer {layer} is not stored in run {self.name!r}", fix=f"use one of {self.layers}")

    # ---------------------------------------------------------------- lazy parts
    def _reopen(self) -> duckdb.DuckDBPyConnection:
        """Connect, then check the file is still the one opened: checking first would race with
        an atomic replace between the check and the connect (seen in the soak test)."""
        replaced = NormvarError(
            f"run file {self.path} was replaced or removed since it was opened", fix="open the run again"
        )
        try:
            con = _connect_ro(self.path)
        except NormvarError:
            if not self.path.exists():
                raise replaced from None
            raise
        try:
            same = file_version(self.path) == self.version
        except OSError:
            same = False
        if not same:
            con.close()
            raise replaced
        return con

    def query(self, sql: str, what: str):
        """``sql`` on the run file as a pyarrow Table (reopened read-only, checked to be the same file);
        a DuckDB error is a NormvarError naming ``what`` was damaged."""
        con = self._reopen()
        try:
            return con.sql(sql).to_arrow_table()
        except duckdb.Error as exc:
            raise NormvarError(
                f"run file {self.path} is damaged ({what}): {str(exc).splitlines()[0]}", fix="recompute the run"
            ) from None
        finally:
            con.close()

    def table(self, name: str) -> pd.DataFrame:
        """Any table of the run as a DataFrame (cached), e.g. a measure's ``layer_geometry``."""
        if name not in self.table_names:
            raise NormvarError(
                f"run {self.name!r} has no table {name!r}", fix="recompute the run with the measure switched on"
            )
        if name not in self._tables:
            self._tables[name] = with_readable(self.query(f'SELECT * FROM "{name}"', name).to_pandas())
        return self._tables[name].copy()

    def stats(self) -> TokenStats:
        """The full TokenStats (means as float32 from ``token_means``; q, m, v exact float64)."""
        if self._stats is not None:
            return self._stats
        ts = self._token_stats
        L = len(self.layers)
        first = ts[ts["layer"] == self.layers[0]]
        ids = first["token_id"].to_numpy(np.int64)
        T = ids.size
        d = self.dim
        mean = np.empty((L, T, d), dtype=np.float32)
        con = self._reopen()
        try:
            for li, layer in enumerate(self.layers):  # layer by layer bounds the Arrow copy to T x d
                tab = con.sql(
                    f"SELECT token_id, mean FROM token_means WHERE layer = {int(layer)} ORDER BY token_id"
                ).to_arrow_table()
                got = tab.column("token_id").to_numpy()
                if got.size != T or not np.array_equal(got, ids):
                    raise NormvarError(f"run file {self.path} is inconsistent (token_means)", fix="recompute the run")
                mean[li] = list_to_matrix(tab.column("mean"), d)
        except duckdb.Error as exc:
            raise NormvarError(
                f"run file {self.path} is damaged (token_means): {str(exc).splitlines()[0]}", fix="recompute the run"
            ) from None
        finally:
            con.close()

        def grid(col: str, dtype) -> np.ndarray:
            return ts[col].to_numpy(dtype).reshape(L, T)

        self._stats = TokenStats(
            token_ids=ids,
            n=first["n"].to_numpy(np.int64),
            mean=mean,
            q=grid("q", np.float64),
            m=grid("m", np.float64),
            v=grid("v", np.float64),
            layer_index=np.asarray(self.layers, dtype=np.int64),
        )
        return self._stats

    def sampled_tokens(self, layer: int | None = None) -> pd.DataFrame:
        """DataFrame[token_id, token, count] of the types with stored samples."""
        if layer is not None:
            self.check_layer(layer)
        if self._sampled is None:
            if "samples" not in self.table_names:
                self._sampled = pd.DataFrame(
                    {"token_id": np.zeros(0, np.int64), "token": [], "count": np.zeros(0, np.int64)}
                )
            else:
                self._sampled = with_readable(
                    self.query(
                        f"SELECT token_id, any_value(token) AS token, count(*) AS count FROM samples "
                        f"WHERE layer = {int(self.layers[0])} GROUP BY token_id ORDER BY token_id",
                        "samples",
                    ).to_pandas()
                )
        return self._sampled.copy()

    @property
    def has_contexts(self) -> bool:
        """True if samples carry their sentence and position (runs made since the token explorer)."""
        return "sentence_id" in self.sample_columns

    def samples(self, layer: int, token_ids: Iterable[int] | None = None) -> pd.DataFrame:
        """DataFrame[token_id, token, i, vector, sentence_id, position, char_start, char_end] of raw
        embeddings (``vector``: float32 (d,)); the context columns are -1 in runs older than the explorer."""
        self.check_layer(layer)
        if layer not in self._samples:
            if "samples" not in self.table_names:
                tab = None
            else:
                ctx = ", ".join(
                    c if c in self.sample_columns else f"-1 AS {c}"
                    for c in ("sentence_id", "position", "char_start", "char_end")
                )
                tab = self.query(
                    f"SELECT token_id, token, i, vector, {ctx} FROM samples WHERE layer = {int(layer)} "
                    "ORDER BY token_id, i",
                    "samples",
                )
            if tab is None or tab.num_rows == 0:
                e = np.zeros(0, np.int64)
                self._samples[layer] = (e, [], e, np.zeros((0, self.dim), np.float32), e, e, e, e)
            else:
                self._samples[layer] = (
                    tab.column("token_id").to_numpy(),
                    tab.column("token").to_pylist(),
                    tab.column("i").to_numpy(),
                    list_to_matrix(tab.column("vector"), self.dim),
                    *(tab.column(c).to_numpy() for c in ("sentence_id", "position", "char_start", "char_end")),
                )
        ids, toks, i, mat, sent, pos, c0, c1 = self._samples[layer]
        sel = np.ones(ids.size, bool) if token_ids is None else np.isin(ids, np.asarray(list(token_ids), np.int64))
        idx = np.flatnonzero(sel)
        return with_readable(
            pd.DataFrame(
                {
                    "token_id": ids[idx],
                    "token": [toks[k] for k in idx],
                    "i": i[idx],
                    "vector": list(mat[idx]),
                    "sentence_id": sent[idx],
                    "position": pos[idx],
                    "char_start": c0[idx],
                    "char_end": c1[idx],
                }
            )
        )

    def sentences(self, sentence_ids: Iterable[int] | None = None) -> dict[int, str]:
        """{sentence_id: text} of the sentences behind the samples ({} for older runs)."""
        if "sentences" not in self.table_names:
            return {}
        df = self.table("sentences")
        if sentence_ids is not None:
            df = df[df["sentence_id"].isin(list(sentence_ids))]
        return dict(zip(df["sentence_id"].astype(int), df["text"]))


def _open_connection(path: Path) -> tuple[duckdb.DuckDBPyConnection, tuple]:
    """A read-only connection and the identity (inode, size, mtime) of the very file it opened."""
    for attempt in range(3):  # a file replaced between the stat and the connect: read it again
        try:
            fid = file_version(path)
        except FileNotFoundError:
            raise NormvarError(f"run file not found: {path}", fix="list runs with `normvar show`") from None
        con = _connect_ro(path)
        if attempt == 2 or file_version(path) == fid:
            return con, fid
        con.close()
    raise AssertionError("unreachable")


def open_run(path) -> Run:
    """Open a published run: read the small tables into memory and close the file at once."""
    path = Path(path)
    if not os.path.lexists(path):
        raise NormvarError(f"run file not found: {path}", fix="list runs with `normvar show` or check the path")
    con, fid = _open_connection(path)
    try:
        try:
            meta = _read_meta(con)
            why = damage(con, fid[1], meta)
            if why:
                raise _damaged(path, why)
            names = table_names(con)
            sample_cols = [
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = 'samples'"
                ).fetchall()
            ]
            token_stats = con.sql(
                "SELECT layer, token_id, token, n, q, m, v FROM token_stats ORDER BY layer, token_id"
            ).df()
            layer_stats = con.sql("SELECT * FROM layer_stats ORDER BY layer").df()
            sl = con.sql("SELECT * FROM sentence_lengths ORDER BY words").df()
            fh = con.sql("SELECT * FROM frequency_hist ORDER BY log10_n_left").df()
        except duckdb.Error as exc:
            raise NormvarError(
                f"{path} is not a complete normvar run file: {str(exc).splitlines()[0]}", fix="recompute the run"
            ) from None
    finally:
        con.close()
    return Run(
        name=meta.get("name") or path.stem,
        path=path,
        meta=meta,
        layers=list(meta["layers"]),
        table_names=names,
        sample_columns=sample_cols,
        _token_stats=with_readable(token_stats),
        _layer_stats=layer_stats,
        _sentence_lengths=sl,
        _frequency_hist=fh,
        version=fid,
    )


LIST_COLUMNS = [
    "name",
    "model",
    "corpus",
    "n_types",
    "n_embeddings",
    "num_layers",
    "dim",
    "norm_placement",
    "created_at",
    "path",
    "status",
    "problem",
    "source",
    "sweep",
    "step",
]


def skipped_measures(meta: dict) -> dict[str, str]:
    """{measure: why} for the measures a run asked for but could not hold (its ``notes.skipped``)."""
    notes = meta.get("notes")
    skipped = notes.get("skipped") if isinstance(notes, dict) else None
    return {str(k): str(v) for k, v in skipped.items() if v} if isinstance(skipped, dict) else {}


def read_meta(path, *, check: bool = False) -> dict:
    """Only the ``run`` row of a run file (opened read-only and closed at once); with ``check``
    also the cheap integrity check (a damaged file raises NormvarError)."""
    path = Path(path)
    con, fid = _open_connection(path)
    try:
        try:
            meta = _read_meta(con)
            why = damage(con, fid[1], meta) if check else None
            if why:
                raise _damaged(path, why)
            return meta
        except duckdb.Error as exc:
            raise NormvarError(
                f"{path} is not a normvar run file: {str(exc).splitlines()[0]}", fix="recompute the run"
            ) from None
    finally:
        con.close()


def list_runs(data_dir=None, *, errors: list | None = None, include_damaged: bool = False) -> pd.DataFrame:
    """One row per published run under ``<data_dir>/runs`` (newest first): name, model, corpus,
    n_types, n_embeddings, num_layers, dim, norm_placement, created_at, path, status ("ok" or
    "damaged") and problem. Each file gets the cheap integrity check (``damage``). Damaged files
    are listed (status "damaged") with ``include_damaged``, else skipped; either way they are
    reported in ``errors`` (list of (path, message)) when given. Never raises."""
    from normvar_core.datadir import DataDir

    dd = DataDir.at(data_dir)
    rows: list[dict] = []
    try:
        files = dd.published_runs()
    except OSError:
        files = []
    for p in files:
        try:
            m = read_meta(p, check=True)
        except Exception as exc:
            if errors is not None:
                errors.append((p, str(exc)))
            if include_damaged:
                rows.append({"name": p.stem, "path": str(p), "status": "damaged", "problem": str(exc)})
            continue
        rows.append(
            {
                "name": p.stem,
                "model": m.get("model"),
                "corpus": m.get("corpus_name"),
                "n_types": m.get("n_types"),
                "n_embeddings": m.get("n_embeddings"),
                "num_layers": m.get("num_layers"),
                "dim": m.get("dim"),
                "norm_placement": m.get("norm_placement"),
                "created_at": m.get("created_at"),
                "path": str(p),
                "status": "ok",
                "problem": None,
                "source": m.get("source") or "model",
                "sweep": m.get("sweep"),
                "step": m.get("step"),
            }
        )
    return pd.DataFrame(rows, columns=LIST_COLUMNS)


def resolve_run(ref: str, data_dir=None) -> Path:
    """A run name (looked up in ``<data_dir>/runs``) or a path to a ``.duckdb`` file."""
    from normvar_core.datadir import DataDir

    p = Path(ref)
    if p.suffix == ".duckdb" or os.sep in ref or p.exists():
        if not p.exists():
            raise NormvarError(f"run file not found: {p}", fix="check the path")
        return p
    dd = DataDir.at(data_dir)
    cand = dd.run_path(ref)
    if not cand.exists():
        known = [q.stem for q in dd.published_runs()]
        raise NormvarError(
            f"no run named {ref!r} in {dd.runs}",
            fix=("known runs: " + ", ".join(known[:10])) if known else "compute one with `normvar compute`",
        )
    return cand


__all__ = ["Run", "open_run", "read_meta", "skipped_measures", "list_runs", "resolve_run", "LIST_COLUMNS"]
