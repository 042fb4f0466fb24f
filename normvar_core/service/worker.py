"""The background worker of a data directory: takes jobs from the job table (``jobs.JobStore``), runs
``compute_run`` for run jobs (checkpointed, resumed after a crash) and the worker tasks of the other
jobs (``tasks.TASKS``: report, null, sentence), writes progress and heartbeats (``_Reporter``), and
recovers what a dead worker left (``Worker.recover``). One worker per data directory
(``queue/worker.lock``). It changes the job table only through ``JobTable``'s public operations
(claim_next, heartbeat, write_progress, finish, requeue, record_worker, forget_worker)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import sqlite3
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from normvar_core.config import RunConfig
from normvar_core.destination import open_regular
from normvar_core.errors import CancelledError, NormvarError
from normvar_core.run_lock import JOB, as_holder
from normvar_core.runs.writer import remove_stale_temps
from normvar_core.service.job import LATE_CANCEL, Job, JobState
from normvar_core.service.job_progress import progress_dict
from normvar_core.service.jobs import JobStore
from normvar_core.service.tasks import TASKS

log = logging.getLogger("normvar.worker")

PROGRESS_EVERY_S = 0.5
"""Progress is written to the job table at most this often (and flushed by the heartbeat)."""
HEARTBEAT_EVERY_S = 0.5
MAX_ATTEMPTS = 3
"""A job that was running when its worker died this many times is marked failed."""


class _ForcedStop(BaseException):
    """Second SIGTERM/SIGINT: leave at once (the running job resumes at the next start)."""


class Worker:
    """The single consumer of one data directory's queue. Runs one job at a time in the
    calling thread; ``stop()`` (or SIGTERM/SIGINT) ends it at the next batch, keeping the
    checkpoint and putting the job back at the front of the queue."""

    def __init__(self, data_dir=None, *, poll_s: float = 0.5, checkpoint_every_s: float = 60.0, compute=None):
        """``compute``: a callable with ``compute_run``'s signature (tests); default compute_run."""
        self._compute_fn = compute
        self.store = JobStore(data_dir)
        self.dd = self.store.dd
        self.poll_s = float(poll_s)
        self.checkpoint_every_s = float(checkpoint_every_s)
        self._stop = threading.Event()
        self._lock_fd: int | None = None
        self.jobs_run = 0

    # -------------------------------------------------------------- life cycle
    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _acquire_lock(self, wait_s: float = 5.0) -> None:
        """Hold the data directory's worker lock (a second call keeps the one held); a NormvarError
        naming the running worker's pid when another holds it past ``wait_s``."""
        if self._lock_fd is not None:
            return
        fd = open_regular(self.store.lock_path, os.O_RDWR | os.O_CREAT, what="the worker lock")
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    info = self.store.worker()
                    pid = f" (pid {info.pid})" if info and info.pid else ""
                    raise NormvarError(
                        f"another worker{pid} is already running on {self.dd.root}",
                        fix="one worker per data directory; stop it first or use another --data-dir",
                    ) from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def claim(self) -> Worker:
        """Take the data directory before saying anything: a second worker refuses here (``run`` claims too)."""
        self._acquire_lock()
        return self

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
            self._lock_fd = None

    def recover(self) -> None:
        """Called with the worker lock held, so no other worker is alive: requeue what a dead
        worker left behind (back to the front of the queue, to resume from their checkpoints)."""
        store = self.store
        for job in reversed(store.list(limit=None, states=(JobState.RUNNING.value,))):
            if job.cancel_requested:
                store.finish(job.id, JobState.CANCELLED, "cancelled")
            elif job.attempts >= MAX_ATTEMPTS:
                store.finish(job.id, JobState.FAILED, f"the worker died {job.attempts} times while running this job")
            else:
                log.warning("job %s was left running by a dead worker (pid %s): resuming it", job.id, job.worker_pid)
                store.requeue(job.id)
        self._clean_stale_temp_runs()

    def _clean_stale_temp_runs(self) -> None:
        """Remove temp run files (``.<name>.tmp-<pid>.duckdb*``) of processes that are gone."""
        remove_stale_temps(self.dd.runs)

    def run(self, *, once: bool = False, install_signals: bool = True) -> int:
        """Process jobs until stopped (or, with ``once``, until the queue is empty).
        Returns the number of jobs taken from the queue."""
        old_handlers = {}
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                old_handlers[sig] = signal.signal(sig, self._on_signal)
        self._acquire_lock()
        try:
            self._serve(once)
        finally:
            with contextlib.suppress(Exception):
                self.store.forget_worker()
            self._release_lock()
            for sig, h in old_handlers.items():
                signal.signal(sig, h)
        return self.jobs_run

    def _serve(self, once: bool) -> None:
        """The worker loop: recover, then take one job at a time until stopped (or empty, ``once``)."""
        self.store.record_worker(None)
        self.recover()
        log.info("worker %d on %s", os.getpid(), self.dd.root)
        last_beat = time.monotonic()
        while not self.stopping:
            job = self.store.claim_next()
            if job is None:
                if once:
                    break
                if time.monotonic() - last_beat > 2.0:
                    self.store.record_worker(None)
                    last_beat = time.monotonic()
                self._stop.wait(self.poll_s)
                continue
            self.jobs_run += 1
            self._run_job(job)  # it never raises Exception
            self.store.record_worker(None)
            last_beat = time.monotonic()

    def _on_signal(self, signum, frame) -> None:
        if self.stopping:
            raise _ForcedStop()
        log.warning("signal %d: stopping (a running job stops at its next batch and keeps its checkpoint)", signum)
        self._stop.set()

    # -------------------------------------------------------------- one job
    def _run_job(self, job: Job) -> None:
        """Run one claimed job to its end: done, failed, cancelled, or back in the queue (a shutdown)."""
        store, job_id = self.store, job.id
        log.info("job %s (%s): started", job_id, job.name)
        reporter = _Reporter(store, job_id)
        reporter.start()
        store.record_worker(job_id)
        try:
            state, message, run_path = self._compute(job, reporter)
        finally:
            reporter.stop()
        if state == JobState.QUEUED:  # stopped by SIGTERM: back to the front of the queue
            store.requeue(job_id, shutdown=message)
            log.info("job %s: stopped, will resume from its checkpoint", job_id)
            return
        store.finish(job_id, state, message, run_path)  # type: ignore[arg-type]  # a JobState value; removes the checkpoint: a kill's leftovers too
        log.info("job %s: %s%s", job_id, state, f" ({message})" if message else "")

    def _compute(self, job: Job, reporter: _Reporter) -> tuple[str, str | None, str | None]:
        """Run compute_run (or the worker task) of one claimed job: (state, message, run path)."""
        job_id = job.id
        if job.task != "run":
            return self._task(job_id, job.task, job.config[job.task], reporter)
        try:
            cfg = RunConfig.from_dict(job.config)
        except NormvarError as err:
            return JobState.FAILED, f"invalid stored configuration: {err}", None
        run_path = self.dd.run_path(cfg.name)  # type: ignore[arg-type]  # a job's config has its name
        ckpt = self.store.checkpoint_path(job_id)
        if job.attempts > 1 and _published_since(run_path, job.started):
            # the previous attempt published its run and died before marking the job done (its
            # checkpoint, if any, is removed with the job's end as always)
            return JobState.DONE, None, str(run_path)

        last_check = [0.0, False]

        def should_cancel() -> bool:
            if self.stopping:
                return True
            t = time.monotonic()
            if t - last_check[0] >= 0.25:
                last_check[0] = t
                last_check[1] = self.store.cancel_requested(job_id)
            return last_check[1]  # type: ignore[return-value]  # the stored answer

        try:
            compute_run = self._compute_fn
            if compute_run is None:
                from normvar_core.pipeline.execute.local import compute_run
            with as_holder(f"{JOB}{job_id} of the worker"):  # named to a second compute of this run
                path = compute_run(
                    cfg,
                    self.dd.root,
                    overwrite=job.overwrite,
                    progress=reporter.update,
                    checkpoint=ckpt,
                    checkpoint_every_s=self.checkpoint_every_s,
                    should_cancel=should_cancel,
                    before_publish=lambda: not self.stopping and self.store.begin_publish(job_id),
                )
        except CancelledError as err:
            if self.store.cancel_requested(job_id):
                return JobState.CANCELLED, "cancelled", None
            if self.stopping:
                return JobState.QUEUED, "interrupted by a worker shutdown; resumes from its checkpoint", None
            return JobState.CANCELLED, err.message or "cancelled", None
        except NormvarError as err:
            return JobState.FAILED, job_words(err, ckpt), None
        except Exception as err:
            return JobState.FAILED, self._unexpected(job_id, err), None
        # published: a cancel asked once the run file was being published came too late (``begin_publish``)
        return JobState.DONE, LATE_CANCEL if self.store.cancel_requested(job_id) else None, str(path)

    def _unexpected(self, job_id: str, err: Exception) -> str:
        """One line for the job row; the full traceback in the job's log file."""
        log.exception("job %s failed", job_id)
        trace = self.store.log_path(job_id)
        try:
            trace.parent.mkdir(parents=True, exist_ok=True)
            trace.write_text(traceback.format_exc())
        except OSError:
            trace = None  # type: ignore[assignment]  # no trace written
        first = (str(err).splitlines() or [""])[0][:200]
        where = f"; full traceback in {trace}" if trace else ""
        return f"unexpected error ({type(err).__name__}: {first}){where}"

    def _task(self, job_id: str, task: str, spec: dict, reporter: _Reporter) -> tuple[str, str | None, str | None]:
        """A worker task other than a run: (state, message, path of what it wrote)."""
        try:
            reporter.update({"stage": task, "phase": "start", "task": task})
            progress = _task_progress(reporter, task)
            out = TASKS[task](self.dd, job_id, spec, progress=progress)
            progress("done", 1, 1, "files", Path(out).name)  # the line ends on "done", not on its last phase
        except NormvarError as err:
            return JobState.FAILED, str(err), None
        except OSError as err:
            return JobState.FAILED, f"could not write the {task}: {err.strerror or err}", None
        except Exception as err:
            return JobState.FAILED, self._unexpected(job_id, err), None
        return JobState.DONE, None, str(out)


