"""Extra cost of the geometry measures (covariance, cosines, TwoNN sample, self-similarity,
outliers) over the moments-only pass, as a share of the forward pass.

One pass over N sentences of the shipped novels (default 2,000) through a model (default MiniLM):
every measure's update is timed separately inside the same pass (same batches, same states),
plus its ``result()`` at the end (eigendecompositions, TwoNN on the 16,384-embedding sample).
Usage: .venv/bin/python benchmarks/bench_geometry.py [--model minilm] [--sentences 2000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.execute.partials import build_measures
from normvar_core.pipeline.execute.prepare import prepare


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--sentences", type=int, default=2000)
    a = ap.parse_args()
    cfg = RunConfig(model=a.model, max_sentences=a.sentences)
    setup = prepare(cfg)
    plan, source, ctx = setup.plan, setup.source, setup.ctx
    measures = build_measures(ctx)
    t_update: dict[str, float] = defaultdict(float)
    t_fwd = 0.0
    it = source.batches(plan, 0, plan.n_batches)
    while True:
        t0 = time.perf_counter()
        try:
            sb = next(it)
        except StopIteration:
            break
        t_fwd += time.perf_counter() - t0
        for name, measure in measures.items():
            t0 = time.perf_counter()
            measure.update(sb)
            t_update[name] += time.perf_counter() - t0
    t_result = {}
    for name, measure in measures.items():
        t0 = time.perf_counter()
        measure.result()
        t_result[name] = time.perf_counter() - t0
    n = measures["moments"].n_embeddings
    print(
        f"{a.model}: {len(plan.sentences):,} sentences, {n:,} embeddings x {len(plan.layers)} layers x "
        f"{source.info.dim} d; torch threads {torch.get_num_threads()}; forward pass {t_fwd:.2f} s\n"
    )
    print("| measure | update s | result s | total, % of forward |")
    print("|---|---:|---:|---:|")
    geo_total = 0.0
    for name in measures:
        tot = t_update[name] + t_result[name]
        if name in ("geometry", "selfsim", "outliers"):
            geo_total += tot
        print(f"| {name} | {t_update[name]:.2f} | {t_result[name]:.2f} | {100 * tot / t_fwd:.1f} % |")
    print(f"| **all geometry measures** | | | **{100 * geo_total / t_fwd:.1f} %** |")


if __name__ == "__main__":
    main()
