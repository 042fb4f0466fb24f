"""Progress is never silent for long, on any model: a log's lines (``job_progress.LogLines``) over a pass whose
batches take far longer than the line interval — a Gaussian source slowed in its forward pass and in each layer's
update, the real ``run_range``, ``ForwardClock`` and ``LogLines`` — come at most about one interval apart, count
sentences inside a batch, and say "still working" while one step lasts; the start line of a compute that resumes
says so and from where, and the start after a killed compute says what happened and what it kept. Time is scaled:
an interval of 2 s for the CLI's 30 s, batches of about 9 s for the issue's 150-sentence batches of minutes."""

from __future__ import annotations

import json
import re
import time

import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.execute.partials import Counted, build_measures, run_range
from normvar_core.pipeline.execute.progress import ForwardClock
from normvar_core.pipeline.measures.layerview import LayerMajor
from normvar_core.pipeline.run_plan import synthetic_plan
from normvar_core.pipeline.sources import GaussianSource
from normvar_core.service.job_progress import LogLines

EVERY_S = 2.0
LAYERS = list(range(6))


class Slowed(GaussianSource):
    """A Gaussian source whose forward pass of each batch takes ``delay`` seconds."""

    delay = 4.0

    def batches(self, plan, start, stop):
        for sb in super().batches(plan, start, stop):
            time.sleep(self.delay)
            yield sb


class Lines:
    """A log file that keeps each line with the time it was written."""

    def __init__(self):
        self.lines: list[tuple[float, str]] = []

    def write(self, s: str) -> None:
        if s.strip():
            self.lines.append((time.monotonic(), s.strip()))

    def flush(self) -> None:
        pass


def _pass(n_sentences=48, batch_size=16, layer_delay=0.8):
    cfg = RunConfig(model="gaussian", samples_per_token=0)
    plan = synthetic_plan(cfg, n_sentences=n_sentences, vocab_size=60, layers=LAYERS, batch_size=batch_size)
    source = Slowed(dim=8, layers=LAYERS)
    ctx = RunContext(cfg=cfg, layers=LAYERS, dim=8, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    measures = build_measures(ctx)
    slow = next(m for m in measures.values() if isinstance(m, LayerMajor))
    update = slow.update_layer

    def slowed(l, view, batch):  # each layer's update takes time, as a 576-wide float64 scatter does
        time.sleep(layer_delay)
        update(l, view, batch)

    slow.update_layer = slowed
    return plan, source, measures


@pytest.mark.slow
def test_no_gap_longer_than_the_interval_while_batches_take_four_intervals():
    from gaussian_runs import gaussian_pass

    gaussian_pass(16)  # the measures' numba kernels compiled before the clock starts (a compile holds the GIL)
    plan, source, measures = _pass()
    log = Lines()
    lines = LogLines(file=log, every_s=EVERY_S)
    count = Counted(0)
    clock = ForwardClock(lines, plan, 0, within_every_s=1.0)
    t0 = time.monotonic()
    clock(0, 0)
    run_range(
        source,
        plan,
        measures,
        0,
        plan.n_batches,
        on_batch=lambda bi: clock(bi + 1, count.n),
        on_layer=clock.within,
        count=count,
    )
    t1 = time.monotonic()
    lines.close()
    assert plan.n_batches == 3 and (t1 - t0) / plan.n_batches > 4 * EVERY_S  # batches of over four intervals
    times = [t0] + [t for t, _ in log.lines if t <= t1] + [t1]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert max(gaps) <= EVERY_S * 1.25 + 1.0, (max(gaps), log.lines)  # the heartbeat polls every interval / 4
    text = [s for _, s in log.lines]
    assert all(s.startswith("normvar: forward · ") for s in text), text
    done = [int(m.group(1)) for s in text if (m := re.search(r"· (\d+)/48 sentences", s))]
    assert any(d % 16 for d in done), done  # sentences counted inside a batch, not only at its end
    assert done == sorted(done) and done[-1] > 32  # into the last batch (its end may fall within an interval)
    assert any("still working" in s for s in text)  # the forward of one batch outlasts an interval
    assert any(re.search(r"batch \d of 3: \d+% of its layers", s) for s in text)  # which batch, how far


def test_the_start_line_says_it_resumes_and_a_killed_run_is_named(tmp_path):
    """A checkpoint on disk: the start line begins "resumes from checkpoint PATH (k of n batches, size)"; a lock
    left by a killed compute: the next start says it was killed and what its checkpoint keeps."""
    import os

    from gaussian_runs import gaussian_pass

    from normvar_core.pipeline.execute.checkpoint import partial_state, save
    from normvar_core.run_lock import lock_path
    from normvar_core.service.commands_runs import killed_line, start_line

    plan, _, _, measures = gaussian_pass(40)
    ckpt = tmp_path / "r.ckpt"
    save(ckpt, {"n_batches": plan.n_batches}, partial_state(measures, 0, 2), {})
    cfg = RunConfig(model="gaussian", name="r")
    line = start_line(cfg, tmp_path, None, ckpt, ckpt)
    assert line.startswith(f"start · resumes from checkpoint {ckpt} (2 of {plan.n_batches} batches, ")
    assert "resumes" not in start_line(cfg, tmp_path, None, ckpt, None)  # --fresh: starts over
    run = tmp_path / "runs" / "r.duckdb"
    run.parent.mkdir(exist_ok=True)
    assert killed_line([run, ckpt], ckpt) is None  # no lock left: nothing to say
    lock_path(run).write_text(json.dumps({"pid": 4242, "holder": "normvar compute"}))  # no process holds it
    said = killed_line([run, ckpt], ckpt)
    assert said.startswith("the last compute of this run (normvar compute, pid 4242) was killed before it finished")
    assert f"checkpoint kept in {ckpt}: 2 of {plan.n_batches} batches" in said and "resumes from it" in said
    os.remove(lock_path(run))
