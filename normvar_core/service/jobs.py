"""The persistent job queue and the job table (the worker is ``service.worker``; uploads ``corpus_store``).

Everything lives under one data directory (``DataDir``); two data directories never share state:

``queue/huey.sqlite``
    The queue itself: `huey <https://huey.readthedocs.io>`_ with its SQLite storage
    (``huey.SqliteHuey``). Chosen because it is a maintained queue library that needs no
    server (one SQLite file, WAL mode), survives restarts of the worker and of the app, and is
    already a pinned dependency. A queued task carries nothing but the job id (a string); the
    tasks are serialized as JSON (``_JsonSerializer``), never with pickle, and huey's result
    store is switched off.
``queue/jobs.sqlite``
    The job table: id, run name, the ``RunConfig`` as JSON (a worker task that is not a run:
    ``{"report"|"null": spec}``, see ``TASKS``), state (queued, running, done,
    failed, cancelled), message (the failure text), progress JSON (stage, sentences_done,
    sentences_total, embeddings, emb_per_s, eta_s, updated), run path, created/started/finished
    times, heartbeat. WAL mode with a busy timeout; every transaction is short, so the
    dashboard and ``normvar jobs`` can read it at any time from other processes.
``queue/worker.lock``
    ``flock``-ed by the one worker of this data directory for its whole life; the kernel drops
    the lock when the worker dies, even on SIGKILL. A second worker is refused.
``checkpoints/<job id>.ckpt``
    The checkpoint that ``compute_run`` rewrites atomically while a job runs.

huey deletes a task from its queue when a consumer takes it, so a task whose worker was killed
mid-run is gone from huey. The job table is the source of truth: when a worker starts it
re-enqueues every job left ``running`` by a dead worker (at the front of the queue, so it
resumes from its checkpoint) and every ``queued`` job that has no task in huey.

Public API (used by the CLI and the dashboard)::

    store = JobStore(data_dir)
    job_id = store.submit(cfg, overwrite=False)      # -> str
    job_id = store.submit_report(runs, "pptx")       # a slide deck / PDF / HTML built by the worker
    job_id = store.submit_null(run, "isotropic")     # a Gaussian null run drawn by the worker
    store.list(limit=50) -> list[Job]; store.get(job_id) -> Job; store.cancel(job_id) -> Job
    store.worker() -> WorkerInfo | None              # is a worker running on this data dir?
    worker.Worker(data_dir).run(once=False) -> int    # the worker loop (normvar worker), service/worker.py
    store_corpus(data_dir, data, ext) -> Path        # uploaded corpora: corpora/<sha256><ext>
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import math
import os
import re
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator


from normvar_core.config import RunConfig, default_run_name
from normvar_core.datadir import DataDir
from normvar_core.errors import NormvarError
from normvar_core.runs.writer import check_destination
from normvar_core.service.corpus_store import (CORPUS_EXTENSIONS, DEFAULT_MAX_UPLOAD_MB, corpus_extension,
                                               max_upload_bytes, store_corpus)
from normvar_core.service.queue import make_huey as _make_huey
from normvar_core.service.states import ACTIVE, FINAL, JobState, move

log = logging.getLogger("normvar.jobs")

STATES = tuple(s.value for s in JobState)
ACTIVE_STATES = tuple(s.value for s in ACTIVE)
FINAL_STATES = tuple(s.value for s in FINAL)
PROGRESS_FIELDS = ("stage", "sentences_done", "sentences_total", "embeddings", "emb_per_s", "eta_s", "phase", "done",
                   "total", "unit", "detail", "percent")


RESUME_PRIORITY = 1.0  # jobs resumed after a crash go first; fresh jobs use -seq (FIFO)
TASK_NAMES = ("report", "null", "sentence")
"""Worker tasks besides runs (``worker.TASKS``); such a job's config is ``{task: spec}``."""

