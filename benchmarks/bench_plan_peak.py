"""The memory plan against the measured peak where the hidden states dominate: a random Llama decoder (d = 1,024,
16 layers, an MLP 128 wide: 43 M parameters, 0.2 GB of weights) whose per-layer state — covariances, the TwoNN
sample, the occurrences, their early pass — outweighs its weights. `normvar plan --json` (no weights) versus the
peak RSS of `normvar compute` with the same options, each in its own process (ru_maxrss of the child).

Target: the measured peak at most the plan's host figure and at least 80 % of it (docs/scale.md, "Where the
states dominate"; the slow test ``tests/test_plan_peak.py`` asserts it on 900 sentences). Usage:
.venv/bin/python benchmarks/bench_plan_peak.py [--sentences 20000] [--dim 1024] [--layers 16]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main() -> None:
    from model_dirs import build_decoder
    from peak_rss import corpus_of, plan_and_peak

    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=20000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--intermediate", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="normvar-peak-"))
    model = build_decoder(root, dim=args.dim, layers=args.layers, intermediate=args.intermediate)
    r = plan_and_peak(model, corpus_of(root / "c.txt", args.sentences), root / "data", "--batch-size",
                      str(args.batch_size))
    p, mb = r["plan"], 2**20
    measure = sum(b for k, b in p["measures"].items() if k not in p["dropped"])
    print("| shape | sentences | weights (MB) | state (MB) | early pass (MB) | plan host (MB) | peak RSS (MB) | "
          "peak / plan | seconds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| d = {args.dim}, {args.layers} layers, MLP {args.intermediate} | {args.sentences:,} | "
          f"{p['weights_bytes'] / mb:,.0f} | {measure / mb:,.0f} | {p['early_pass']['bytes'] / mb:,.0f} | "
          f"{p['total_bytes'] / mb:,.0f} | {r['peak'] / mb:,.0f} | {r['peak'] / p['total_bytes']:.2f} | {r['secs']:.0f} |")


if __name__ == "__main__":
    main()
