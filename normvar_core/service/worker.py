"""The background worker of a data directory: takes jobs from the queue (``jobs.JobStore``), runs
``compute_run`` for run jobs (checkpointed, resumed after a crash) and the worker tasks of the other
jobs (``TASKS``: report, null, sentence), writes progress and heartbeats (``_Reporter``), and recovers what a
dead worker left (``Worker.recover``). One worker per data directory (``queue/worker.lock``)."""
from __future__ import annotations

import contextlib
import fcntl
import json
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
from normvar_core.datadir import DataDir
from normvar_core.errors import CancelledError, NormvarError
from normvar_core.runs.writer import remove_stale_temps
from normvar_core.service.jobs import RESUME_PRIORITY, TASK_NAMES, JobStore, database_errors, progress_dict
from normvar_core.service.queue import make_huey as _make_huey
from normvar_core.service.states import JobState, move

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

    def __init__(self, data_dir=None, *, poll_s: float = 0.5, checkpoint_every_s: float = 30.0,
                 compute=None):
        """``compute``: a callable with ``compute_run``'s signature (tests); default compute_run."""
        self._compute_fn = compute
        self.store = JobStore(data_dir)
        self.dd = self.store.dd
        self.poll_s = float(poll_s)
        self.checkpoint_every_s = float(checkpoint_every_s)
        self._stop = threading.Event()
        self._lock_fd: int | None = None
        with database_errors(self.store.queue_dir / "huey.sqlite"):
            self.huey, self.task = _make_huey(self.store.queue_dir, task_fn=self._run_job)
        self.jobs_run = 0

    # -------------------------------------------------------------- life cycle
    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _acquire_lock(self, wait_s: float = 5.0) -> None:
        fd = os.open(self.store.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
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
                        fix="one worker per data directory; stop it first or use another --data-dir")
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
            self._lock_fd = None

    def _beat(self, job_id: str | None) -> None:
        now = time.time()
        with self.store._conn() as conn:
            conn.execute(
                "insert into worker (one, pid, started, heartbeat, job_id) values (1, ?, ?, ?, ?) "
                "on conflict(one) do update set pid=excluded.pid, heartbeat=excluded.heartbeat, "
                "job_id=excluded.job_id, started=coalesce(case when worker.pid=excluded.pid "
                "then worker.started end, excluded.started)",
                (os.getpid(), now, now, job_id))

    def recover(self) -> None:
        """Called with the worker lock held, so no other worker is alive: requeue what a dead
        worker left behind (running jobs first, to resume from their checkpoints)."""
        store = self.store
        now = time.time()
        with store._conn() as conn:
            running = conn.execute("select * from jobs where state=? order by seq", (JobState.RUNNING.value,)).fetchall()
        for row in running:
            jid = row["id"]
            if row["cancel_requested"]:
                with store._tx() as conn:
                    move(conn, jid, "cancel_running", finished=now, message="cancelled", worker_pid=None)
                store.remove_checkpoint(jid)
                continue
            if int(row["attempts"]) >= MAX_ATTEMPTS:
                msg = f"the worker died {row['attempts']} times while running this job"
                with store._tx() as conn:
                    move(conn, jid, "fail", finished=now, message=msg, worker_pid=None)
                store.remove_checkpoint(jid)
                continue
            log.warning("job %s was left running by a dead worker (pid %s): resuming it",
                        jid, row["worker_pid"])
            with store._tx() as conn:
                move(conn, jid, "requeue", worker_pid=None)
            store._enqueue(jid, priority=RESUME_PRIORITY)
        pending = store._pending_job_ids()
        with store._conn() as conn:
            queued = conn.execute("select id, seq from jobs where state=? order by seq", (JobState.QUEUED.value,)).fetchall()
        for row in queued:
            if row["id"] not in pending:
                store._enqueue(row["id"], priority=-float(row["seq"]))
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
            with database_errors(self.store.queue_dir / "huey.sqlite"):
                self._serve(once)
        finally:
            with contextlib.suppress(Exception):
                with self.store._conn() as conn:
                    conn.execute("delete from worker where pid=?", (os.getpid(),))
            self._release_lock()
            for sig, h in old_handlers.items():
                signal.signal(sig, h)
        return self.jobs_run

    def _serve(self, once: bool) -> None:
        """The worker loop: recover, then take one task at a time until stopped (or empty, ``once``)."""
        self._beat(None)
        self.recover()
        log.info("worker %d on %s", os.getpid(), self.dd.root)
        last_beat = time.monotonic()
        while not self.stopping:
            task = self.huey.dequeue()
            if task is None:
                if once:
                    break
                if time.monotonic() - last_beat > 2.0:
                    self._beat(None)
                    last_beat = time.monotonic()
                self._stop.wait(self.poll_s)
                continue
            self.jobs_run += 1
            self.huey.execute(task)  # runs self._run_job(job_id); it never raises Exception
            self._beat(None)
            last_beat = time.monotonic()

    def _on_signal(self, signum, frame) -> None:  # noqa: ARG002
        if self.stopping:
            raise _ForcedStop()
        log.warning("signal %d: stopping (a running job stops at its next batch and keeps its checkpoint)", signum)
        self._stop.set()

    # -------------------------------------------------------------- one job
    def _run_job(self, job_id: str) -> None:
        store = self.store
        now = time.time()
        with store._tx() as conn:
            claimed = move(conn, job_id, "claim", where="cancel_requested = 0",
                           started=("sql", f"coalesce(started, {float(now)!r})"), heartbeat=now,
                           worker_pid=os.getpid(), attempts=("sql", "attempts + 1"), message=None)
            if not claimed:  # a cancel that raced with a requeue
                move(conn, job_id, "cancel_queued", where="cancel_requested = 1", finished=now, message="cancelled")
            row = conn.execute("select * from jobs where id=?", (job_id,)).fetchone()
        if not claimed:
            log.info("job %s: not queued any more (%s), skipped", job_id, row["state"] if row else "unknown")
            return
        log.info("job %s (%s): started", job_id, row["name"])
        reporter = _Reporter(store, job_id)
        reporter.start()
        self._beat(job_id)
        try:
            state, message, run_path = self._compute(row, reporter)
        finally:
            reporter.stop()
        finished = time.time()
        if state == JobState.QUEUED:  # stopped by SIGTERM: back to the front of the queue
            with store._tx() as conn:
                move(conn, job_id, "requeue", worker_pid=None, attempts=("sql", "max(attempts - 1, 0)"), message=message)
            store._enqueue(job_id, priority=RESUME_PRIORITY)
            log.info("job %s: stopped, will resume from its checkpoint", job_id)
            return
        outcome = {JobState.DONE: "succeed", JobState.FAILED: "fail", JobState.CANCELLED: "cancel_running"}
        with store._tx() as conn:
            move(conn, job_id, outcome[JobState(state)], message=message, run_path=run_path, finished=finished,
                 heartbeat=finished, worker_pid=None)
        store.remove_checkpoint(job_id)  # compute_run removes it on success; leftovers of a kill too
        log.info("job %s: %s%s", job_id, state, f" ({message})" if message else "")

    def _cancel_requested(self, job_id: str) -> bool:
        with self.store._conn() as conn:
            row = conn.execute("select cancel_requested from jobs where id=?", (job_id,)).fetchone()
        return bool(row is None or row["cancel_requested"])

    def _compute(self, row: sqlite3.Row, reporter: "_Reporter") -> tuple[str, str | None, str | None]:
        """Run compute_run for one claimed job: (state, message, run path)."""
        job_id = row["id"]
        try:
            config = json.loads(row["config"])
        except ValueError as err:
            return JobState.FAILED, f"invalid stored configuration: {err}", None
        task = next((t for t in TASKS if isinstance(config, dict) and t in config), None)
        if task is not None:
            return self._task(job_id, task, config[task], reporter)
        try:
            cfg = RunConfig.from_json(row["config"])
        except NormvarError as err:
            return JobState.FAILED, f"invalid stored configuration: {err}", None
        run_path = self.dd.run_path(cfg.name)
        ckpt = self.store.checkpoint_path(job_id)
        if int(row["attempts"]) > 1 and _published_since(run_path, row["started"]):
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
                last_check[1] = self._cancel_requested(job_id)
            return last_check[1]

        try:
            compute_run = self._compute_fn
            if compute_run is None:
                from normvar_core.pipeline.execute.local import compute_run
            path = compute_run(
                cfg, self.dd.root, overwrite=bool(row["overwrite"]), progress=reporter.update,
                checkpoint=ckpt, checkpoint_every_s=self.checkpoint_every_s,
                should_cancel=should_cancel)
        except CancelledError as err:
            if self._cancel_requested(job_id):
                return JobState.CANCELLED, "cancelled", None
            if self.stopping:
                return JobState.QUEUED, "interrupted by a worker shutdown; resumes from its checkpoint", None
            return JobState.CANCELLED, err.message or "cancelled", None
        except NormvarError as err:
            return JobState.FAILED, str(err), None
        except Exception as err:  # noqa: BLE001 - a bad job must not kill the worker
            return JobState.FAILED, self._unexpected(job_id, err), None
        return JobState.DONE, None, str(path)

    def _unexpected(self, job_id: str, err: Exception) -> str:
        """One line for the job row; the full traceback in the job's log file."""
        log.exception("job %s failed", job_id)
        trace = self.store.log_path(job_id)
        try:
            trace.parent.mkdir(parents=True, exist_ok=True)
            trace.write_text(traceback.format_exc())
        except OSError:
            trace = None
        first = (str(err).splitlines() or [""])[0][:200]
        where = f"; full traceback in {trace}" if trace else ""
        return f"unexpected error ({type(err).__name__}: {first}){where}"

    def _task(self, job_id: str, task: str, spec: dict, reporter: "_Reporter") -> tuple[str, str | None, str | None]:
        """A worker task other than a run: (state, message, path of what it wrote)."""
        try:
            reporter.update({"stage": task, "phase": "start", "task": task})
            out = TASKS[task](self.dd, job_id, spec, progress=_task_progress(reporter, task))
        except NormvarError as err:
            return JobState.FAILED, str(err), None
        except OSError as err:
            return JobState.FAILED, f"could not write the {task}: {err.strerror or err}", None
        except Exception as err:  # noqa: BLE001
            return JobState.FAILED, self._unexpected(job_id, err), None
        return JobState.DONE, None, str(out)


