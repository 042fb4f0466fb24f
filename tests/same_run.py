"""``assert_same_run``: two runs of one model on one corpus hold the same tables — every table of the run file
and the run row but for how each run ran — exactly within one process, to float32 rounding across processes
(tests/cross_process.py)."""

from __future__ import annotations

import json

import cross_process
import numpy as np
import pandas as pd

# what differs between executors by design: how the run ran, not what it measured; and where the corpus was read
# from: the tests' Ray runs read a copy of the local run's file under another name (corpus_sha256 must be equal)
HOW_IT_RAN = {"seconds", "created_at", "corpus_name"}
RAY_OPTIONS = {"executor", "workers", "ray_address", "corpus"}
EXECUTION_NOTES = {
    "executor",
    "ray_workers",
    "shards",
    "ray_nodes",
    "oom_splits",
    "resumed_batches",
    "rerun_ranges",
    "merge_rollbacks",
    "tokenize_cpu_s",
    "read_cpu_s",
    "resumed_from_batch",
    "max_rows_after_oom",
}


def tables_in(path) -> list[str]:
    """The tables of a run file, read from the file itself (DuckDB's catalogue), not from normvar's list."""
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        return sorted(r[0] for r in con.sql("SELECT table_name FROM information_schema.tables").fetchall())
    finally:
        con.close()


def same_run_row(a, b, source: frozenset = frozenset()):
    """``source``: run-row columns and options naming where the corpus came from, which two runs of the same
    sentences read from different sources (a text file, a dataset) do not share."""
    x, y = a.table("run").iloc[0], b.table("run").iloc[0]
    assert "corpus_sha256" in source or x["corpus_sha256"] == y["corpus_sha256"]
    for c in x.index:
        if c in HOW_IT_RAN or c in source:
            continue
        if c in ("options", "notes"):
            ox, oy = json.loads(x[c]), json.loads(y[c])
            # runs of one selection from different sources: their selection notes are compared by the caller
            drop = (RAY_OPTIONS | source) if c == "options" else EXECUTION_NOTES | ({"corpus"} if source else set())
            for o in (ox, oy):
                for k in drop:
                    o.pop(k, None)
                # the memory plan: the free memory measured when each run started, and an estimate of what the
                # driver holds (its encoding arrays: 56 bytes apart on a JSONL corpus); its decisions are the
                # measures, compared above
                o.pop("memory", None)
                o.get("corpus", {}).pop("path", None)
            assert ox == oy, (c, ox, oy)
        elif isinstance(x[c], np.ndarray):
            np.testing.assert_array_equal(x[c], y[c], err_msg=c)
        else:
            assert x[c] == y[c] or (pd.isna(x[c]) and pd.isna(y[c])), (c, x[c], y[c])


def assert_same_run(a, b, source: frozenset = frozenset(), *, one_process: bool = False):
    """Every table of the run file equal, the run row but for how each run ran (its executor, timings and free
    memory) and, ``source``, where its corpus came from. Runs of ``one_process``: 1e-12 relative, the float32
    means and coordinates to an ulp or two; runs whose hidden states came from other processes (Ray actors):
    to float32 rounding (tests/cross_process.py)."""
    rtol = 1e-12 if one_process else cross_process.RTOL
    ulps = 2.0**-23 if one_process else cross_process.RTOL  # float32 values: an ulp, or float32 rounding
    names = tables_in(a.path)
    assert names == tables_in(b.path) and "sentence_lengths" in names and len(names) >= 15, names
    assert a.measures == b.measures
    for t in names:
        if t == "run":
            same_run_row(a, b, source)
            continue
        x, y = a.table(t), b.table(t)
        assert list(x.columns) == list(y.columns) and len(x) == len(y), t
        arrays = [c for c in x.columns if len(x) and isinstance(x[c].iloc[0], np.ndarray)]
        key = [c for c in x.columns if c not in arrays and not pd.api.types.is_float_dtype(x[c])]
        key += [c for c in x.columns if pd.api.types.is_float_dtype(x[c])]  # ties (pair cosines): by value
        x, y = x.sort_values(key).reset_index(drop=True), y.sort_values(key).reset_index(drop=True)
        for c in x.columns:
            if c in arrays:
                if t == "token_means":  # stored in float32: exact float64 sums may round 1 ulp apart
                    np.testing.assert_allclose(np.stack(x[c]), np.stack(y[c]), rtol=ulps, atol=1e-30)
                elif one_process:
                    np.testing.assert_array_equal(np.stack(x[c]), np.stack(y[c]), err_msg=f"{t}.{c}")
                else:  # the sampled hidden states themselves
                    cross_process.assert_close(np.stack(x[c]), np.stack(y[c]), err_msg=f"{t}.{c}")
            elif not pd.api.types.is_numeric_dtype(x[c]) or pd.api.types.is_integer_dtype(x[c]):
                assert x[c].tolist() == y[c].tolist(), (t, c)
            else:
                yv = y[c].to_numpy(np.float64)
                # a value at its column's rounding floor (eigenvalues of a covariance a LayerNorm makes singular,
                # a layer-0 V(X) = Q − M that cancels to 1e-8 of Q) compares against the column's scale: rtol of it
                finite = np.abs(yv[np.isfinite(yv)])
                atol = rtol * finite.max() if finite.size and finite.max() > 0 else 1e-300
                # sqrt(Σ‖x‖²/n − mean²)/mean: the difference cancels to a few ulps of mean² when every norm is
                # equal (LayerNorm) — the geometry's norm C.V. and the C.V. of Q(X_t) in the intervals table: an
                # error ε of mean² moves it by up to √ε
                noisy = (x["quantity"] == "cv_q").to_numpy() if t == "intervals" else np.full(len(x), c == "norm_cv")
                if t == "occurrence_axes" and c.startswith("angle"):  # near 0: compared with their own floor below
                    continue
                xv = x[c].to_numpy(np.float64)
                floor = 4 * np.sqrt(np.finfo(float).eps if one_process else rtol)
                for rows, tol in ((noisy, floor), (~noisy, atol)):
                    np.testing.assert_allclose(xv[rows], yv[rows], rtol=rtol, atol=tol, err_msg=f"{t}.{c}")
    # the means are stored in float32: the exact float64 values may round to neighbouring floats (1 ulp)
    np.testing.assert_allclose(a.stats().mean, b.stats().mean, rtol=ulps, atol=1e-30)
    # every occurrence at the same place: float32 coordinates from float64 sums merged in another order (an ulp
    # or two of the layer's largest coordinate); the axes' angles and variances from the same merged state
    keys = ["layer", "sentence_id", "position"]
    x, y = (r.table("occurrences").sort_values(keys).reset_index(drop=True) for r in (a, b))
    assert x[keys + ["token_id"]].equals(y[keys + ["token_id"]]) and len(x) > 0
    for c in ("x", "y"):
        np.testing.assert_allclose(x[c], y[c], rtol=0, atol=4 * ulps * float(np.abs(y[c]).max()))
    # an angle near 0 is arccos(1 − ε): ~1e-6° in one process; an ε of float32 rounding moves it by up to √(2ε) rad
    angle_atol = 1e-4 if one_process else np.degrees(np.sqrt(2 * rtol))
    x, y = a.table("occurrence_axes"), b.table("occurrence_axes")
    assert x["n"].tolist() == y["n"].tolist()
    for c in ("angle_x_deg", "angle_y_deg", "var_x", "var_y"):
        np.testing.assert_allclose(
            x[c], y[c], rtol=1e-9 if one_process else rtol, atol=angle_atol if c.startswith("angle") else 0
        )
