"""The interrupt line of a real ``normvar compute`` says what is on disk, read from the disk: the checkpoint's batches
and its size when one was kept; when none could be kept, why — a second Ctrl-C that stopped its save, or a write
that failed (a 64 kB file size limit standing in for a full disk) — never "no batch had finished" after batches
had."""

from __future__ import annotations

import json
import signal
import time

import numpy as np
import pytest
from paused_compute import paused_compute, wait_for_pause

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


def _interrupt(stage: str, tmp_path, argv, *, second: bool = False) -> tuple[str, object]:
    """SIGINT at batch 4 (of 15) of the pass; ``second``: another SIGINT once the checkpoint's save has begun."""
    data = tmp_path / "data"
    marker, go, log = tmp_path / "marker", tmp_path / "go", tmp_path / "log"
    p = paused_compute(argv(data), stage, marker, log, at=4, go=go)
    wait_for_pause(p, marker, log)
    p.send_signal(signal.SIGINT)
    time.sleep(0.3)  # the signal is in before the paused batch goes on
    go.write_text("x")
    if second:
        wait_for_pause(p, marker.with_name(marker.name + ".saving"), log)  # the save has begun
        time.sleep(0.05)
        p.send_signal(signal.SIGINT)
    assert p.wait(timeout=120) == 130, log.read_text()
    err = [x for x in log.read_text().splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("normvar: interrupted; nothing was published"), err
    return err[0], tmp_path / "r.ckpt"


def test_one_interrupt_names_the_batches_kept_and_the_checkpoints_size(tmp_path, uninterrupted_compute):
    argv, _ = uninterrupted_compute
    line, ckpt = _interrupt("update", tmp_path, argv)
    with np.load(ckpt, allow_pickle=False) as z:
        assert json.loads(str(z["meta_json"]))["next_batch"] == 5
    n = ckpt.stat().st_size
    size = f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"
    assert f"checkpoint kept in {ckpt}: 5 of 15 batches, {size}; the same command resumes from it" in line, line


def test_a_second_interrupt_during_the_save_is_said_as_it_is(tmp_path, uninterrupted_compute):
    argv, _ = uninterrupted_compute
    line, ckpt = _interrupt("update-slow-save", tmp_path, argv, second=True)
    assert not ckpt.exists()
    assert "no batch had finished" not in line, line
    assert "no checkpoint is on disk (its save of 5 of 15 batches was stopped by a second interrupt)" in line, line


def test_a_save_that_cannot_be_written_is_said_as_it_is(tmp_path, uninterrupted_compute):
    argv, _ = uninterrupted_compute
    line, ckpt = _interrupt("update-file-size-limit", tmp_path, argv)
    assert not ckpt.exists() and not list(tmp_path.glob(".r.ckpt.tmp-*"))
    assert "no batch had finished" not in line, line
    assert "no checkpoint is on disk (its save of 5 of 15 batches failed (File too large))" in line, line
