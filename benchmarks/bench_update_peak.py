"""The layer loop's temporaries: the peak memory one batch's ``update_all`` holds above what was held before it
(the state, the batch's states), with the default measures on, against the term the memory plan counts for them
(``memory.terms.pass_bytes``: 3·N·d·8, "the measures' float64 temporaries of a layer").

Each (d, batch size) runs in its own process (``tests/peak_rss.update_peak``): Gaussian states
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
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", default="1024,2048,3072")
    ap.add_argument("--batch-sizes", default="32,128")
    args = ap.parse_args()
    from peak_rss import update_peak

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
