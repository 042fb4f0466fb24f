"""The layer loop's temporaries: the peak memory one batch's ``update_all`` holds above what was held before it
(the state, the batch's states), with the default measures on, against the term the memory plan counts for them
(``memory.terms.pass_bytes``: 3·N·d·8, "the measures' float64 temporaries of a layer").

Each (d, batch size) runs in its own process (``update_peak``): Gaussian states
(``sources.GaussianSource``, 4 layers) for a synthetic plan of 400 sentences of 20–24 tokens, the default
RunConfig's measures built and primed, one batch fed to warm them, then the next batch's ``update_all`` with VmHWM
reset just before it (``/proc/self/clear_refs``). ``MALLOC_MMAP_THRESHOLD_=65536`` is set in the child so that every
array of 64 KiB or more is its own mapping, returned to the system when freed: the resident set then follows what
is live, not what glibc's heap kept.
Prints a markdown table: N (the batch's tokens), d, the peak above the baseline, it in units of 8·N·d and of 8·d²,
the plan's term and the ratio.
Usage: .venv/bin/python benchmarks/bench_update_peak.py [--dims 1024,2048,3072] [--batch-sizes 32,128]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


UPDATE_CHILD = r"""
import json, sys
import torch
from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures import MEASURES, prime
from normvar_core.pipeline.measures.layerview import update_all
from normvar_core.pipeline.run_plan import synthetic_plan
from normvar_core.pipeline.sources import GaussianSource

d, batch_size = {d}, {batch_size}
layers = [0, 1, 2, 3]


def status(key):
    return int(next(x for x in open("/proc/self/status") if x.startswith(key)).split()[1]) * 1024


cfg = RunConfig(model="gaussian")
plan = synthetic_plan(cfg, n_sentences=400, vocab_size=50, layers=layers, batch_size=batch_size, min_len=20, max_len=24)
source = GaussianSource(dim=d, layers=layers, seed=1)
ctx = RunContext(cfg=cfg, layers=layers, dim=d, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
prime(ctx, source)
measures = {{c.name: m for c in MEASURES if (m := c.for_run(ctx)) is not None}}
batches = source.batches(plan, 0, len(plan.batches))
update_all(measures, next(batches))
batch = next(batches)
before = status("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")
update_all(measures, batch)
print(json.dumps(dict(n=batch.size, d=d, peak=status("VmHWM:") - before, measures=sorted(measures))))
"""


def update_peak(d: int, batch_size: int) -> dict:
    """{n, d, peak, measures}: the peak bytes one batch's ``update_all`` holds above what was held before it, with
    the default RunConfig's measures on Gaussian states of dimension d (4 layers, a synthetic plan of 400 sentences
    of 20–24 tokens in batches of ``batch_size``), in its own process; glibc maps every array of 64 KiB or more on
    its own (``MALLOC_MMAP_THRESHOLD_``), so the resident set follows what is live."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), MALLOC_MMAP_THRESHOLD_="65536", OMP_WAIT_POLICY="PASSIVE")
    out = subprocess.run(
        [sys.executable, "-c", UPDATE_CHILD.format(d=d, batch_size=batch_size)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", default="1024,2048,3072")
    ap.add_argument("--batch-sizes", default="32,128")
    args = ap.parse_args()
    rows = []
    for bs in (int(x) for x in args.batch_sizes.split(",")):
        for d in (int(x) for x in args.dims.split(",")):
            rows.append(update_peak(d, bs))
    print(f"measures on: {', '.join(rows[0]['measures'])}\n")
    print("| N | d | peak above the baseline (MB) | / 8·N·d | / 8·d² | the plan's 3·N·d·8 (MB) | peak / term |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        n, d, peak = r["n"], r["d"], r["peak"]
        ratios = f"{peak / (8 * n * d):.1f} | {peak / (8 * d * d):.1f}"
        term = 3 * n * d * 8  # memory.terms.pass_bytes: the measures' float64 temporaries of a layer
        print(f"| {n:,} | {d:,} | {peak / 1e6:,.0f} | {ratios} | {term / 1e6:,.0f} | {peak / term:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
