"""Sharded (Ray, local cluster, K actors) versus single-process, on CPU: equal results, and the overhead.

MiniLM on the first N sentences (default 600) of the shipped novels with every default accumulator
(moments, samples, geometry, self-similarity, outliers). Runs `compute_run` with `--executor local`,
then with `--executor ray --workers K` (a local Ray started by the run, as a user without a cluster
gets it), and reports wall-clock seconds of each and the largest relative difference of token_stats
and layer_geometry between the two published files. On a 2-core box the actors share the cores the
single process already used, so the sharded run can only be slower: what this measures is Ray's fixed
cost (start-up, actors loading the model) and that the merge is exact.

Usage: .venv/bin/python benchmarks/bench_ray.py [--sentences N] [--workers K]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb  # noqa: E402
import numpy as np  # noqa: E402

from normvar_core.config import RunConfig  # noqa: E402
from normvar_core.pipeline.compute import compute_run  # noqa: E402


def _frame(path: Path, sql: str):
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.sql(sql).df()
    finally:
        con.close()


def _max_rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=600)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths, secs = {}, {}
        for executor in ("local", "ray"):
            cfg = RunConfig(model="minilm", max_sentences=args.sentences, name=f"bench-{executor}", device="cpu",
                            executor=executor, workers=args.workers if executor == "ray" else None)
            t = time.perf_counter()
            paths[executor] = compute_run(cfg, tmp)
            secs[executor] = time.perf_counter() - t
        diffs = {}
        for table, cols, order in (("token_stats", ("n", "q", "m", "v"), "layer, token_id"),
                                   ("layer_geometry", ("anisotropy", "participation_ratio", "trace", "mean_cosine",
                                                       "twonn_id"), "layer")):
            a = _frame(paths["ray"], f"SELECT * FROM {table} ORDER BY {order}")
            b = _frame(paths["local"], f"SELECT * FROM {table} ORDER BY {order}")
            diffs[table] = max(_max_rel(a[c], b[c]) for c in cols)
    print(f"MiniLM, {args.sentences} sentences, {os.cpu_count()} cores, Ray with {args.workers} actors\n")
    print("| executor | seconds | max rel. diff vs local |\n|---|---:|---|")
    print(f"| local | {secs['local']:.1f} | — |")
    print(f"| ray ({args.workers} actors) | {secs['ray']:.1f} | token_stats {diffs['token_stats']:.1e}, "
          f"layer_geometry {diffs['layer_geometry']:.1e} |")


if __name__ == "__main__":
    main()
