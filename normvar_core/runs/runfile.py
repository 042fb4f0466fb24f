"""The run file: one self-describing DuckDB database per run (``<runs>/<name>.duckdb``).

Tables (users may query them with SQL; ``layer`` is always the model's hidden-state index,
0 = input embeddings):

``run`` — exactly one row describing the run
    name VARCHAR, model VARCHAR (alias, hub id or path as given), revision VARCHAR,
    weights_hash VARCHAR, architecture VARCHAR (e.g. BertModel), norm_placement VARCHAR
    (post / pre / both), norm_type VARCHAR (LayerNorm / RMSNorm), final_norm BOOLEAN (the last
    hidden state is taken after a final norm, as HF does for decoders), num_layers INTEGER
    (transformer blocks of the model), dim INTEGER, layers INTEGER[] (hidden-state indices kept),
    corpus_name VARCHAR, corpus_sha256 VARCHAR, options VARCHAR (JSON: the full RunConfig,
    enough to reproduce the run), n_sentences BIGINT, n_truncated BIGINT, n_embeddings BIGINT
    (|X| per layer), n_types BIGINT (|T|), device VARCHAR, dtype VARCHAR, seconds DOUBLE,
    versions VARCHAR (JSON: torch, transformers, normvar, duckdb, numpy, python),
    created_at TIMESTAMP (UTC), notes VARCHAR (JSON: batches, batch size, OOM splits, ...).
``token_stats(layer INTEGER, token_id BIGINT, token VARCHAR, n BIGINT, q DOUBLE, m DOUBLE, v DOUBLE)``
    per (layer, token type t): n = n_t = |X_t|, q = Q(X_t) (eq. 4), m = M(X_t) (eq. 5),
    v = V(X_t) (eq. 6); q = m + v (eq. 1). ``token`` is the tokenizer's string for the id.
``token_means(layer INTEGER, token_id BIGINT, mean FLOAT[d])``
    mu(X_t) (eq. 3), stored in float32 (M and V above are exact float64 values).
``layer_stats(layer INTEGER, n BIGINT, q DOUBLE, m DOUBLE, v DOUBLE, v_w DOUBLE, v_b DOUBLE)``
    over all token types: Q(X), M(X), V(X) (eq. 8), V_W(X) (eq. 10), V_B(X) (eq. 11).
    Other frequency bands are computed on read (``Run.stats().corpus(n_min, n_max)``).
``sentence_lengths(words INTEGER, count BIGINT)``
    histogram of whitespace words per kept sentence (the study's Fig. 9).
``frequency_hist(log10_n_left DOUBLE, log10_n_right DOUBLE, count BIGINT)``
    histogram of log10 n_t over token types, bins 0.1 wide (Fig. 10).
``samples(layer INTEGER, token_id BIGINT, token VARCHAR, i INTEGER, vector FLOAT[d])``
    a seeded reservoir of raw embeddings (at most ``samples_per_token`` per type and layer) for
    the tokens of App. A's selection plus the 50 most frequent types: the PCA clouds of Fig. 1.

Example: ``SELECT token, n, q, m, v FROM token_stats WHERE layer = 3 ORDER BY n DESC LIMIT 10``.

Publishing is atomic: ``write_run`` writes ``<dir>/.<name>.tmp-<pid>.duckdb``, CHECKPOINTs and
closes it, then links/renames it to its final name — never a half-written run under that name.
``open_run`` opens read-only, copies what it needs and closes at once, so another process may
replace the file at any time (see ENVIRONMENT.md on DuckDB's file locks).
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from normvar_core.errors import NormvarError
from normvar_core.stats.tokenstats import TokenStats

SCHEMA_VERSION = 1
from normvar_core.constants import FREQ_BIN  # width of the log10 n_t bins of frequency_hist (Fig. 10)

RUN_COLUMNS: list[tuple[str, str]] = [
    ("name", "VARCHAR"), ("model", "VARCHAR"), ("revision", "VARCHAR"), ("weights_hash", "VARCHAR"),
    ("architecture", "VARCHAR"), ("norm_placement", "VARCHAR"), ("norm_type", "VARCHAR"),
    ("final_norm", "BOOLEAN"), ("num_layers", "INTEGER"), ("dim", "INTEGER"), ("layers", "INTEGER[]"),
    ("corpus_name", "VARCHAR"), ("corpus_sha256", "VARCHAR"), ("options", "VARCHAR"),
    ("n_sentences", "BIGINT"), ("n_truncated", "BIGINT"), ("n_embeddings", "BIGINT"),
    ("n_types", "BIGINT"), ("device", "VARCHAR"), ("dtype", "VARCHAR"), ("seconds", "DOUBLE"),
    ("versions", "VARCHAR"), ("created_at", "TIMESTAMP"), ("notes", "VARCHAR"),
]
_JSON_COLUMNS = ("options", "versions", "notes")


# ============================================================================ writing
def _ddl(d: int) -> list[str]:
    run_cols = ", ".join(f"{c} {t}" for c, t in RUN_COLUMNS)
    return [
        f"CREATE TABLE run ({run_cols})",
        "CREATE TABLE token_stats (layer INTEGER, token_id BIGINT, token VARCHAR, n BIGINT, "
        "q DOUBLE, m DOUBLE, v DOUBLE)",
        f"CREATE TABLE token_means (layer INTEGER, token_id BIGINT, mean FLOAT[{d}])",
        "CREATE TABLE layer_stats (layer INTEGER, n BIGINT, q DOUBLE, m DOUBLE, v DOUBLE, "
        "v_w DOUBLE, v_b DOUBLE)",
        "CREATE TABLE sentence_lengths (words INTEGER, count BIGINT)",
        "CREATE TABLE frequency_hist (log10_n_left DOUBLE, log10_n_right DOUBLE, count BIGINT)",
        f"CREATE TABLE samples (layer INTEGER, token_id BIGINT, token VARCHAR, i INTEGER, vector FLOAT[{d}])",
    ]


def _fixed_list(mat: np.ndarray) -> pa.FixedSizeListArray:
    """(rows, d) array -> Arrow FixedSizeList<float32>[d] (DuckDB FLOAT[d]) without a Python loop."""
    mat = np.ascontiguousarray(mat, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(mat.reshape(-1)), int(mat.shape[1]))


def _list_to_matrix(col: pa.ChunkedArray | pa.Array, d: int) -> np.ndarray:
    """Arrow FixedSizeList column -> (rows, d) float32 numpy array (one copy)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if len(col) == 0:
        return np.zeros((0, d), dtype=np.float32)
    return col.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, d)