_SCHEMA = (
    """create table if not exists jobs (
        seq integer primary key autoincrement,
        id text not null unique,
        name text not null,
        config text not null,
        overwrite integer not null default 0,
        state text not null,
        message text,
        progress text,
        run_path text,
        created real not null,
        started real,
        finished real,
        heartbeat real,
        worker_pid integer,
        cancel_requested integer not null default 0,
        attempts integer not null default 0)""",
    "create index if not exists jobs_state on jobs (state)",
    "create index if not exists jobs_name on jobs (name)",
    """create table if not exists worker (
        one integer primary key check (one = 1),
        pid integer, started real, heartbeat real, job_id text)""",
)


# ---------------------------------------------------------------------------------- job rows
@dataclass(frozen=True)
class Job:
    """One row of the job table (a snapshot; call ``JobStore.get`` again for fresh values)."""

    id: str
    name: str
    config: dict[str, Any]
    state: str
    message: str | None
    progress: dict[str, Any] | None
    run_path: str | None
    created: float
    started: float | None
    finished: float | None
    heartbeat: float | None
    overwrite: bool
    cancel_requested: bool
    attempts: int
    worker_pid: int | None
    interrupted: bool = False
    """True for a ``running`` job whose worker is gone (it resumes when a worker starts)."""

    @property
    def cfg(self) -> RunConfig:
        return RunConfig.from_dict(self.config)

    @property
    def task(self) -> str:
        """"run", or the worker task of a job that is not a run (``TASKS``: "report", "null")."""
        return next((t for t in TASK_NAMES if t in self.config), "run")

    @property
    def percent(self) -> float | None:
        if self.state == JobState.DONE:
            return 100.0
        p = self.progress or {}
        if p.get("percent") is not None and p.get("phase"):  # the whole run's, by phase (compute.PHASE_SPAN)
            return max(0.0, min(100.0, float(p["percent"])))
        done, total = p.get("sentences_done"), p.get("sentences_total")
        if done is None or not total:
            return None
        return max(0.0, min(100.0, 100.0 * float(done) / float(total)))

    @property
    def emb_per_s(self) -> float | None:
        return (self.progress or {}).get("emb_per_s")

    @property
    def eta_s(self) -> float | None:
        return (self.progress or {}).get("eta_s") if self.state == JobState.RUNNING else None

    @property
    def stage(self) -> str | None:
        return (self.progress or {}).get("stage")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["percent"] = self.percent
        return d


@dataclass(frozen=True)
class WorkerInfo:
    pid: int | None
    started: float | None
    heartbeat: float | None
    job_id: str | None


# ---------------------------------------------------------------------------------- sqlite
def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("pragma busy_timeout = 30000")
    conn.execute("pragma synchronous = normal")
    return conn


@contextlib.contextmanager
def database_errors(path: Path) -> Iterator[None]:
    """A damaged, locked or unwritable queue database -> one NormvarError naming the fix (the CLI
    exits 2, the dashboard shows it). Published runs never live in it, so moving it aside loses
    only the queue."""
    try:
        yield
    except (sqlite3.IntegrityError, sqlite3.ProgrammingError):
        raise
    except sqlite3.OperationalError as err:
        text = str(err)
        if "locked" in text or "busy" in text:
            raise NormvarError(f"the job database {path} stayed locked by another process for 30 s",
                               fix="wait for the other normvar process, or stop it (normvar worker stop)") from None
        if "readonly" in text or "unable to open" in text or "disk I/O" in text:
            raise NormvarError(f"cannot write the job database {path} ({text})",
                               fix=f"make {path.parent} writable, or use another --data-dir") from None
        raise NormvarError(f"the job database {path} is damaged ({text})",
                           fix=f"move it aside (mv {path} {path}.damaged) and start again; published runs "
                               "are not affected, the jobs queued in it are lost") from None
    except sqlite3.DatabaseError as err:
        raise NormvarError(f"the job database {path} is damaged ({err})",
                           fix=f"move it aside (mv {path} {path}.damaged) and start again; published runs "
                               "are not affected, the jobs queued in it are lost") from None


