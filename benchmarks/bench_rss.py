"""Peak resident memory of `compute` at 5k versus 50k sentences (one subprocess per size).

Each child runs compute_run (MiniLM, shipped novels, first N sentences) and reports its peak RSS
(VmHWM of /proc/self/status: ru_maxrss would carry the parent's peak over the exec) beside the memory plan's
total (the run's ``notes.memory``, the plan ``compute`` followed), |T|, |X| and the size of the statistics
tables (L x |T| x d float64 means). Memory should grow only with the tables
(|T| grows slowly with the corpus), not with |X|.
Prints a markdown table. Usage: .venv/bin/python benchmarks/bench_rss.py [--sizes 5000,50000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {root!r})
from normvar_core.pipeline.execute.local import compute_run
from normvar_core.config import RunConfig
from normvar_core.runs.reader import open_run
t0 = time.perf_counter()
path = compute_run(RunConfig(model="minilm", max_sentences={n}, name="rss{n}"), {data!r}, overwrite=True)
secs = time.perf_counter() - t0
peak = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]) * 1024
m = open_run(path).meta
L = len(m["layers"])
print(json.dumps(dict(n=m["n_sentences"], types=m["n_types"], emb=m["n_embeddings"], peak=peak, secs=secs,
                      tables=L * m["n_types"] * (m["dim"] * 8 + 16), samples=m["notes"]["n_samples"] * L * m["dim"] * 4,
                      file=path.stat().st_size, plan=m["notes"]["memory"]["total_bytes"])))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="5000,50000")
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="normvar-rss-")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        code = CHILD.format(root=str(ROOT), n=n, data=data)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    mb = 2**20
    print(
        "| sentences | embeddings per layer | types | stats tables (MB) | samples (MB) | peak RSS (MB) "
        "| plan (MB) | peak / plan | run file (MB) | seconds |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['emb']:,} | {r['types']:,} | {r['tables'] / mb:.0f} | {r['samples'] / mb:.0f} | "
            f"{r['peak'] / mb:.0f} | {r['plan'] / mb:.0f} | {r['peak'] / r['plan']:.2f} | {r['file'] / mb:.0f} | "
            f"{r['secs']:.0f} |"
        )
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        print(
            f"\nRSS growth {a['n']:,} -> {b['n']:,} sentences: {(b['peak'] - a['peak']) / mb:+.0f} MB; "
            f"statistics tables + samples grew "
            f"{(b['tables'] + b['samples'] - a['tables'] - a['samples']) / mb:+.0f} MB; "
            f"embeddings grew "
            f"x{b['emb'] / a['emb']:.1f}."
        )


if __name__ == "__main__":
    main()
