"""A run's progress events: ``Progress`` (what a ``progress`` callback receives), the clocks that give
each phase its rate and ETA, and ``TqdmProgress`` (the CLI's bars).

* forward (the batches): ``ForwardClock`` — embeddings/s r = (embeddings − embeddings at the phase's
  start) / seconds since then; ETA = (embeddings of the plan − embeddings) / r. Both strategies
  (``local.py``, ``on_ray.py``) report through it; on Ray the shards count their batches in a
  ``BatchCounter`` actor that the driver polls;
* the other phases, counted in steps: ``PhaseClock`` — ETA = elapsed / done × (total − done).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, cast

PHASES = {
    "corpus": "plan",
    "model": "model",
    "tokenize": "plan",
    "early": "early",
    "compute": "forward",
    "finalize": "finalize",
    "write": "write",
    "done": "done",
}
"""stage -> phase: plan (read the corpus, tokenize and count), model (load the model: here, or in the Ray
actors before their first batch), early (the measures' early passes, e.g. the occurrences' axes from batches spread over
the plan), forward (the batches), finalize (every measure's result: spectra, TwoNN,
Razzhigaev et al.'s batches), write (the run file's tables)."""
PHASE_SPAN = {
    "plan": (0.0, 5.0),
    "model": (0.0, 5.0),
    "early": (5.0, 5.0),
    "forward": (5.0, 90.0),
    "finalize": (90.0, 95.0),
    "write": (95.0, 100.0),
    "done": (100.0, 100.0),
}
"""The part of the progress bar each phase fills (percent): the forward pass is most of a run."""


@dataclass
class Progress:
    """Passed to ``progress(p)``. ``stage`` in {corpus, model, tokenize, compute, finalize, write, done}
    (``phase``: plan, model, forward, finalize, write, done — ``PHASES``); ``embeddings`` counted so far (per
    layer), ``emb_per_s`` for the forward phase; ``done``/``total`` counts of the phase in ``unit``
    (sentences, measures, tables), ``detail`` what it is doing, ``eta_s`` the phase's remaining seconds
    (forward: the batches left at the current rate), ``percent`` the whole run's (``PHASE_SPAN``)."""

    stage: str
    sentences_done: int = 0
    sentences_total: int = 0
    embeddings: int = 0
    emb_per_s: float = 0.0
    eta_s: float | None = None
    phase: str = ""
    done: int = 0
    total: int = 0
    unit: str = ""
    detail: str = ""
    percent: float = 0.0

    def __post_init__(self) -> None:
        self.phase = self.phase or PHASES.get(self.stage, self.stage)
        if self.stage == "compute" and not self.unit:
            self.done, self.total, self.unit = self.sentences_done, self.sentences_total, "sentences"
        a, b = PHASE_SPAN.get(self.phase, (0.0, 0.0))
        frac = self.done / self.total if self.total else 0.0
        self.percent = round(a + (b - a) * min(max(frac, 0.0), 1.0), 2)


class PhaseClock:
    """ETA of a phase counted in steps: elapsed / done × (total − done); thread-safe reports."""

    def __init__(self, report):
        import threading

        self.report, self.lock, self.t0, self.phase = report, threading.Lock(), time.monotonic(), None

    def __call__(self, stage: str, done: int, total: int, unit: str, detail: str = "", **kw) -> None:
        with self.lock:
            if PHASES.get(stage) != self.phase:
                self.phase, self.t0 = PHASES.get(stage), time.monotonic()
            el = time.monotonic() - self.t0
            eta = el / done * (total - done) if done > 0 else None
            self.report(Progress(stage, eta_s=eta, done=done, total=total, unit=unit, detail=detail, **kw))


WITHIN_EVERY_S = 5.0
"""Inside a batch, progress is reported at most this often (seconds since the last report): a long batch is counted
as it goes, a short one only at its end, so a caller sees one "compute" event per batch where batches are quick."""


