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