def _task_progress(reporter: "_Reporter", task: str):
    """A worker task's ``progress(phase, done, total, unit, detail)`` -> the job's progress, with the
    phase's ETA (elapsed / done × remaining steps; none before the first step is done)."""
    state = {"phase": None, "t0": time.monotonic()}

    def progress(phase: str, done: int, total: int, unit: str = "steps", detail: str = "") -> None:
        if phase != state["phase"]:
            state["phase"], state["t0"] = phase, time.monotonic()
        el = time.monotonic() - state["t0"]
        reporter.update({"stage": task, "task": task, "phase": phase, "done": int(done), "total": int(total),
                         "unit": unit, "detail": detail, "eta_s": el / done * (total - done) if done else None,
                         "percent": round(100.0 * done / total, 1) if total else None})

    return progress


def _write_report(dd: DataDir, job_id: str, spec: dict, progress=None) -> Path:
    """Task "report": the slides of the runs -> ``reports/<job id>.<format>`` (temp file + rename);
    phases read (runs), slides, write."""
    from normvar_core.report.slides import build_slides
    from normvar_core.report.writers import write_report
    from normvar_core.runs.reader import open_run

    report = progress or (lambda *a, **k: None)
    fmt = spec.get("format", "pptx")
    runs = []
    for i, p in enumerate(spec["runs"]):
        report("read", i, len(spec["runs"]), "runs", Path(p).stem)
        runs.append(open_run(p))
    report("slides", 0, 1, "steps", f"{len(runs)} run(s)")
    slides = build_slides(runs)
    report("write", 0, 1, "files", f"{fmt.upper()}")
    return write_report(slides, dd.reports / f"{job_id}.{fmt}", fmt)


