"""The layer loop's temporaries: the peak memory one batch's ``update_all`` holds above what was held before it
(the state, the batch's states), with the default measures on (or ``--only`` some of them), against the term the
memory plan counts for them (``memory.terms.loop_total``: the shared view and each kept measure's
``update_bytes``).

Each (d, batch size) runs in its own process (``update_peak``): Gaussian states
(``sources.GaussianSource``, 4 layers) for a synthetic plan of 400 sentences of 20–24 tokens, the default
RunConfig's measures built and primed, one batch fed to warm them, then the next batch's ``update_all`` with VmHWM
reset just before it (``/proc/self/clear_refs``). ``MALLOC_MMAP_THRESHOLD_=65536`` is set in the child so that every
array of 64 KiB or more is its own mapping, returned to the system when freed: the resident set then follows what
is live, not what glibc's heap kept.
Prints a markdown table: the measures, N (the batch's tokens), d, L, the peak above the baseline, it in units of
8·N·d and of 8·d², the plan's term and the ratio.
Usage: .venv/bin/python benchmarks/bench_update_peak.py [--dims 1024,2048,3072] [--batch-sizes 32,128] [--layers 4]
       [--only geometry,halves] [--each] [--json]  (``--each``: every default measure alone, then all of them)
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
from normvar_core.pipeline.memory.terms import loop_parts, loop_total
from normvar_core.pipeline.run_plan import synthetic_plan
from normvar_core.pipeline.sources import GaussianSource

d, batch_size, only = {d}, {batch_size}, {only!r}
layers = list(range({layers}))


def status(key):
    return int(next(x for x in open("/proc/self/status") if x.startswith(key)).split()[1]) * 1024


cfg = RunConfig(model="gaussian")
plan = synthetic_plan(cfg, n_sentences=400, vocab_size=50, layers=layers, batch_size=batch_size, min_len=20, max_len=24)
source = GaussianSource(dim=d, layers=layers, seed=1)
ctx = RunContext(cfg=cfg, layers=layers, dim=d, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
prime(ctx, source)
measures = {{c.name: m for c in MEASURES if (m := c.for_run(ctx)) is not None and (not only or c.name in only)}}
batches = source.batches(plan, 0, len(plan.batches))
update_all(measures, next(batches))
batch = next(batches)
before = status("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")
update_all(measures, batch)
peak = status("VmHWM:") - before
rows = len(batch.sentence_runs()[1])
drop = [c.name for c in MEASURES if c.name not in measures]
planned = loop_total(loop_parts(ctx, MEASURES, (rows, 0, batch.size)), drop)
print(json.dumps(dict(n=batch.size, d=d, L=len(layers), peak=peak, planned=planned, measures=sorted(measures))))
"""


def update_peak(d: int, batch_size: int, layers: int = 4, only: tuple[str, ...] = ()) -> dict:
    """{n, d, L, peak, planned, measures}: the peak bytes one batch's ``update_all`` holds above what was held before
    it, with the default RunConfig's measures (``only``: those of them) on Gaussian states of dimension d (``layers``
    layers, a synthetic plan of 400 sentences of 20–24 tokens in batches of ``batch_size``), in its own process;
    glibc maps every array of 64 KiB or more on its own (``MALLOC_MMAP_THRESHOLD_``), so the resident set follows what
    is live. ``planned``: the memory plan's loop term for the same batch and measures."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), MALLOC_MMAP_THRESHOLD_="65536", OMP_WAIT_POLICY="PASSIVE")
    code = UPDATE_CHILD.format(d=d, batch_size=batch_size, layers=layers, only=tuple(only))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def default_on() -> list[str]:
    """The measures a default RunConfig asks for (``--each`` runs each alone), from the registry."""
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.measures import MEASURES

    return [c.name for c in MEASURES if c.asked(RunConfig())]


def square_in_d(n: int = 768, rows: int = 32, layers: int = 4) -> list[str]:
    """The default measures whose declared update (``update_bytes`` of a batch of n tokens in ``rows`` sentences)
    grows as d² — at least 3.5x from d = 1,024 to d = 2,048: those with a d x d product, whose plan is the tightest
    against the peak (``tests/test_update_memory.py`` runs each alone at d = 2,048), from the registry."""
    import torch

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.measures import MEASURES
    from normvar_core.pipeline.run_plan import synthetic_plan

    cfg = RunConfig(model="gaussian")
    kept = list(range(layers))
    plan = synthetic_plan(cfg, n_sentences=400, vocab_size=50, layers=kept, batch_size=32, min_len=20, max_len=24)
    small, large = (
        RunContext(cfg=cfg, layers=kept, dim=d, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
        for d in (1024, 2048)
    )
    return [
        c.name
        for c in MEASURES
        if c.asked(cfg) and c.update_bytes(large, n, rows) >= 3.5 * c.update_bytes(small, n, rows) > 0
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", default="1024,2048,3072")
    ap.add_argument("--batch-sizes", default="32,128")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--only", default="", help="comma-separated measure names (default: every default measure)")
    ap.add_argument("--each", action="store_true", help="each default measure alone, then all of them")
    ap.add_argument("--json", action="store_true", help="one JSON object per run instead of the table")
    args = ap.parse_args()
    sets = [(m,) for m in default_on()] + [()] if args.each else [tuple(x for x in args.only.split(",") if x)]
    if args.json:
        for only in sets:
            for bs in (int(x) for x in args.batch_sizes.split(",")):
                for d in (int(x) for x in args.dims.split(",")):
                    print(json.dumps(update_peak(d, bs, args.layers, only)), flush=True)
        return 0
    print(
        "| measures | N | d | L | peak above the baseline (MB) | / 8·N·d | / 8·d² "
        "| the plan's loop term (MB) | peak / plan |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for only in sets:
        for bs in (int(x) for x in args.batch_sizes.split(",")):
            for d in (int(x) for x in args.dims.split(",")):
                r = update_peak(d, bs, args.layers, only)
                n, peak, plan = r["n"], r["peak"], r["planned"]
                which = ", ".join(only) if only else "all default"
                ratios = f"{peak / (8 * n * d):.1f} | {peak / (8 * d * d):.1f}"
                print(
                    f"| {which} | {n:,} | {d:,} | {r['L']} | {peak / 1e6:,.0f} | {ratios} | {plan / 1e6:,.0f} "
                    f"| {peak / plan:.2f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
