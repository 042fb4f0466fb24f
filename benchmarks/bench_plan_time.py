"""CPU time of `normvar plan` (user + system of the whole process, its threads included), each call a fresh
process, with a fresh data directory: the first call tokenizes the corpus and keeps its tokenization
(`pipeline/encoding_cache.py`), the later ones read it back. docs/scale.md ("Seed 004's largest model with the
defaults") records the figures; the target is 5 CPU-s for `plan --model tiiuae/falcon-40b --devices 8x80`.

Usage: .venv/bin/python benchmarks/bench_plan_time.py [--models tiiuae/falcon-40b,minilm,smollm2] [--calls 2]
       [--devices 8x80]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_call(model: str, devices: str, data: str, env: dict) -> tuple[float, float, float, str]:
    """(user s, system s, wall s, the plan's total line) of one `normvar plan` in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "normvar_core.service.cli", "plan", "--model", model, "--devices", devices,
         "--data-dir", data],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = next((x.strip() for x in out.stdout.splitlines() if x.strip().startswith("total")), "")
    return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, wall, total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="tiiuae/falcon-40b,minilm,smollm2")
    ap.add_argument("--devices", default="8x80")
    ap.add_argument("--calls", type=int, default=2, help="calls per model on one data directory (1: first only)")
    args = ap.parse_args()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(ROOT))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| model | call | CPU-s (user + sys) | user | sys | wall s | tokenization |")
    print("|---|---|---|---|---|---|---|")
    for model in args.models.split(","):
        data = tempfile.mkdtemp(prefix="normvar-plan-time-")
        try:
            for k in range(1, args.calls + 1):
                user, sys_, wall, _ = one_call(model, args.devices, data, env)
                how = "tokenized, kept" if k == 1 else "read back"
                print(f"| {model} | {k} | **{user + sys_:.1f}** | {user:.1f} | {sys_:.1f} | {wall:.1f} | {how} |")
        finally:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
