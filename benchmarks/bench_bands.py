"""Time of TokenStats.corpus(n_min, n_max) (eqs. 8–15 for a frequency band) at the issue's
scale: 30k types × 25 layers × 768 d. The first call builds the block prefix sums; later bands
cost O(L·d). Usage: python benchmarks/bench_bands.py [--dtype float32|float64]"""

from __future__ import annotations

import argparse
import time

import numpy as np

from normvar_core import TokenStats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--types", type=int, default=30_000)
    ap.add_argument("--layers", type=int, default=25)
    ap.add_argument("--dim", type=int, default=768)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    n = np.clip(rng.zipf(1.3, a.types), 1, 10**6)
    mean = rng.normal(size=(a.layers, a.types, a.dim)).astype(a.dtype)
    s = rng.uniform(1, 10, size=(a.layers, a.types)) * n
    stats = TokenStats.from_moments(np.arange(a.types), n, mean, s)
    t0 = time.perf_counter()
    stats.corpus(10, 1e5)
    first = time.perf_counter() - t0
    bands = [(1, 1e6), (10, 1e5), (3, 300), (100, 1e4), (2, 50), (50, 5e5)]
    times = []
    for lo, hi in bands * 3:
        t0 = time.perf_counter()
        stats.corpus(lo, hi)
        times.append(time.perf_counter() - t0)
    print(
        f"| {a.types:,} types × {a.layers} layers × {a.dim} d ({a.dtype} means) | first band "
        f"(builds prefix sums) {first:.2f} s | any later band: median {np.median(times) * 1e3:.1f} ms, "
        f"max {max(times) * 1e3:.1f} ms |"
    )


if __name__ == "__main__":
    main()