def _set_wal(conn: sqlite3.Connection) -> None:
    deadline = time.monotonic() + 30.0
    while True:  # switching a fresh file to WAL needs a write lock; retry under concurrency
        try:
            conn.execute("pragma journal_mode = wal")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _json_safe(value.item())
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def fmt_eta(seconds) -> str:
    """"1:05:03", "4:12", "12 s", or "–" when unknown."""
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
            return (f"{stage} · {int(p.get('sentences_done') or 0):,}/{int(p['sentences_total']):,} sentences · "
                    f"{(p.get('emb_per_s') or 0):,.0f} emb/s · ETA {fmt_eta(p.get('eta_s'))}")
        return str(stage)
    head = phase if task == "run" else f"{task} · {phase}"
    parts = [head]
    if p.get("detail"):
        parts.append(str(p["detail"]))
    if p.get("total"):
        parts.append(f"{int(p.get('done') or 0):,}/{int(p['total']):,} {p.get('unit') or ''}".rstrip())
    if phase == "forward":
        parts.append(f"{(p.get('emb_per_s') or 0):,.0f} emb/s")
    if phase not in ("plan", "done"):
        parts.append(f"ETA {fmt_eta(p.get('eta_s'))}")
    return " · ".join(parts)


def progress_dict(p: Any) -> dict[str, Any]:
    """``compute.Progress`` (dataclass, namedtuple or mapping) -> JSON-able dict."""
    if isinstance(p, dict):
        d = dict(p)
    elif dataclasses.is_dataclass(p):
        d = dataclasses.asdict(p)
    elif hasattr(p, "_asdict"):
        d = p._asdict()
    else:
        d = {k: getattr(p, k, None) for k in PROGRESS_FIELDS}
    return {k: _json_safe(v) for k, v in d.items()}


# ---------------------------------------------------------------------------------- helpers
def _absolute_paths(cfg: RunConfig) -> RunConfig:
    """The worker may run in another directory: make local corpus/model paths absolute."""
    changes: dict[str, Any] = {}
    if cfg.corpus and not Path(cfg.corpus).expanduser().is_absolute():
        changes["corpus"] = str(Path(cfg.corpus).expanduser().resolve())
    m = cfg.model
    looks_local = m.startswith((".", "~", "/")) or os.sep in m and Path(m).expanduser().exists()
    if looks_local and Path(m).expanduser().exists() and not Path(m).expanduser().is_absolute():
        changes["model"] = str(Path(m).expanduser().resolve())
    return cfg.replace(**changes) if changes else cfg


