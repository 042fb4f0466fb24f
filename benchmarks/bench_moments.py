"""Embeddings per second of TokenMoments.update versus the study's per-embedding loop.

Data: batches of 20k embeddings (one layer), d = 384 and 768, 10k token types with Zipf-like
counts (p_t ~ 1/rank). Reported: the median over repeated batches after a warm-up batch.

  * loop        — the study's Algorithm 1 shape: a Python dict keyed by token, float32 NumPy
                  running mean and running mean squared norm, one embedding at a time
  * naive torch — per batch: fresh float64 copy, index_add_ of x and ||x||^2 into fresh tables
  * normvar     — TokenMoments (CPU: fused numba kernel; 'torch' backend: index_add_ path)
  * normvar GPU — TokenMoments on cuda, when a GPU is present

Usage: python benchmarks/bench_moments.py [--batches 12] [--loop-batches 2]
Prints a markdown table (pasted into docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from normvar_core import TokenMoments

N_BATCH = 20_000
N_TYPES = 10_000


def make_data(d: int, n_batches: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, N_TYPES + 1)
    p /= p.sum()
    data = []
    for _ in range(min(n_batches, 4)):  # reuse 4 distinct batches to bound memory
        X = rng.normal(size=(1, N_BATCH, d)).astype(np.float32)
        ids = rng.choice(N_TYPES, N_BATCH, p=p)
        data.append((torch.from_numpy(X), torch.from_numpy(ids)))
    return [data[i % len(data)] for i in range(n_batches)]


def study_loop(batches):
    """Algorithm 1 of the study: per-embedding running mean and mean squared norm (float32)."""
    n, mu, q = {}, {}, {}
    times = []
    for X, ids in batches:
        x = X[0].numpy()
        t0 = time.perf_counter()
        for i, t in enumerate(ids.tolist()):
            e = x[i]
            k = n.get(t, 0) + 1
            n[t] = k
            if k == 1:
                mu[t] = e.copy()
                q[t] = np.float32(e @ e)
            else:
                mu[t] += (e - mu[t]) / np.float32(k)
                q[t] += (np.float32(e @ e) - q[t]) / np.float32(k)
        times.append(time.perf_counter() - t0)
    return times


def naive_torch(batches, d):
    """Fresh float64 copies and N x d temporaries every batch."""
    s1 = torch.zeros((N_TYPES, d), dtype=torch.float64)
    s2 = torch.zeros(N_TYPES, dtype=torch.float64)
    cnt = torch.zeros(N_TYPES, dtype=torch.float64)
    times = []
    for X, ids in batches:
        t0 = time.perf_counter()
        x = X[0].to(torch.float64)
        s1 += torch.zeros_like(s1).index_add_(0, ids, x)
        s2 += torch.zeros_like(s2).index_add_(0, ids, (x * x).sum(1))
        cnt += torch.bincount(ids, minlength=N_TYPES).to(torch.float64)
        times.append(time.perf_counter() - t0)
    return times


def normvar(batches, d, device="cpu", backend="auto"):
    measure = TokenMoments(1, d, device=device, backend=backend)
    times = []
    for X, ids in batches:
        if device != "cpu":
            X, ids = X.to(device), ids.to(device)
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        measure.update(X, ids)
        if device != "cpu":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def rate(times) -> float:
    warm = times[1:] if len(times) > 1 else times
    return N_BATCH / statistics.median(warm)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--loop-batches", type=int, default=2)
    args = ap.parse_args()
    rows = []
    for d in (384, 768):
        batches = make_data(d, args.batches)
        loop = rate(study_loop(batches[: args.loop_batches]))
        res = {
            "loop (study, float32 dict)": loop,
            "naive torch (float64 copies)": rate(naive_torch(batches, d)),
            "normvar CPU (numba kernel)": rate(normvar(batches, d)),
            "normvar CPU (torch backend)": rate(normvar(batches, d, backend="torch")),
        }
        if torch.cuda.is_available():
            res["normvar GPU (torch, float64 stats)"] = rate(normvar(batches, d, device="cuda"))
        for name, r in res.items():
            rows.append((d, name, r, r / loop))
    print(f"threads: torch {torch.get_num_threads()}; batches of {N_BATCH} embeddings, {N_TYPES} Zipf types\n")
    print("| d | method | embeddings/s | × loop |")
    print("|---|---|---:|---:|")
    for d, name, r, x in rows:
        print(f"| {d} | {name} | {r:,.0f} | {x:.1f}× |")


if __name__ == "__main__":
    main()