def sentence_length_table(sentence_lengths: np.ndarray) -> pd.DataFrame:
    """Fig. 9: counts of whitespace words per sentence."""
    w = np.asarray(sentence_lengths, dtype=np.int64).reshape(-1)
    if w.size == 0:
        return pd.DataFrame({"words": np.zeros(0, np.int32), "count": np.zeros(0, np.int64)})
    words, count = np.unique(w, return_counts=True)
    return pd.DataFrame({"words": words.astype(np.int32), "count": count.astype(np.int64)})


def frequency_table(n: np.ndarray, width: float = FREQ_BIN) -> pd.DataFrame:
    """Fig. 10: histogram of log10 n_t with bins ``width`` wide starting at 0."""
    n = np.asarray(n, dtype=np.float64)
    n = n[n > 0]
    if n.size == 0:
        return pd.DataFrame({"log10_n_left": [], "log10_n_right": [], "count": np.zeros(0, np.int64)})
    x = np.log10(n)
    k = int(math.floor(x.max() / width)) + 1
    edges = np.round(np.arange(k + 1) * width, 10)
    idx = np.minimum((x / width + 1e-9).astype(np.int64), k - 1)
    count = np.bincount(idx, minlength=k)
    return pd.DataFrame({"log10_n_left": edges[:-1], "log10_n_right": edges[1:], "count": count.astype(np.int64)})


