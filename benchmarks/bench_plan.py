"""The memory plan against the measured peak: `normvar plan --json` (no weights) versus the peak RSS
of `compute` with the same options, each in its own process (VmHWM of a child running compute_run).

Done when the plan's total is within 15 % of the measured peak on MiniLM and MPNet runs.
Prints a markdown table. Usage: .venv/bin/python benchmarks/bench_plan.py [--cases minilm:5000,minilm:15000,mpnet:2000]
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
import json, sys, time
sys.path.insert(0, {root!r})
from normvar_core.config import RunConfig
from normvar_core.pipeline.execute.local import compute_run
t0 = time.perf_counter()
compute_run(RunConfig(model={model!r}, max_sentences={n}, name="p{n}"), {data!r}, overwrite=True)
hwm = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]) * 1024
print(json.dumps(dict(peak=hwm, secs=time.perf_counter() - t0)))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="minilm:5000,minilm:15000,mpnet:2000")
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="normvar-plan-")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(ROOT))
    rows = []
    for case in args.cases.split(","):
        model, n = case.split(":")
        plan = subprocess.run(
            [
                sys.executable,
                "-m",
                "normvar_core.service.cli",
                "plan",
                "--model",
                model,
                "--max-sentences",
                n,
                "--json",
                "--data-dir",
                data,
            ],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        p = json.loads(plan.stdout)
        code = CHILD.format(root=str(ROOT), model=model, n=int(n), data=data)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        m = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(dict(model=model, n=int(n), plan=p, **m))
        print(json.dumps(rows[-1]["plan"]["measures"]), m, file=sys.stderr)
    mb = 2**20
    print(
        "| model | sentences | types | measures (MB) | pass (MB) | plan total (MB) | measured peak RSS (MB) "
        "| plan / peak |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        p = r["plan"]
        measure = sum(b for k, b in p["measures"].items() if k not in p["dropped"])
        print(
            f"| {r['model']} | {r['n']:,} | {p['types']:,} | {measure / mb:,.0f} | {p['pass_bytes'] / mb:,.0f} | "
            f"{p['total_bytes'] / mb:,.0f} | {r['peak'] / mb:,.0f} | {p['total_bytes'] / r['peak']:.2f} |"
        )


if __name__ == "__main__":
    main()
