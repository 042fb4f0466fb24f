"""Arrow tables of the run file, built from in-memory results (the writer's input) and read back
into numpy (the reader's output). Every builder returns ``{table name: TableData}``, where a
TableData is one ``pyarrow.Table`` or an iterable of them (parts appended in order — the large
tables are written layer by layer so no second full copy is held in memory).

Schemas (``layer`` is always the model's hidden-state index, 0 = input embeddings):

``token_stats(layer INTEGER, token_id BIGINT, token VARCHAR, n BIGINT, q DOUBLE, m DOUBLE, v DOUBLE)``
``token_means(layer INTEGER, token_id BIGINT, mean FLOAT[d])``
``layer_stats(layer INTEGER, n BIGINT, q DOUBLE, m DOUBLE, v DOUBLE, v_w DOUBLE, v_b DOUBLE)``
``frequency_hist(log10_n_left DOUBLE, log10_n_right DOUBLE, count BIGINT)``
``sentence_lengths(words INTEGER, count BIGINT)``
``samples(layer INTEGER, token_id BIGINT, token VARCHAR, i INTEGER, vector FLOAT[d], sentence_id BIGINT, position
INTEGER,
char_start INTEGER, char_end INTEGER)`` (the token's character span in its sentence; -1 unknown)
``sentences(sentence_id BIGINT, text VARCHAR)``
``layer_geometry(layer INTEGER, n, anisotropy, ..., norm_mean, norm_cv)`` (``stats.layer_geometry.layer_row``),
``layer_spectrum(layer INTEGER, k INTEGER, eigenvalue DOUBLE)``, ``pair_cosines(layer INTEGER, cosine FLOAT)``
``occurrences(layer INTEGER, token_id BIGINT, sentence_id BIGINT, position INTEGER, x FLOAT, y FLOAT)``,
``occurrence_axes(layer INTEGER, axes VARCHAR, k, n_early, angle_x_deg, angle_y_deg, var_x, var_y, n)``
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import TypeAlias

import numpy as np
import pyarrow as pa

from normvar_core.constants import FREQ_BIN
from normvar_core.stats.tokenstats import TokenStats

__all__ = [
    "TableData",
    "fixed_list",
    "list_to_matrix",
    "sentence_length_table",
    "frequency_table",
    "moments_tables",
    "samples_tables",
    "sentences_table",
    "geometry_tables",
    "word_units_table",
    "occurrence_tables",
]

TableData: TypeAlias = pa.Table | Iterable[pa.Table]


def fixed_list(mat: np.ndarray) -> pa.FixedSizeListArray:
    """(rows, d) array -> Arrow FixedSizeList<float32>[d] (DuckDB FLOAT[d]) without a Python loop."""
    mat = np.ascontiguousarray(mat, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(mat.reshape(-1)), int(mat.shape[1]))


def list_to_matrix(col, d: int) -> np.ndarray:
    """Arrow FixedSizeList column -> (rows, d) float32 numpy array (one copy)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if len(col) == 0:
        return np.zeros((0, d), dtype=np.float32)
    return col.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, d)


def sentence_length_table(sentence_lengths: np.ndarray) -> pa.Table:
    """Fig. 9: counts of whitespace words per sentence."""
    w = np.asarray(sentence_lengths, dtype=np.int64).reshape(-1)
    words, count = np.unique(w, return_counts=True) if w.size else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    return pa.table({"words": words.astype(np.int32), "count": count.astype(np.int64)})


def frequency_table(n: np.ndarray, width: float = FREQ_BIN) -> pa.Table:
    """Fig. 10: histogram of log10 n_t with bins ``width`` wide starting at 0."""
    n = np.asarray(n, dtype=np.float64)
    n = n[n > 0]
    if n.size == 0:
        e = np.zeros(0)
        return pa.table({"log10_n_left": e, "log10_n_right": e, "count": np.zeros(0, np.int64)})
    x = np.log10(n)
    k = int(math.floor(x.max() / width)) + 1
    edges = np.round(np.arange(k + 1) * width, 10)
    idx = np.minimum((x / width + 1e-9).astype(np.int64), k - 1)
    count = np.bincount(idx, minlength=k)
    return pa.table({"log10_n_left": edges[:-1], "log10_n_right": edges[1:], "count": count.astype(np.int64)})


def moments_tables(stats: TokenStats, tokens: list[str]) -> dict[str, TableData]:
    """token_stats, token_means (layer by layer), layer_stats (eqs. 8–11 over all types), frequency_hist."""
    L, T = stats.num_layers, stats.num_types
    if len(tokens) != T:
        raise ValueError(f"{len(tokens)} token strings for {T} types")
    tok_arr = pa.array([str(t) for t in tokens], type=pa.string())
    token_stats = pa.table(
        {
            "layer": np.repeat(stats.layer_index.astype(np.int32), T),
            "token_id": np.tile(stats.token_ids.astype(np.int64), L),
            "token": pa.concat_arrays([tok_arr] * L) if L else tok_arr,
            "n": np.tile(stats.n.astype(np.int64), L),
            "q": np.asarray(stats.q, np.float64).reshape(-1),
            "m": np.asarray(stats.m, np.float64).reshape(-1),
            "v": np.asarray(stats.v, np.float64).reshape(-1),
        }
    )

    def means() -> Iterator[pa.Table]:
        for l in range(L):  # layer by layer bounds the float32 copy to T x d
            yield pa.table(
                {
                    "layer": np.full(T, stats.layer_index[l], np.int32),
                    "token_id": stats.token_ids.astype(np.int64),
                    "mean": fixed_list(stats.mean[l]),
                }
            )

    ls = stats.corpus()
    layer_stats = pa.table(
        {
            "layer": ls["layer"].to_numpy(np.int32),
            "n": ls["n"].to_numpy(np.int64),
            **{c: ls[c].to_numpy(np.float64) for c in ("q", "m", "v", "v_w", "v_b")},
        }
    )
    return {
        "token_stats": token_stats,
        "token_means": means(),
        "layer_stats": layer_stats,
        "frequency_hist": frequency_table(stats.n),
    }


