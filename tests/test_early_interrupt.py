"""An interrupt before the first periodic checkpoint (issue 35 item 6): SIGINT or SIGTERM at any point of a
real ``normvar compute --checkpoint`` process saves every batch done, and the rerun of the same command
resumes from them and publishes the uninterrupted run's statistics.

A patch run before the CLI makes the process write a marker and wait at a chosen point — in the model's
load, in the very first forward pass, halfway through the update of the first batch (the moments added,
the other measures not yet) or of the fifth — until the test has sent the real signal and says go.
An interrupt in a half-added batch waits for the end of that batch (``errors.interrupts_between_batches``),
so the checkpoint holds whole batches only."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from cross_process import assert_close
from paused_compute import interrupt_at_pause, paused_compute

from normvar_core.runs.reader import open_run
from normvar_core.service import cli

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

# (where, batch, signal, the batches the checkpoint holds: None = no batch was done, no checkpoint)
CASES = [
    ("load", 0, signal.SIGINT, None),
    ("first-forward", 0, signal.SIGTERM, None),
    ("update", 0, signal.SIGINT, 1),
    ("update", 0, signal.SIGTERM, 1),
    ("update", 4, signal.SIGINT, 5),
    ("update", 4, signal.SIGTERM, 5),
]


@pytest.mark.parametrize("stage,at,sig,kept", CASES, ids=[f"{c[0]}{c[1]}-{c[2].name}" for c in CASES])
def test_an_early_interrupt_keeps_the_batches_done_and_the_rerun_resumes(
    stage, at, sig, kept, tmp_path, uninterrupted_compute
):
    argv, ref = uninterrupted_compute
    data = tmp_path / "data"
    marker, go, log = tmp_path / "marker", tmp_path / "go", tmp_path / "log"
    code = interrupt_at_pause(paused_compute(argv(data), stage, marker, log, at=at, go=go), marker, go, log, sig)
    assert code == (130 if sig == signal.SIGINT else 143), log.read_text()
    err = [x for x in log.read_text().splitlines() if x.strip()]
    what = "interrupted" if sig == signal.SIGINT else "terminated (SIGTERM)"
    assert len(err) == 1 and err[0].startswith(f"normvar: {what}; nothing was published"), err
    ckpt = tmp_path / "r.ckpt"
    assert ckpt.exists() == (kept is not None) and ("checkpoint kept" in err[0]) == (kept is not None), err
    assert not (data / "runs").exists() or os.listdir(data / "runs") == []
    if kept is not None:
        with np.load(ckpt, allow_pickle=False) as z:
            import json

            assert json.loads(str(z["meta_json"]))["next_batch"] == kept

    assert cli.main(argv(data)) == 0  # the same command: resumes from the batches kept and finishes
    run = open_run(data / "runs" / "r.duckdb")
    assert run.meta["notes"]["resumed_from_batch"] == kept
    a, b = run.stats(), ref.stats()
    np.testing.assert_array_equal(a.n, b.n)
    # the batches before the signal ran in the killed process: equal to float32 rounding (tests/cross_process.py)
    assert_close(a.mean, b.mean)
    assert_close(a.q, b.q)
    assert not ckpt.exists()