def _run_row(meta: dict, stats: TokenStats, name: str) -> pd.DataFrame:
    row: dict[str, Any] = {c: None for c, _ in RUN_COLUMNS}
    unknown = sorted(set(meta) - set(row))
    if unknown:
        raise ValueError(f"unknown run meta field(s): {unknown}")
    row.update(meta)
    row["name"] = name
    if row["dim"] is None:
        row["dim"] = stats.dim
    row["layers"] = [int(x) for x in (row["layers"] if row["layers"] is not None else stats.layer_index)]
    if row["n_types"] is None:
        row["n_types"] = stats.num_types
    if row["n_embeddings"] is None:
        row["n_embeddings"] = int(stats.n.sum())
    for c in _JSON_COLUMNS:
        if row[c] is not None and not isinstance(row[c], str):
            row[c] = json.dumps(row[c], sort_keys=True, default=str)
    ts = row["created_at"]
    if ts is None:
        ts = _dt.datetime.now(_dt.timezone.utc)
    if isinstance(ts, str):
        ts = _dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    if ts.tzinfo is not None:
        ts = ts.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    row["created_at"] = ts
    return row


def _insert(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table | pd.DataFrame) -> None:
    con.register("_normvar_src", data)
    try:
        con.execute(f"INSERT INTO {table} SELECT * FROM _normvar_src")
    finally:
        con.unregister("_normvar_src")


def write_run(path, *, meta: dict, stats: TokenStats, tokens: list[str], sentence_lengths: np.ndarray,
              samples: dict | None, overwrite: bool = False) -> Path:
    """Write a run file and publish it atomically at ``path``; returns the final path.

    ``tokens[i]`` is the string of ``stats.token_ids[i]``. ``samples`` (optional) maps
    ``token_ids`` (P,), ``tokens`` (P,) and ``vectors`` (L, P, d) (raw embeddings, the layers of
    ``stats.layer_index``), ``i`` (P,) the index of each sample within its type. The file is
    written under ``.<name>.tmp-<pid>.duckdb``, checkpointed and closed, then published; an
    existing run of that name is refused unless ``overwrite``. Nothing is left behind on error.
    """
    path = Path(path)
    if path.suffix != ".duckdb":
        path = path.with_name(path.name + ".duckdb")
    name = path.stem
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not overwrite:
        raise NormvarError(f"run {name!r} already exists: {path}", fix="choose another --name or pass --overwrite")
    if len(tokens) != stats.num_types:
        raise ValueError(f"{len(tokens)} token strings for {stats.num_types} types")
    tmp = path.parent / f".{name}.tmp-{os.getpid()}.duckdb"
    for p in (tmp, Path(str(tmp) + ".wal")):
        p.unlink(missing_ok=True)
    try:
        _write_tables(tmp, meta=meta, stats=stats, tokens=tokens, sentence_lengths=sentence_lengths,
                      samples=samples, name=name)
        _publish(tmp, path, overwrite)
    except BaseException:
        for p in (tmp, Path(str(tmp) + ".wal")):
            try:
                p.unlink(missing_ok=True)
            except OSError:
                pass
        raise
    return path


def _publish(tmp: Path, path: Path, overwrite: bool) -> None:
    """Atomic publish: rename when overwriting; otherwise hard-link (fails if the name exists,
    so two writers never clobber each other) then drop the temp name."""
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise NormvarError(f"run {path.stem!r} already exists: {path}",
                           fix="choose another --name or pass --overwrite") from None
    except OSError:  # file system without hard links: check-then-rename
        if path.exists():
            raise NormvarError(f"run {path.stem!r} already exists: {path}",
                               fix="choose another --name or pass --overwrite") from None
        os.replace(tmp, path)
        return
    tmp.unlink()