def job_words(err: NormvarError, ckpt: Path) -> str:
    """A run job's failure line in the worker's words. A line about the job's checkpoint (``checkpoints/<id>.ckpt``,
    a path the worker chose) names no option of ``compute`` (``--checkpoint``, ``--fresh``: the worker has
    neither) and says what to do instead; the file is left as it is (``JobTable.remove_checkpoint`` removes only
    a checkpoint normvar wrote)."""
    if str(ckpt) not in err.message:
        return str(err)
    message = err.message.replace("--checkpoint ", "the job's checkpoint ")
    return (
        f"{message} — move it aside (mv {ckpt} {ckpt}.aside) and submit the run again "
        "(the worker removes only checkpoints it wrote)"
    )


def _task_progress(reporter: _Reporter, task: str):
    """A worker task's ``progress(phase, done, total, unit, detail)`` -> the job's progress, with the
    phase's ETA (elapsed / done × remaining steps; none before the first step is done)."""
    state = {"phase": None, "t0": time.monotonic()}

    def progress(phase: str, done: int, total: int, unit: str = "steps", detail: str = "") -> None:
        if phase != state["phase"]:
            state["phase"], state["t0"] = phase, time.monotonic()  # type: ignore[assignment]  # phase and start time
        el = time.monotonic() - state["t0"]  # type: ignore[operator]  # set on the first call
        reporter.update(
            {
                "stage": task,
                "task": task,
                "phase": phase,
                "done": int(done),
                "total": int(total),
                "unit": unit,
                "detail": detail,
                "eta_s": el / done * (total - done) if done else None,
                "percent": round(100.0 * done / total, 1) if total else None,
            }
        )

    return progress


