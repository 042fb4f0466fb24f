"""SIGTERM during a foreground ``normvar compute`` (``kill``, ``timeout``, ``docker stop``, a cluster
scheduler) is handled as Ctrl-C: one line on stderr, temp files removed, the checkpoint kept, exit 143.
A real ``normvar compute`` process is told (by a patch run before the CLI) to write a marker and
wait at a chosen point — inside the third forward pass, or in the run file's write after two
tables — and the test sends it a real SIGTERM there. The rerun of the same command resumes from the
checkpoint (run in-process here) and publishes the same statistics as an uninterrupted run."""

from __future__ import annotations

import os

import numpy as np
import pytest
from cross_process import assert_close
from paused_compute import interrupt_at_pause, paused_compute, wait_for_pause

from normvar_core.runs.reader import open_run
from normvar_core.service import cli

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


@pytest.mark.parametrize("stage", ["forward", "write"])
def test_sigterm_mid_stage_removes_temps_keeps_checkpoint_exits_143_and_resumes(stage, tmp_path, uninterrupted_compute):
    argv, ref = uninterrupted_compute
    data = tmp_path / "data"
    marker, log = tmp_path / "marker", tmp_path / "log"
    p = paused_compute(argv(data), stage, marker, log)
    wait_for_pause(p, marker, log)
    if stage == "write":
        assert [q for q in (data / "runs").iterdir() if ".tmp-" in q.name], "the temp run file is being written"
    assert interrupt_at_pause(p, marker, None, log, exit_within_s=60) == 143  # no go: the SIGTERM ends the pause
    err = [x for x in log.read_text().splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("normvar: terminated (SIGTERM)"), err
    assert "checkpoint kept" in err[0]
    assert os.listdir(data / "runs") == []  # no temp run file, no WAL, nothing published
    ckpt = tmp_path / "r.ckpt"
    assert ckpt.exists() and not [q for q in tmp_path.iterdir() if ".tmp-" in q.name]

    assert cli.main(argv(data)) == 0  # the same command: resumes and finishes
    run = open_run(data / "runs" / "r.duckdb")
    resumed = run.meta["notes"]["resumed_from_batch"]
    assert resumed == (2 if stage == "forward" else 15)  # 120 sentences / 8 = 15 batches
    a, b = run.stats(), ref.stats()
    np.testing.assert_array_equal(a.n, b.n)
    # the batches before the signal ran in the killed process: equal to float32 rounding (tests/cross_process.py)
    assert_close(a.mean, b.mean)
    assert_close(a.q, b.q)
    assert not ckpt.exists()
