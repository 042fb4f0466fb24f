"""A Gaussian null at the study's scale: bert-base shape (13 layers x 768 d x 30,000 types, counts
summing to ~12M embeddings per layer) drawn from sufficient statistics (stats.null), per kind.
Usage: .venv/bin/python benchmarks/bench_null.py"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from normvar_core.stats.null import null_stats
from normvar_core.stats.tokenstats import TokenStats

L, T, d = 13, 30_000, 768
rng = np.random.default_rng(0)
n = np.maximum(1, (12_000_000 * (np.arange(1, T + 1) ** -1.0) / np.sum(np.arange(1, T + 1) ** -1.0))).astype(np.int64)
mean = rng.standard_normal((L, T, d)).astype(np.float32)
base = TokenStats(np.arange(T), n, mean, np.full((L, T), 200.0), np.full((L, T), 20.0), np.full((L, T), 180.0))
totals = pd.DataFrame({"layer": np.arange(L), "q": 200.0, "m": 20.0, "v": 180.0})
print(f"bert-base shape: {L} layers x {T:,} types x {d} d, sum n_t = {n.sum():,} embeddings per layer\n")
print("| kind | seconds |\n|---|---:|")
for kind in ("isotropic", "offset", "matched"):
    t = time.perf_counter()
    null_stats(kind, base, totals, seed=0)
    print(f"| {kind} | {time.perf_counter() - t:.1f} |")

# The null's layer geometry (stats.null_geometry): exact between-type scatter (T x d^2 per layer), a
# rescaled Wishart for the within part, a 16,384 sample for TwoNN / cosines / the norm spread.
from normvar_core.pipeline.measures.geometry import host_search  # noqa: E402  -- this part's imports
from normvar_core.stats.null import null_params  # noqa: E402  -- this part's imports
from normvar_core.stats.null_geometry import null_layer_geometry  # noqa: E402  -- this part's imports

print("\n| kind | geometry seconds (13 layers) |\n|---|---:|")
for kind in ("isotropic", "matched"):
    null = null_stats(kind, base, totals, seed=0)
    t = time.perf_counter()
    for li, mu, s2 in null_params(kind, base, totals, seed=0):
        r = np.random.default_rng([0, li])
        null_layer_geometry(mu, s2, null.mean[li], null.v[li] * null.n, null.n, 16384, r, search=host_search)
    print(f"| {kind} | {time.perf_counter() - t:.1f} |")