def _published_since(run_path: Path, started: float | None) -> bool:
    """A complete run file under the job's name, written after the job first started. Only this job
    can have written it: names are unique among queued and running jobs, and publishing is atomic."""
    return bool(started) and run_path.exists() and run_path.stat().st_mtime >= started  # type: ignore[operator]  # bool(started) first


class _Reporter:
    """Progress callback for compute_run: writes progress at most every PROGRESS_EVERY_S and
    keeps the heartbeat alive from a background thread (so progress that arrives during a
    quiet spell is still flushed within about a second)."""

    def __init__(self, store: JobStore, job_id: str):
        self.store, self.job_id = store, job_id
        self._lock = threading.Lock()
        self._pending: dict | None = None
        self._last_write = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"normvar-heartbeat-{job_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)
        self._flush()

    def update(self, p: Any) -> None:
        d = progress_dict(p)
        d["updated"] = time.time()
        with self._lock:
            stage_changed = self._pending is None or self._pending.get("stage") != d.get("stage")
            self._pending = d
        if stage_changed or time.monotonic() - self._last_write >= PROGRESS_EVERY_S:
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            d = self._pending
            if d is None or d.get("_written"):
                return
            d["_written"] = True
            payload = {k: v for k, v in d.items() if not k.startswith("_")}
        self._last_write = time.monotonic()
        try:
            self.store.write_progress(self.job_id, payload)
        except (sqlite3.Error, NormvarError):  # progress is best effort; never fail the job for it
            log.warning("job %s: could not write progress", self.job_id, exc_info=True)

    def _loop(self) -> None:
        while not self._done.wait(HEARTBEAT_EVERY_S):
            try:
                with self._lock:
                    dirty = self._pending is not None and not self._pending.get("_written")
                if dirty and time.monotonic() - self._last_write >= PROGRESS_EVERY_S:
                    self._flush()
                else:
                    self.store.heartbeat(self.job_id)
            except Exception:
                log.warning("heartbeat failed", exc_info=True)
