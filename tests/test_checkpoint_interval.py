"""The periodic checkpoint's interval: every ``every_s`` seconds, but never sooner than 1 / 0.03 times the last save's
duration after it (``execute.checkpoint.COST_SHARE``), so periodic saves cost at most about 3 % of the run;
``every_s`` 0 saves after every batch (the tests' setting). Timed with a fake clock and a real save."""

from __future__ import annotations

import numpy as np

from normvar_core.pipeline.execute import checkpoint as ckpt


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_a_slow_save_spaces_the_next_one_and_zero_means_every_batch(tmp_path, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(ckpt.time, "monotonic", clock)
    saver = ckpt.Checkpointer(tmp_path / "a.ckpt", {"run": "x"}, every_s=60.0)
    assert not saver.due()
    clock.t += 60.0
    assert saver.due()
    real_save = ckpt.save

    def slow_save(*args):  # a real save that the fake clock sees take 30 s
        real_save(*args)
        clock.t += 30.0

    monkeypatch.setattr(ckpt, "save", slow_save)
    saver.save_early({"occurrences": {"done": np.array([3])}}, 3, 10)  # an early-pass save: no duration measured
    saver.save({}, 4, {})
    assert (tmp_path / "a.ckpt").is_file() and saver.cost == 30.0
    clock.t += 60.0
    assert not saver.due()  # 60 s after a 30 s save: not yet (30 / 0.03 = 1,000 s)
    clock.t += 900.0
    assert not saver.due()
    clock.t += 40.0
    assert saver.due()
    assert ckpt.Checkpointer(tmp_path / "b.ckpt", {}, every_s=0).due()
    assert not ckpt.Checkpointer(None, {}, every_s=0).due()
