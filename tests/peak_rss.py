"""The memory plan against a real process's peak: ``normvar plan --json`` and ``normvar compute`` with the same
options, each in its own process, the compute's peak RSS from ``VmHWM`` of that process (the plan-versus-peak
test and ``benchmarks/bench_plan_peak.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
from normvar_core.service import cli
t0 = time.perf_counter()
code = cli.main({argv!r})
# VmHWM, not ru_maxrss: Linux carries the parent's peak RSS into ru_maxrss over the exec (a pytest worker that
# had loaded a model made a 2.7 GB run read 4.9 GB)
hwm = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]) * 1024
print(json.dumps(dict(code=code, peak=hwm, secs=time.perf_counter() - t0)))
"""


def plan_and_peak(model: Path, corpus: Path, data: Path, *extra: str) -> dict:
    """{"plan": plan --json, "peak": bytes, "secs"} for ``normvar compute`` of ``model`` on ``corpus`` (CPU)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(ROOT))
    common = ["--model", str(model), "--corpus", str(corpus), "--device", "cpu", "--data-dir", str(data), *extra]
    plan = subprocess.run(
        [sys.executable, "-m", "normvar_core.service.cli", "plan", "--json", *common],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    argv = ["compute", *common, "--quiet", "--no-checkpoint", "--overwrite", "--name", "peak"]
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(argv=argv)], capture_output=True, text=True, env=env, check=True
    )
    m = json.loads(out.stdout.strip().splitlines()[-1])
    assert m["code"] == 0, out.stderr
    return dict(plan=json.loads(plan.stdout), **m)


def corpus_of(path: Path, n: int) -> Path:
    """The first ``n`` non-empty lines of the shipped novels (cycled when there are fewer)."""
    import gzip
    import itertools

    from normvar_core.datadir import DEFAULT_CORPUS

    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        lines = [s.strip() for s in fh if s.strip() and len(s.split()) < 64]
    path.write_text("\n".join(itertools.islice(itertools.cycle(lines), n)) + "\n", encoding="utf-8")
    return path