def _write_tables(tmp: Path, *, meta, stats: TokenStats, tokens, sentence_lengths, samples, name) -> None:
    L, T, d = stats.num_layers, stats.num_types, stats.dim
    layer_col = np.repeat(stats.layer_index.astype(np.int32), T)
    ids_col = np.tile(stats.token_ids.astype(np.int64), L)
    tok_arr = pa.array([str(t) for t in tokens], type=pa.string())
    con = duckdb.connect(str(tmp))
    try:
        for stmt in _ddl(d):
            con.execute(stmt)
        _insert(con, "run", pd.DataFrame([_run_row(meta, stats, name)]))
        token_stats = pa.table({
            "layer": layer_col, "token_id": ids_col,
            "token": pa.concat_arrays([tok_arr] * L) if L else tok_arr,
            "n": np.tile(stats.n.astype(np.int64), L),
            "q": np.asarray(stats.q, np.float64).reshape(-1), "m": np.asarray(stats.m, np.float64).reshape(-1),
            "v": np.asarray(stats.v, np.float64).reshape(-1),
        })
        _insert(con, "token_stats", token_stats)
        # means layer by layer bounds the float32 copy to T x d
        for l in range(L):
            part = pa.table({"layer": np.full(T, stats.layer_index[l], np.int32),
                             "token_id": stats.token_ids.astype(np.int64), "mean": _fixed_list(stats.mean[l])})
            _insert(con, "token_means", part)
        ls = stats.corpus()
        _insert(con, "layer_stats", ls[["layer", "n", "q", "m", "v", "v_w", "v_b"]].astype(
            {"layer": np.int32, "n": np.int64}))
        _insert(con, "sentence_lengths", sentence_length_table(sentence_lengths))
        _insert(con, "frequency_hist", frequency_table(stats.n))
        if samples is not None and len(samples.get("token_ids", [])):
            s_ids = np.asarray(samples["token_ids"], np.int64)
            s_tok = pa.array([str(t) for t in samples["tokens"]], type=pa.string())
            s_i = np.asarray(samples["i"], np.int32)
            vec = samples["vectors"]
            for l in range(L):
                part = pa.table({"layer": np.full(s_ids.size, stats.layer_index[l], np.int32),
                                 "token_id": s_ids, "token": s_tok, "i": s_i, "vector": _fixed_list(vec[l])})
                _insert(con, "samples", part)
        con.execute("CHECKPOINT")
    finally:
        con.close()


# ============================================================================ reading
def _connect_ro(path: Path) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise NormvarError(f"cannot open run file {path}: {str(exc).splitlines()[0]}",
                           fix="check that it is a normvar run file (normvar show lists runs)") from None


def _read_meta(con: duckdb.DuckDBPyConnection) -> dict:
    df = con.sql("SELECT * FROM run").df()
    if len(df) != 1:
        raise NormvarError("run file has no single run row", fix="recompute the run")
    meta = {}
    for k, v in df.iloc[0].to_dict().items():
        if k in _JSON_COLUMNS:
            v = json.loads(v) if isinstance(v, str) and v else ({} if v is None or v is pd.NA else v)
        elif k == "layers":
            v = [int(x) for x in v]
        elif k == "created_at":
            v = pd.Timestamp(v).strftime("%Y-%m-%dT%H:%M:%SZ") if v is not None and not pd.isna(v) else None
        elif isinstance(v, (np.integer,)):
            v = int(v)
        elif isinstance(v, (np.floating,)):
            v = float(v)
        elif isinstance(v, np.bool_):
            v = bool(v)
        elif v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            v = None
        meta[k] = v
    return meta


