"""The memory plan's loop term (``memory.terms.loop_total``: the shared layer view and each kept measure's
``update_bytes``) against the peak a real ``update_all`` holds, measured in a child process by
``benchmarks/bench_update_peak.py`` (VmHWM reset before the update, glibc mapping every array of 64 KiB or more on its
own, so the resident set follows what is live): the plan bounds the peak, and not by more than 3x.
The default measures together at a wide and a narrow batch, and alone, at d = 2,048, each whose declared update grows as
d² (``bench_update_peak.square_in_d``, from the registry: a d × d product, where the plan is tightest)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bench_update_peak import square_in_d

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_update_peak.py"


def measured(*args: str) -> list[dict]:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--json", "--layers", "4", *args], capture_output=True, text=True, check=True
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize(
    "args",
    [
        ("--dims", "1024", "--batch-sizes", "32,128"),  # every default measure: N = 768 and 2,863
        *(("--dims", "2048", "--batch-sizes", "32", "--only", name) for name in square_in_d()),
    ],
)
def test_the_plans_loop_term_bounds_the_measured_update(args):
    runs = measured(*args)
    assert runs and all(r["peak"] > 0 for r in runs)
    for r in runs:
        assert r["peak"] <= r["planned"] <= 3 * r["peak"], r