def _write_null(dd: DataDir, job_id: str, spec: dict, progress=None) -> Path:  # noqa: ARG001
    """Task "null": the Gaussian null of a run, published as an ordinary run (atomically)."""
    from normvar_core.pipeline.accumulators.geometry import host_search
    from normvar_core.runs.null import null_name, write_null_run
    from normvar_core.runs.reader import open_run

    run = open_run(spec["run"])
    name = null_name(run, spec["kind"], int(spec["seed"]))
    return write_null_run(run, spec["kind"], dd.run_path(name), seed=int(spec["seed"]), overwrite=True,
                          search=host_search, progress=progress)


def _write_sentence(dd: DataDir, job_id: str, spec: dict, progress=None) -> Path:
    """Task "sentence": a typed sentence against a run's statistics (``own_sentence``) ->
    ``reports/<job id>.sentence.json``."""
    from normvar_core.service.own_sentence import write_sentence

    return write_sentence(spec["run"], spec["text"], dd.reports / f"{job_id}.sentence.json", dd.root,
                          progress=progress)


TASKS = {"report": _write_report, "null": _write_null, "sentence": _write_sentence}
"""Worker tasks besides runs; a job's config is ``{task: spec}`` (``JobStore.submit_report/submit_null``)."""
assert tuple(TASKS) == TASK_NAMES


def _published_since(run_path: Path, started: float | None) -> bool:
    """A complete run file under the job's name, written after the job first started. Only this job
    can have written it: names are unique among queued and running jobs, and publishing is atomic."""
    return bool(started) and run_path.exists() and run_path.stat().st_mtime >= started


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
            payload = json.dumps({k: v for k, v in d.items() if not k.startswith("_")})
        now = time.time()
        self._last_write = time.monotonic()
        try:
            with self.store._conn() as conn:
                conn.execute("update jobs set progress=?, heartbeat=? where id=?", (payload, now, self.job_id))
        except sqlite3.Error:  # progress is best effort; never fail the job for it
            log.warning("job %s: could not write progress", self.job_id, exc_info=True)

    def _loop(self) -> None:
        while not self._done.wait(HEARTBEAT_EVERY_S):
            try:
                with self._lock:
                    dirty = self._pending is not None and not self._pending.get("_written")
                if dirty and time.monotonic() - self._last_write >= PROGRESS_EVERY_S:
                    self._flush()
                else:
                    with self.store._conn() as conn:
                        conn.execute("update jobs set heartbeat=? where id=?", (time.time(), self.job_id))
            except Exception:  # noqa: BLE001
                log.warning("heartbeat failed", exc_info=True)
