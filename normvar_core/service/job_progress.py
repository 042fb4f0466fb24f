"""A job's progress: the JSON the job table stores (``progress_dict``) and the one line the CLI, the New-run
and the Runs pages show for it (``progress_text``). A run reports ``pipeline.execute.progress.Progress``; its
fields are ``PROGRESS_FIELDS`` (read from the dataclass, never restated here)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

from normvar_core.pipeline.execute.progress import PHASES, Progress

PROGRESS_FIELDS = tuple(f.name for f in dataclasses.fields(Progress))
"""What a run's progress holds (stage, counts, rate, ETA, phase, percent): ``Progress``'s fields."""


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _json_safe(value.item())
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def progress_dict(p: Any) -> dict[str, Any]:
    """``Progress`` (or any dataclass, namedtuple or mapping; else an object read by ``PROGRESS_FIELDS``)
    -> a JSON-able dict (NaN and infinities become None, numpy scalars plain numbers)."""
    if isinstance(p, dict):
        d = dict(p)
    elif dataclasses.is_dataclass(p):
        d = dataclasses.asdict(p)  # type: ignore[arg-type]  # an instance: Progress, not its class
    elif hasattr(p, "_asdict"):
        d = p._asdict()
    else:
        d = {k: getattr(p, k, None) for k in PROGRESS_FIELDS}
    return {k: _json_safe(v) for k, v in d.items()}


def fmt_eta(seconds) -> str:
    """ "1:05:03", "4:12", "12 s", or "–" when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "–"
    s = int(round(float(seconds)))
    if s < 60:
        return f"{s} s"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def progress_text(p: dict | None, task: str = "run") -> str:
    """One line for a running job's progress, by phase: "forward · 1,200/3,000 sentences · 5,300 emb/s ·
    ETA 0:42", "finalize · spectra, TwoNN · 2/5 measures · ETA 3 s", "write · 12/17 tables", a worker
    task's own phase ("null · geometry · 3/7 layers"); the older stage-only form for other producers."""
    p = p or {}
    phase, stage = p.get("phase"), p.get("stage")
    if not phase:
        if not stage:
            return "starting"
        if p.get("sentences_total"):
            return (
                f"{stage} · {int(p.get('sentences_done') or 0):,}/{int(p['sentences_total']):,} sentences · "
                f"{(p.get('emb_per_s') or 0):,.0f} emb/s · ETA {fmt_eta(p.get('eta_s'))}"
            )
        return str(stage)
    head = phase if task == "run" else f"{task} · {phase}"
    parts = [head]
    if p.get("detail"):
        parts.append(str(p["detail"]))
    if p.get("total"):
        parts.append(f"{int(p.get('done') or 0):,}/{int(p['total']):,} {p.get('unit') or ''}".rstrip())
    if phase == "forward":
        parts.append(f"{(p.get('emb_per_s') or 0):,.0f} emb/s")
    if phase not in ("plan", "model", "done"):
        parts.append(f"ETA {fmt_eta(p.get('eta_s'))}")
    return " · ".join(parts)


def progress_every_s(environ) -> float:
    """``$NORMVAR_PROGRESS_EVERY_S`` (seconds between progress lines in a log; 30 when unset), a finite number
    of seconds >= 0; anything else is one NormvarError line naming the variable and its range (``numbers``)."""
    from normvar_core.numbers import MAX_SECONDS, env_number

    return float(env_number("NORMVAR_PROGRESS_EVERY_S", 30.0, environ, kind=float, least=0, most=MAX_SECONDS))


class LogLines:
    """A ``progress`` callback for a log (stderr not a terminal: nohup, SLURM, CI): plain lines
    "normvar: <progress_text>", never a carriage return — one at once when a phase begins (plan, model, early,
    forward, finalize, write: so every run that reaches its batches logs a forward line, and a resumed one its
    "resuming from N of M batches"), then at most one every ``every_s`` seconds within the phase (30;
    ``NORMVAR_PROGRESS_EVERY_S`` overrides it). Never silent longer than that: when no event came for ``every_s``
    seconds (one long forward pass, one long finalize step), a heartbeat thread repeats the latest line with
    "still working, N s since its last step". ``start(line)``: the run's first line, before anything loads."""

    START = "start"
    """The first word of the run's first line (``commands_runs.start_line``)."""
    HEADS = (START, *dict.fromkeys(p for p in PHASES.values() if p != "done"))
    """The first word of every line of a compute's log: the start line's, then each phase's (``PHASES``)."""

    def __init__(self, file=None, every_s: float | None = None):
        import os
        import sys
        import threading
        import time

        self.file, self.clock = file or sys.stderr, time.monotonic
        self.every_s = float(every_s) if every_s is not None else progress_every_s(os.environ)
        self.last, self.phase = self.clock(), cast(str | None, None)
        self.latest, self.latest_at = None, self.last  # the last event and when it came
        self.lock, self.stopped = threading.Lock(), threading.Event()
        self.beat: threading.Thread | None = None

    def start(self, line: str) -> None:
        print(f"normvar: {line}", file=self.file, flush=True)

    def __call__(self, p) -> None:
        with self.lock:
            now, phase = self.clock(), getattr(p, "phase", "")
            self.latest, self.latest_at = (None if phase == "done" else p), now
            if phase == "done" or (phase == self.phase and now - self.last < self.every_s):
                return
            self.last, self.phase = now, phase
            print(f"normvar: {progress_text(progress_dict(p))}", file=self.file, flush=True)
        if self.beat is None and self.every_s > 0:
            import threading

            self.beat = threading.Thread(target=self._heartbeat, name="normvar-progress", daemon=True)
            self.beat.start()

    def _heartbeat(self) -> None:
        """Every ``every_s`` / 4 seconds: the latest line again when none was printed for ``every_s``."""
        while not self.stopped.wait(self.every_s / 4):
            with self.lock:
                now = self.clock()
                if self.latest is None or now - self.last < self.every_s:
                    continue
                self.last = now
                since = fmt_eta(now - self.latest_at)
                line = progress_text(progress_dict(self.latest))
                print(f"normvar: {line} · still working, {since} since its last step", file=self.file, flush=True)

    def close(self) -> None:
        self.stopped.set()
        if self.beat is not None:
            self.beat.join(timeout=5)
            self.beat = None


__all__ = ["PROGRESS_FIELDS", "progress_dict", "progress_text", "fmt_eta", "LogLines", "progress_every_s"]