def _file_id(path: Path) -> tuple:
    st = path.stat()
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class Run:
    """A published run, held in memory (the DuckDB file is never kept open).

    ``meta`` is the ``run`` row (``meta["options"]`` the RunConfig dict); ``layers`` the stored
    hidden-state indices. Means and samples are read on first use by reopening the file briefly;
    if the file was replaced meanwhile a NormvarError asks to reopen the run."""

    name: str
    path: Path
    meta: dict
    layers: list[int]
    _token_stats: pd.DataFrame = field(repr=False)
    _layer_stats: pd.DataFrame = field(repr=False)
    _sentence_lengths: pd.DataFrame = field(repr=False)
    _frequency_hist: pd.DataFrame = field(repr=False)
    _file_id: tuple = field(repr=False)
    _stats: TokenStats | None = field(default=None, repr=False)
    _samples: dict = field(default_factory=dict, repr=False)
    _sampled: pd.DataFrame | None = field(default=None, repr=False)

    # ---------------------------------------------------------------- small tables
    @property
    def dim(self) -> int:
        return int(self.meta["dim"])

    def token_table(self, layer: int) -> pd.DataFrame:
        """DataFrame[token_id, token, n, q, m, v] of one hidden-state index, by token id."""
        self._check_layer(layer)
        df = self._token_stats[self._token_stats["layer"] == layer]
        return df[["token_id", "token", "n", "q", "m", "v"]].reset_index(drop=True)

    def tokens(self) -> pd.DataFrame:
        """DataFrame[token_id, token, n] of every type (aligned with ``stats().token_ids``)."""
        df = self._token_stats[self._token_stats["layer"] == self.layers[0]]
        return df[["token_id", "token", "n"]].reset_index(drop=True)

    def layer_stats(self) -> pd.DataFrame:
        """DataFrame[layer, n, q, m, v, v_w, v_b] over all types (eqs. 8–11)."""
        return self._layer_stats.copy()

    def sentence_length_hist(self) -> pd.DataFrame:
        """DataFrame[words, count] (Fig. 9)."""
        return self._sentence_lengths.copy()

    def frequency_hist(self) -> pd.DataFrame:
        """DataFrame[log10_n_left, log10_n_right, count] (Fig. 10)."""
        return self._frequency_hist.copy()

    def _check_layer(self, layer: int) -> None:
        if layer not in self.layers:
            raise NormvarError(f"layer {layer} is not stored in run {self.name!r}",
                               fix=f"use one of {self.layers}")

    # ---------------------------------------------------------------- lazy parts
    def _reopen(self) -> duckdb.DuckDBPyConnection:
        """Connect, then check the file is still the one opened: checking first would race with
        an atomic replace between the check and the connect (seen in the soak test)."""
        replaced = NormvarError(f"run file {self.path} was replaced or removed since it was opened",
                                fix="open the run again")
        try:
            con = _connect_ro(self.path)
        except NormvarError:
            if not self.path.exists():
                raise replaced from None
            raise
        try:
            same = _file_id(self.path) == self._file_id
        except OSError:
            same = False
        if not same:
            con.close()
            raise replaced
        return con

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
            for li, layer in enumerate(self.layers):
                tab = con.sql(f"SELECT token_id, mean FROM token_means WHERE layer = {int(layer)} "
                              "ORDER BY token_id").to_arrow_table()
                got = tab.column("token_id").to_numpy()
                if got.size != T or not np.array_equal(got, ids):
                    raise NormvarError(f"run file {self.path} is inconsistent (token_means)", fix="recompute the run")
                mean[li] = _list_to_matrix(tab.column("mean"), d)
        finally:
            con.close()

        def grid(col: str, dtype) -> np.ndarray:
            return ts[col].to_numpy(dtype).reshape(L, T)

        self._stats = TokenStats(token_ids=ids, n=first["n"].to_numpy(np.int64), mean=mean,
                                 q=grid("q", np.float64), m=grid("m", np.float64), v=grid("v", np.float64),
                                 layer_index=np.asarray(self.layers, dtype=np.int64))
        return self._stats

    def sampled_tokens(self, layer: int | None = None) -> pd.DataFrame:
        """DataFrame[token_id, token, count] of the types with stored samples."""
        if self._sampled is None:
            con = self._reopen()
            try:
                lay = self.layers[0]
                self._sampled = con.sql(
                    f"SELECT token_id, any_value(token) AS token, count(*) AS count FROM samples "
                    f"WHERE layer = {int(lay)} GROUP BY token_id ORDER BY token_id").df()
            finally:
                con.close()
        if layer is not None:
            self._check_layer(layer)
        return self._sampled.copy()

    def samples(self, layer: int, token_ids: Iterable[int] | None = None) -> pd.DataFrame:
        """DataFrame[token_id, token, i, vector] of raw embeddings (``vector``: float32 (d,))."""
        self._check_layer(layer)
        if layer not in self._samples:
            con = self._reopen()
            try:
                tab = con.sql(f"SELECT token_id, token, i, vector FROM samples WHERE layer = {int(layer)} "
                              "ORDER BY token_id, i").to_arrow_table()
            finally:
                con.close()
            mat = _list_to_matrix(tab.column("vector"), self.dim)
            self._samples[layer] = (tab.column("token_id").to_numpy(), tab.column("token").to_pylist(),
                                    tab.column("i").to_numpy(), mat)
        ids, toks, i, mat = self._samples[layer]
        sel = np.ones(ids.size, bool) if token_ids is None else np.isin(ids, np.asarray(list(token_ids), np.int64))
        idx = np.flatnonzero(sel)
        return pd.DataFrame({"token_id": ids[idx], "token": [toks[k] for k in idx], "i": i[idx],
                             "vector": list(mat[idx])})

    def sample_matrix(self, layer: int, token_ids: Iterable[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(token_ids (P,), vectors (P, d) float32) — the same as ``samples`` without a DataFrame."""
        df = self.samples(layer, token_ids)  # fills the cache
        ids, _, _, mat = self._samples[layer]
        sel = np.ones(ids.size, bool) if token_ids is None else np.isin(ids, np.asarray(list(token_ids), np.int64))
        return ids[sel], mat[sel] if len(df) else np.zeros((0, self.dim), np.float32)


def open_run(path) -> Run:
    """Open a published run: read the small tables into memory and close the file at once."""
    path = Path(path)
    if not path.exists():
        raise NormvarError(f"run file not found: {path}", fix="list runs with `normvar show` or check the path")
    for _attempt in range(3):  # a file replaced between the stat and the connect: read it again
        fid = _file_id(path)
        con = _connect_ro(path)
        if _file_id(path) == fid:
            break
        con.close()
    try:
        try:
            meta = _read_meta(con)
            token_stats = con.sql("SELECT layer, token_id, token, n, q, m, v FROM token_stats "
                                  "ORDER BY layer, token_id").df()
            layer_stats = con.sql("SELECT * FROM layer_stats ORDER BY layer").df()
            sl = con.sql("SELECT * FROM sentence_lengths ORDER BY words").df()
            fh = con.sql("SELECT * FROM frequency_hist ORDER BY log10_n_left").df()
        except duckdb.Error as exc:
            raise NormvarError(f"{path} is not a complete normvar run file: {str(exc).splitlines()[0]}",
                               fix="recompute the run") from None
    finally:
        con.close()
    return Run(name=meta.get("name") or path.stem, path=path, meta=meta, layers=list(meta["layers"]),
               _token_stats=token_stats, _layer_stats=layer_stats, _sentence_lengths=sl,
               _frequency_hist=fh, _file_id=fid)


LIST_COLUMNS = ["name", "model", "corpus", "n_types", "n_embeddings", "num_layers", "dim",
                "norm_placement", "created_at", "path"]


def read_meta(path) -> dict:
    """Only the ``run`` row of a run file (opened read-only and closed at once)."""
    path = Path(path)
    con = _connect_ro(path)
    try:
        try:
            return _read_meta(con)
        except duckdb.Error as exc:
            raise NormvarError(f"{path} is not a normvar run file: {str(exc).splitlines()[0]}",
                               fix="recompute the run") from None
    finally:
        con.close()


def list_runs(data_dir=None, *, errors: list | None = None) -> pd.DataFrame:
    """One row per published run under ``<data_dir>/runs`` (newest first): name, model, corpus,
    n_types, n_embeddings, num_layers, dim, norm_placement, created_at, path. Unreadable files
    are skipped and reported in ``errors`` (list of (path, message)) when given; never raises."""
    from normvar_core.datadir import DataDir

    dd = data_dir if isinstance(data_dir, DataDir) else DataDir.at(data_dir)
    rows = []
    try:
        files = dd.published_runs()
    except OSError:
        files = []
    for p in files:
        try:
            m = read_meta(p)
        except Exception as exc:  # noqa: BLE001 - a bad file must never break the listing
            if errors is not None:
                errors.append((p, str(exc)))
            continue
        rows.append({"name": m.get("name") or p.stem, "model": m.get("model"), "corpus": m.get("corpus_name"),
                     "n_types": m.get("n_types"), "n_embeddings": m.get("n_embeddings"),
                     "num_layers": m.get("num_layers"), "dim": m.get("dim"),
                     "norm_placement": m.get("norm_placement"), "created_at": m.get("created_at"),
                     "path": str(p)})
    return pd.DataFrame(rows, columns=LIST_COLUMNS)


def resolve_run(ref: str, data_dir=None) -> Path:
    """A run name (looked up in ``<data_dir>/runs``) or a path to a ``.duckdb`` file."""
    from normvar_core.datadir import DataDir

    p = Path(ref)
    if p.suffix == ".duckdb" or os.sep in ref or p.exists():
        if not p.exists():
            raise NormvarError(f"run file not found: {p}", fix="check the path")
        return p
    dd = data_dir if isinstance(data_dir, DataDir) else DataDir.at(data_dir)
    cand = dd.run_path(ref)
    if not cand.exists():
        known = [q.stem for q in dd.published_runs()]
        raise NormvarError(f"no run named {ref!r} in {dd.runs}",
                           fix=("known runs: " + ", ".join(known[:10])) if known else "compute one with `normvar compute`")
    return cand