# ---------------------------------------------------------------------------------- store
class JobStore:
    """The job table (and the huey queue) of one data directory. Cheap to create; every
    method opens its own short-lived SQLite connection, so it is safe across processes and
    threads."""

    def __init__(self, data_dir: str | os.PathLike | DataDir | None = None):
        self.dd = DataDir.at(data_dir)
        self.queue_dir = self.dd.queue
        self.db_path = self.queue_dir / "jobs.sqlite"
        self.lock_path = self.queue_dir / "worker.lock"
        self._huey = None
        with self._conn() as conn:
            _set_wal(conn)
            for stmt in _SCHEMA:
                conn.execute(stmt)

    # -------------------------------------------------------------- plumbing
    @contextlib.contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        with database_errors(self.db_path):
            conn = _connect(self.db_path)
            try:
                yield conn
            finally:
                conn.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A short write transaction (BEGIN IMMEDIATE: no lock upgrade deadlocks)."""
        with self._conn() as conn:
            conn.execute("begin immediate")
            try:
                yield conn
            except BaseException:
                conn.execute("rollback")
                raise
            conn.execute("commit")

    def _queue(self):
        if self._huey is None:
            self._huey = _make_huey(self.queue_dir)
        return self._huey

    def _enqueue(self, job_id: str, priority: float) -> None:
        with database_errors(self.queue_dir / "huey.sqlite"):
            huey, task = self._queue()
            try:
                huey.enqueue(task.s(job_id, priority=priority))
            finally:
                huey.storage.close()  # no idle SQLite handle left in long-lived callers

    def _job(self, row: sqlite3.Row, worker_running: bool | None = None) -> Job:
        interrupted = False
        if row["state"] == JobState.RUNNING:
            if worker_running is None:
                worker_running = self.worker_running()
            interrupted = not worker_running
        return Job(
            id=row["id"], name=row["name"], config=json.loads(row["config"]), state=JobState(row["state"]),
            message=row["message"],
            progress=json.loads(row["progress"]) if row["progress"] else None,
            run_path=row["run_path"], created=row["created"], started=row["started"],
            finished=row["finished"], heartbeat=row["heartbeat"], overwrite=bool(row["overwrite"]),
            cancel_requested=bool(row["cancel_requested"]), attempts=int(row["attempts"]),
            worker_pid=row["worker_pid"], interrupted=interrupted,
        )

    def log_path(self, job_id: str) -> Path:
        """Where the worker writes the full traceback of a job's unexpected failure."""
        return self.dd.queue / "logs" / f"{re.sub(r'[^A-Za-z0-9_-]', '_', job_id)}.log"

    def checkpoint_path(self, job_id: str) -> Path:
        return self.dd.checkpoints / f"{job_id}.ckpt"

    def remove_checkpoint(self, job_id: str) -> None:
        """Remove every file of the job's checkpoint (``<id>.ckpt`` and its siblings)."""
        import shutil

        for p in self.dd.checkpoints.glob(f"{job_id}.*"):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
        for p in self.dd.checkpoints.glob(f".{job_id}.*"):  # temp files of an atomic rewrite
            with contextlib.suppress(OSError):
                p.unlink()

    # -------------------------------------------------------------- public API
    def submit(self, cfg: RunConfig | dict, *, overwrite: bool = False) -> str:
        """Queue a run; returns the job id. Validates the configuration and refuses a run name
        that is already published or queued/running (unless ``overwrite``)."""
        if isinstance(cfg, dict):
            cfg = RunConfig.from_dict(cfg)
        elif not isinstance(cfg, RunConfig):
            raise NormvarError(f"not a run configuration: {type(cfg).__name__}", fix="pass a RunConfig")
        cfg = RunConfig.from_dict(cfg.to_dict())  # validates
        cfg = _absolute_paths(cfg)
        name = cfg.name or default_run_name(cfg)
        cfg = cfg.replace(name=name)
        check_destination(self.dd.run_path(name), overwrite)  # the same pre-load check as `normvar run`
        job_id = uuid.uuid4().hex[:12]
        now = time.time()
        with self._tx() as conn:
            if not overwrite:
                if self.dd.run_path(name).exists():
                    raise NormvarError(
                        f"a run named {name!r} already exists ({self.dd.run_path(name)})",
                        fix="choose another --name, or pass --overwrite to replace it")
                other = conn.execute(
                    "select id, state from jobs where name = ? and state in ('queued','running')",
                    (name,)).fetchone()
                if other:
                    raise NormvarError(
                        f"a run named {name!r} is already {other['state']} as job {other['id']}",
                        fix="choose another --name, cancel that job, or pass --overwrite")
            else:
                self._refuse_duplicate(conn, name, cfg)
            seq = self._insert(conn, job_id, name, cfg.to_json(), overwrite, now)
        return self._enqueue_new(job_id, seq)

    @staticmethod
    def _refuse_duplicate(conn, name: str, cfg: RunConfig) -> None:
        """``--overwrite`` of a run that a queued or running job will already compute with the very
        same options: say so instead of queuing a second identical job (other options may replace it)."""
        for other in conn.execute("select id, state, config from jobs where name = ? and state in "
                                  "('queued','running')", (name,)).fetchall():
            try:
                same = RunConfig.from_json(other["config"]).to_json() == cfg.to_json()
            except (NormvarError, ValueError):
                same = False
            if same:
                raise NormvarError(f"run {name!r} is already {other['state']} as job {other['id']} with the same "
                                   "options; --overwrite would only queue a duplicate",
                                   fix=f"wait for it (normvar jobs) or cancel it first (normvar cancel {other['id']})")

    def submit_report(self, runs: list[str], fmt: str = "pptx") -> str:
        """Queue a report (slide deck, PDF or HTML) of published ``runs``; returns the job id. The
        worker writes it to ``reports/<job id>.<fmt>`` (the job's ``run_path``)."""
        from normvar_core.report.writers import FORMATS
        from normvar_core.runs.reader import resolve_run

        if fmt not in FORMATS:
            raise NormvarError(f"unknown report format {fmt!r}", fix=f"use one of {', '.join(FORMATS)}")
        if not runs:
            raise NormvarError("a report needs at least one run", fix="pick a published run")
        paths = [str(resolve_run(r, self.dd.root)) for r in runs]  # every run checked before queueing
        name = f"report: {' vs '.join(Path(p).stem for p in paths)} ({fmt})"[:200]
        return self._submit_task("report", {"runs": paths, "format": fmt}, name)

    def submit_null(self, run: str, kind: str, seed: int = 0) -> str:
        """Queue the Gaussian null of a published run (``runs.null.write_null_run``; with the run's
        layer geometry it takes up to a minute or two at bert-base scale); publishes ``null_name``."""
        from normvar_core.runs.null import null_name
        from normvar_core.runs.reader import open_run, resolve_run
        from normvar_core.stats.null import KINDS

        if kind not in KINDS:
            raise NormvarError(f"unknown null kind {kind!r}", fix=f"use one of {', '.join(KINDS)}")
        if int(seed) < 0:
            raise NormvarError(f"the seed must be >= 0, got {seed}", fix="use a seed of 0 or more")
        src = open_run(resolve_run(run, self.dd.root))
        name = null_name(src, kind, int(seed))
        check_destination(self.dd.run_path(name), True)
        return self._submit_task("null", {"run": str(src.path), "kind": kind, "seed": int(seed)}, name)

    def submit_sentence(self, run: str, text: str) -> str:
        """Queue "your own sentence" on a published run (``own_sentence.write_sentence``): the worker runs
        the run's model on ``text`` and writes ``reports/<job id>.sentence.json``."""
        from normvar_core.runs.reader import resolve_run
        from normvar_core.service.own_sentence import check_text

        text = check_text(text)
        path = str(resolve_run(run, self.dd.root))
        return self._submit_task("sentence", {"run": path, "text": text}, f"sentence: {Path(path).stem}")

    def _submit_task(self, task: str, spec: dict, name: str) -> str:
        """Queue a worker task other than a run (``TASKS``); the same task already queued or running is
        not queued twice: its job id is returned."""
        config = json.dumps({task: spec})
        with self._tx() as conn:
            same = conn.execute("select id from jobs where name = ? and config = ? and state in ('queued','running')",
                                (name, config)).fetchone()
            if same:
                return same["id"]
            job_id = uuid.uuid4().hex[:12]
            seq = self._insert(conn, job_id, name, config, False, time.time())
        return self._enqueue_new(job_id, seq)

    @staticmethod
    def _insert(conn, job_id: str, name: str, config: str, overwrite: bool, now: float) -> int:
        cur = conn.execute("insert into jobs (id, name, config, overwrite, state, created) "
                           "values (?, ?, ?, ?, 'queued', ?)", (job_id, name, config, int(bool(overwrite)), now))
        return cur.lastrowid

    def _enqueue_new(self, job_id: str, seq: int) -> str:
        # After the commit: if this enqueue is lost (a crash), the worker re-enqueues the job at start;
        # if the queue refuses it (damaged), the job is taken back: nothing is left half-queued.
        try:
            self._enqueue(job_id, priority=-float(seq))
        except NormvarError:
            with self._tx() as conn:
                conn.execute("delete from jobs where id = ?", (job_id,))
            raise
        return job_id

    def list(self, limit: int | None = 50, *, states: tuple[str, ...] | None = None) -> list[Job]:
        """Jobs, newest first."""
        sql = "select * from jobs"
        params: list[Any] = []
        if states:
            sql += f" where state in ({','.join('?' * len(states))})"
            params += list(states)
        sql += " order by seq desc"
        if limit is not None:
            sql += " limit ?"
            params.append(int(limit))
        with self._conn() as conn:
            rows = conn.execute(sql, params).fetchall()
        running = self.worker_running() if any(r["state"] == JobState.RUNNING for r in rows) else None
        return [self._job(r, running) for r in rows]

    def get(self, job_id: str) -> Job:
        """A job by id (or by a unique prefix of it)."""
        job_id = str(job_id).strip()
        if not job_id:
            raise NormvarError("no job id given", fix="see `normvar jobs` for the ids")
        with self._conn() as conn:
            rows = conn.execute(
                "select * from jobs where id = ? union select * from jobs where id like ? escape '\\' "
                "limit 3", (job_id, job_id.replace("\\", "\\\\").replace("%", "\\%")
                                        .replace("_", "\\_") + "%")).fetchall()
        exact = [r for r in rows if r["id"] == job_id]
        if exact:
            return self._job(exact[0])
        if not rows:
            raise NormvarError(f"no job {job_id!r} in {self.dd.root}", fix="see `normvar jobs` for the ids")
        if len(rows) > 1:
            raise NormvarError(f"job id {job_id!r} is ambiguous", fix="give more characters of the id")
        return self._job(rows[0])

    def cancel(self, job_id: str) -> Job:
        """Cancel a job. A queued job never runs; a running job stops at its next batch
        (the worker marks it cancelled, publishes nothing and removes its checkpoint).
        A finished job is returned unchanged."""
        job = self.get(job_id)
        now = time.time()
        with self._tx() as conn:
            row = conn.execute("select state from jobs where id = ?", (job.id,)).fetchone()
            state = row["state"]
            if state == JobState.QUEUED:
                move(conn, job.id, "cancel_queued", cancel_requested=1, finished=now,
                     message="cancelled before it ran")
            elif state == JobState.RUNNING:
                conn.execute("update jobs set cancel_requested=1 where id=?", (job.id,))
        if state == JobState.QUEUED:
            self.remove_checkpoint(job.id)  # a job requeued after SIGTERM may have one
        elif state == JobState.RUNNING and not self.worker_running():
            # its worker died: nobody will see the request, so finish it here
            with self._tx() as conn:
                n = move(conn, job.id, "cancel_running", finished=now, message="cancelled", worker_pid=None)
            if n:
                self.remove_checkpoint(job.id)
        return self.get(job.id)

    def worker_running(self) -> bool:
        """Whether a worker holds this data directory's worker lock (exact, even after SIGKILL)."""
        try:
            fd = os.open(self.lock_path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def worker(self) -> WorkerInfo | None:
        """The running worker of this data directory, or None."""
        if not self.worker_running():
            return None
        with self._conn() as conn:
            row = conn.execute("select * from worker").fetchone()
        if row is None:
            return WorkerInfo(None, None, None, None)
        return WorkerInfo(row["pid"], row["started"], row["heartbeat"], row["job_id"])

    # -------------------------------------------------------------- used by the worker
    def _pending_job_ids(self) -> set[str]:
        with database_errors(self.queue_dir / "huey.sqlite"):
            huey, _task = self._queue()
            try:
                return {str(t.args[0]) for t in huey.pending() if t.args}
            finally:
                huey.storage.close()