def samples_tables(
    layer_index,
    *,
    token_ids,
    tokens,
    i,
    vectors,
    sentence_ids,
    positions,
    sentences: dict[int, str] | None,
    char_start=None,
    char_end=None,
) -> dict[str, TableData]:
    """samples (one part per layer) and sentences (only those some sample points at)."""
    s_ids = np.asarray(token_ids, np.int64)
    s_tok = pa.array([str(t) for t in tokens], type=pa.string())
    s_i = np.asarray(i, np.int32)
    s_sent = np.asarray(sentence_ids, np.int64)
    s_pos = np.asarray(positions, np.int32)
    c0 = np.full(s_ids.size, -1, np.int32) if char_start is None else np.asarray(char_start, np.int32)
    c1 = np.full(s_ids.size, -1, np.int32) if char_end is None else np.asarray(char_end, np.int32)

    def parts() -> Iterator[pa.Table]:
        for l, layer in enumerate(layer_index):
            yield pa.table(
                {
                    "layer": np.full(s_ids.size, int(layer), np.int32),
                    "token_id": s_ids,
                    "token": s_tok,
                    "i": s_i,
                    "vector": fixed_list(vectors[l]),
                    "sentence_id": s_sent,
                    "position": s_pos,
                    "char_start": c0,
                    "char_end": c1,
                }
            )

    out: dict[str, TableData] = {"samples": parts()}
    if sentences is not None:
        out["sentences"] = sentences_table(sentences)
    return out


def sentences_table(sentences: dict[int, str]) -> pa.Table:
    """sentence_id, text — only the sentences some table points at."""
    keys = np.array(sorted(sentences), dtype=np.int64)
    return pa.table({"sentence_id": keys, "text": pa.array([sentences[int(k)] for k in keys], type=pa.string())})


def geometry_tables(
    layers, rows: list[dict], spectra: list[np.ndarray], cosines: list[np.ndarray], decimation: list[dict] | None = None
) -> dict[str, pa.Table]:
    """The geometry tables from per-layer rows (``stats.layer_geometry.layer_row`` plus ``layer``), eigenvalues
    (descending) and random-pair cosines — one builder for a model's run and for a Gaussian null — and, for a
    model's run, TwoNN's decimation curve (``stats.twonn_context.layer_context``'s rows plus ``layer``)."""
    layers = np.asarray(layers, np.int32)
    geo = (
        pa.table({k: [r[k] for r in rows] for k in rows[0]}) if rows else pa.table({"layer": pa.array([], pa.int32())})
    )
    spec = pa.table(
        {
            "layer": np.repeat(layers, [len(e) for e in spectra]),
            "k": np.concatenate([np.arange(len(e), dtype=np.int32) for e in spectra])
            if spectra
            else np.zeros(0, np.int32),
            "eigenvalue": np.concatenate(spectra) if spectra else np.zeros(0),
        }
    )
    cos = pa.table(
        {
            "layer": np.repeat(layers, [len(c) for c in cosines]),
            "cosine": np.concatenate(cosines).astype(np.float32) if cosines else np.zeros(0, np.float32),
        }
    )
    out = {"layer_geometry": geo, "layer_spectrum": spec, "pair_cosines": cos}
    if decimation is not None:
        cols = ("layer", "size", "subsets", "twonn_id", "twonn_id_std", "twonn_id_cross", "twonn_id_cross_std")
        out["twonn_decimation"] = pa.table(
            {k: pa.array([r[k] for r in decimation], pa.int32() if k in cols[:3] else pa.float64()) for k in cols}
        )
    return out


def word_units_table(token_ids: np.ndarray, n_subtokens: np.ndarray) -> pa.Table:
    """``word_units(token_id BIGINT, n_subtokens DOUBLE)``: word runs' |T_w| (App. J, Fig. 22), the
    mean number of tokens per occurrence of each word type."""
    return pa.table({"token_id": np.asarray(token_ids, np.int64), "n_subtokens": np.asarray(n_subtokens, np.float64)})


def occurrence_tables(
    layers, xy: np.ndarray, rows: list[dict], *, token_ids: np.ndarray, sentence_ids: np.ndarray, positions: np.ndarray
) -> dict:
    """The Occurrences page's tables: every kept occurrence of every layer at its (x, y) (float32), written one
    layer at a time, and one row per layer saying how its axes were found."""
    tok = pa.array(np.asarray(token_ids, np.int64))
    sent = pa.array(np.asarray(sentence_ids, np.int64))
    pos = pa.array(np.asarray(positions, np.int32))

    def parts() -> Iterator[pa.Table]:
        for li, layer in enumerate(layers):
            yield pa.table(
                {
                    "layer": pa.array(np.full(len(tok), int(layer), np.int32)),
                    "token_id": tok,
                    "sentence_id": sent,
                    "position": pos,
                    "x": pa.array(xy[li, :, 0].astype(np.float32)),
                    "y": pa.array(xy[li, :, 1].astype(np.float32)),
                }
            )

    axes = (
        pa.table({k: [r[k] for r in rows] for k in rows[0]}) if rows else pa.table({"layer": pa.array([], pa.int32())})
    )
    return {"occurrences": parts(), "occurrence_axes": axes}