class ForwardClock:
    """Progress of the forward phase after each batch (module docstring: rate and ETA), and inside a long batch
    at most every ``within_every_s`` seconds."""

    def __init__(self, report, plan, embeddings: int = 0, within_every_s: float = WITHIN_EVERY_S):
        self.report, self.total_embeddings = report, plan.total_embeddings
        self.within_every_s, self.last = within_every_s, time.monotonic()
        self.done_at, self.total = plan.sentences_done_at(), len(plan.sentences)
        self.start, self.t0 = embeddings, time.monotonic()
        self.embeddings, self.sentences0 = (
            embeddings,
            cast(int | None, None),
        )  # the last count; the sentences done at the first report

    def __call__(self, batches_done: int, embeddings: int, detail: str = "") -> None:
        """Report that the first ``batches_done`` batches of the plan are in, ``embeddings`` counted (``detail``:
        what the log line adds, e.g. "resuming from 12 of 40 batches")."""
        rate = (embeddings - self.start) / max(time.monotonic() - self.t0, 1e-9)
        eta = (self.total_embeddings - embeddings) / rate if rate > 0 else None
        sentences = int(self.done_at[batches_done - 1]) if batches_done else 0
        self.embeddings = embeddings
        self.sentences0 = sentences if self.sentences0 is None else self.sentences0
        self.last = time.monotonic()
        self.report(Progress("compute", sentences, self.total, embeddings, rate, eta, detail=detail))

    def within(self, index: int, fraction: float) -> None:
        """Inside batch ``index``: ``fraction`` of its layers folded in. The sentences done count that share of
        the batch's sentences (a batch of 150 is reported as it goes, not only at its end); the ETA is the
        elapsed time per sentence so far times the sentences left. Said only ``within_every_s`` after the last
        report."""
        if time.monotonic() - self.last < self.within_every_s:
            return
        self.last = time.monotonic()
        before = int(self.done_at[index - 1]) if index else 0
        sentences = before + int(fraction * (int(self.done_at[index]) - before))
        start = before if self.sentences0 is None else self.sentences0
        el = max(time.monotonic() - self.t0, 1e-9)
        eta = el / (sentences - start) * (self.total - sentences) if sentences > start else None
        emb = self.embeddings
        rate = (emb - self.start) / el
        self.report(
            Progress(
                "compute",
                sentences,
                self.total,
                emb,
                rate,
                eta,
                detail=f"batch {index + 1} of {len(self.done_at)}: {fraction:.0%} of its layers",
            )
        )


class BatchCounter:
    """The Ray strategy's progress: batches finished in each running range, by its first batch. A small actor
    (``on_ray.RayPool``) that the shards report to and the driver polls; it lives in this module, which
    imports no torch, so that its process stays small."""

    def __init__(self):
        self.done: dict[int, int] = {}

    def report(self, start: int, done: int) -> None:
        self.done[int(start)] = int(done)

    def get(self) -> dict[int, int]:
        return dict(self.done)


def publish_progress(report, total: int, n_embeddings: int):
    """publish_run's ``progress(stage, done, total, unit, detail)`` -> Progress events with an ETA."""
    clock = PhaseClock(report)

    def progress(stage: str, done: int, n: int, unit: str, detail: str = "") -> None:
        clock(stage, done, n, unit, detail, sentences_done=total, sentences_total=total, embeddings=n_embeddings)

    return progress


class TqdmProgress:
    """A ``progress`` callback drawing tqdm bars on stderr, one per phase: plan (steps), forward
    (sentences, embeddings/s, ETA), finalize (measures: spectra, TwoNN ...), write (tables)."""

    def __init__(self, file=None, disable: bool | None = None):
        self.file = file or sys.stderr
        self.disable = disable
        self.bar: Any = None  # a tqdm bar, imported where it opens
        self.phase: str | None = None

    def _open(self, p: Progress) -> None:
        from tqdm import tqdm

        self.close()
        self.phase = p.phase
        if p.phase == "done":
            return
        self.bar = tqdm(
            total=p.total or None,
            initial=p.done,
            unit=p.unit or "step",
            file=self.file,
            disable=self.disable,
            desc=f"normvar {p.phase}",
            dynamic_ncols=True,
            mininterval=0.5,
        )

    def __call__(self, p: Progress) -> None:
        if p.phase != self.phase:
            self._open(p)
        if self.bar is None:
            return
        if p.total and self.bar.total != p.total:
            self.bar.total = p.total
        self.bar.update(max(0, p.done - self.bar.n))
        if p.phase == "forward" and p.detail.startswith("resuming"):  # said once, above the bar
            self.bar.write(f"normvar: {p.detail}", file=self.file)
        if p.phase == "forward":
            self.bar.set_postfix_str(f"{p.embeddings:,} emb, {p.emb_per_s:,.0f} emb/s", refresh=False)
        elif p.detail:
            eta = f", ETA {p.eta_s:.0f} s" if p.eta_s is not None else ""
            self.bar.set_postfix_str(f"{p.detail}{eta}", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.refresh()
            self.bar.close()
            self.bar = None


__all__ = [
    "Progress",
    "PHASES",
    "PHASE_SPAN",
    "PhaseClock",
    "ForwardClock",
    "BatchCounter",
    "publish_progress",
    "TqdmProgress",
]
