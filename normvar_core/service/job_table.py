"""The job queue of one data directory: ONE SQLite file (``queue/jobs.sqlite``) whose table ``jobs`` is
both the queue and the record of every job, and every transition of a job in it.

This is the one module that opens the file and writes SQL on ``jobs``: the submitters (``jobs.JobStore``),
the CLI, the dashboard and the worker (``worker.Worker``) call the methods of ``JobTable``.

Columns: id, run name, the ``RunConfig`` as JSON (a worker task that is not a run: ``{task: spec}``, see
``tasks.TASKS``), state (``job.JobState``), message (the failure text), progress JSON (``job_progress``),
run path, created/started/finished times, heartbeat, the worker's pid, a cancel request and the number of
attempts. A second table, ``worker``, holds the one row of the data directory's worker (pid, started,
heartbeat, job). WAL mode with a 30 s busy timeout; every transaction is short, so the dashboard and
``normvar jobs`` can read the table at any time from other processes.

Every change of state is ``move``: ONE ``UPDATE`` guarded by the states the transition starts from
(``job.TRANSITIONS``), so two processes racing on a job never both succeed. The worker takes the next
job with ``claim_next``: in one write transaction, the job that ran before and was put back (it resumes
from its checkpoint), else the oldest queued one (``NEXT_JOB_ORDER``). A job is queued by one insert, so
nothing is ever half-queued, and a job a dead worker left ``running`` is simply put back by the next one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import sqlite3
import stat
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from glob import escape as glob_escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from normvar_core.datadir import DataDir
from normvar_core.destination import hard_linked, lstat_or_none, open_regular, refuse_entry
from normvar_core.errors import NormvarError
from normvar_core.run_lock import lock_path, remove_if_stale
from normvar_core.service.job import TRANSITIONS, Job, JobState, WorkerInfo

log = logging.getLogger("normvar.jobs")

SCHEMA = (
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
        attempts integer not null default 0,
        publishing integer not null default 0)""",
    "create index if not exists jobs_state on jobs (state)",
    "create index if not exists jobs_name on jobs (name)",
    """create table if not exists worker (
        one integer primary key check (one = 1),
        pid integer, started real, heartbeat real, job_id text)""",
)

NEXT_JOB_ORDER = "started is null, seq"
"""The queue's order: jobs put back after a shutdown or a crash (they have started) first, then
submission order (FIFO)."""

_MOVABLE_COLUMNS = {
    "started",
    "finished",
    "heartbeat",
    "worker_pid",
    "attempts",
    "message",
    "run_path",
    "cancel_requested",
    "publishing",
}

ADDED_COLUMNS = {"publishing": "integer not null default 0"}
"""Columns added since the first job tables: added to an older table when it is opened."""


def _damaged(path: Path, text: str) -> NormvarError:
    return NormvarError(
        f"the job database {path} is damaged ({text})",
        fix=f"move it aside (mv {path} {path}.damaged) and start again; published runs "
        "are not affected, the jobs queued in it are lost",
    )


@contextlib.contextmanager
def database_errors(path: Path) -> Iterator[None]:
    """A damaged, locked or unwritable job database -> one NormvarError naming the fix (the CLI exits 2,
    the dashboard shows it). Published runs never live in it, so moving it aside loses only the queue."""
    try:
        yield
    except (sqlite3.IntegrityError, sqlite3.ProgrammingError):
        raise
    except sqlite3.OperationalError as err:
        text = str(err)
        if "locked" in text or "busy" in text:
            raise NormvarError(
                f"the job database {path} stayed locked by another process for 30 s",
                fix="wait for the other normvar process, or stop it (normvar worker stop)",
            ) from None
        if "readonly" in text or "unable to open" in text or "disk I/O" in text:
            raise NormvarError(
                f"cannot write the job database {path} ({text})",
                fix=f"make {path.parent} writable, or use another --data-dir",
            ) from None
        raise _damaged(path, text) from None
    except sqlite3.DatabaseError as err:
        raise _damaged(path, str(err)) from None


SIDE_FILES = ("", "-wal", "-shm", "-journal")
"""The job table's file and the files SQLite keeps beside it."""


def check_table_files(path: Path) -> None:
    """One NormvarError line, before SQLite opens anything, when the job table's file or a file SQLite keeps
    beside it is a symbolic link, a folder, a FIFO, a device or a socket (``destination.refuse_entry``) or a
    hard link (a file with another name too: ``destination.hard_linked``): the table is never written through a
    link (another application's database stays as it is) and never blocks on a FIFO."""
    for side in SIDE_FILES:
        p = path.with_name(path.name + side)
        what = "the job table" if not side else "the job table's file"
        fix = f"move it aside (mv {p} {p}.aside); normvar keeps its job table as a regular file in {path.parent}"
        refuse_entry(p, what, fix=fix)
        st = lstat_or_none(p)
        if st is not None and st.st_nlink > 1:
            raise hard_linked(p, what, st.st_nlink, fix=fix)


def is_own_checkpoint(path: Path) -> bool:
    """Whether ``path`` holds a checkpoint normvar wrote: a regular file with one name (``open_regular``: no link
    followed) that is a zip archive (``.npz``) with normvar's ``meta_json`` entry. Read, never changed."""
    try:
        fd = open_regular(path, os.O_RDONLY, what="the checkpoint")
    except (OSError, NormvarError):
        return False
    try:
        with os.fdopen(fd, "rb") as fh, zipfile.ZipFile(fh) as z:
            return "meta_json.npy" in z.namelist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


OWN_OBJECTS = frozenset({"jobs", "jobs_state", "jobs_name", "worker", "sqlite_sequence", "sqlite_autoindex_jobs_1"})
"""Every table and index of a job table (``SCHEMA``, with what SQLite adds for it)."""
SQLITE_HEADER = b"SQLite format 3\x00"


def check_own_table(path: Path) -> None:
    """Before normvar creates its tables or switches the file to WAL: the file at ``path`` is new (missing or
    empty) or normvar's own job table — a SQLite database holding only ``OWN_OBJECTS``. Another application's
    database, or a file that is not SQLite, is refused in one line and left exactly as it is (opened read-only)."""
    check_table_files(path)
    try:
        fd = open_regular(path, os.O_RDONLY, what="the job table")
    except FileNotFoundError:
        return
    try:
        head = os.read(fd, len(SQLITE_HEADER))
    finally:
        os.close(fd)
    if not head:
        return
    fix = f"move it aside (mv {path} {path}.aside), or use another --data-dir; normvar makes its own job table"
    if head != SQLITE_HEADER:
        raise _damaged(path, "not a SQLite database; it was left as it is")
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=30.0)
        try:
            names = {row[0] for row in conn.execute("select name from sqlite_master")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as err:
        raise _damaged(path, str(err)) from None
    foreign = sorted(names - OWN_OBJECTS)
    if foreign:
        shown = ", ".join(foreign[:4]) + (", ..." if len(foreign) > 4 else "")
        raise NormvarError(
            f"the job table {path} is another application's database (it holds {shown}); it was left as it is",
            fix=fix,
        )


def _connect(path: Path) -> sqlite3.Connection:
    """Autocommit (transactions are explicit and short), a 30 s busy timeout, rows by column name."""
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("pragma busy_timeout = 30000")
    conn.execute("pragma synchronous = normal")
    return conn


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


def move(conn: sqlite3.Connection, job_id: str, transition: str, *, where: str = "", **columns) -> int:
    """Apply ``transition`` (``job.TRANSITIONS``) to ``job_id`` with the extra ``columns`` set (values,
    or SQL expressions given as ``("sql", "expr")`` tuples); ``where`` adds a guard. Returns the rows
    changed (0: the job was not in a state the transition starts from)."""
    frm, to = TRANSITIONS[transition]
    sets, args = ["state = ?"], [to.value]
    for col, val in columns.items():
        if col not in _MOVABLE_COLUMNS:
            raise ValueError(f"unknown job column {col!r}")
        if isinstance(val, tuple) and val and val[0] == "sql":
            sets.append(f"{col} = {val[1]}")
        else:
            sets.append(f"{col} = ?")
            args.append(val)
    marks = ", ".join("?" for _ in frm)
    sql = f"UPDATE jobs SET {', '.join(sets)} WHERE id = ? AND state IN ({marks})" + (f" AND {where}" if where else "")
    return conn.execute(sql, (*args, job_id, *(s.value for s in frm))).rowcount


_FINISH = {JobState.DONE: "succeed", JobState.FAILED: "fail", JobState.CANCELLED: "cancel_running"}


class JobTable:
    """The job queue of one data directory. Cheap to create; every method opens its own short-lived
    SQLite connection, so it is safe across processes and threads."""

    def __init__(self, data_dir: str | os.PathLike | DataDir | None = None):
        self.dd = DataDir.at(data_dir)
        self.queue_dir = self.dd.queue
        self.db_path = self.queue_dir / "jobs.sqlite"
        self.lock_path = self.queue_dir / "worker.lock"
        check_own_table(self.db_path)  # new, or normvar's: never another application's database
        with self._conn() as conn:
            _set_wal(conn)
            for stmt in SCHEMA:
                conn.execute(stmt)
            have = {row["name"] for row in conn.execute("pragma table_info(jobs)")}
            for col, decl in ADDED_COLUMNS.items():
                if col not in have:
                    try:
                        conn.execute(f"alter table jobs add column {col} {decl}")
                    except sqlite3.OperationalError as err:  # another process added it meanwhile
                        if "duplicate column" not in str(err):
                            raise

    # -------------------------------------------------------------- plumbing
    @contextlib.contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        check_table_files(self.db_path)
        with database_errors(self.db_path):
            conn = _connect(self.db_path)
            try:
                yield conn
            finally:
                conn.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A short write transaction (BEGIN IMMEDIATE: the write lock from the start, so what it reads
        stays true until it commits, and no lock upgrade deadlocks)."""
        with self._conn() as conn:
            conn.execute("begin immediate")
            try:
                yield conn
            except BaseException:
                conn.execute("rollback")
                raise
            conn.execute("commit")

    def _job(self, row: sqlite3.Row, worker_running: bool | None = None) -> Job:
        interrupted = False
        if row["state"] == JobState.RUNNING:
            if worker_running is None:
                worker_running = self.worker_running()
            interrupted = not worker_running
        return Job(
            id=row["id"],
            name=row["name"],
            config=json.loads(row["config"]),
            state=JobState(row["state"]),
            message=row["message"],
            progress=json.loads(row["progress"]) if row["progress"] else None,
            run_path=row["run_path"],
            created=row["created"],
            started=row["started"],
            finished=row["finished"],
            heartbeat=row["heartbeat"],
            overwrite=bool(row["overwrite"]),
            cancel_requested=bool(row["cancel_requested"]),
            attempts=int(row["attempts"]),
            worker_pid=row["worker_pid"],
            interrupted=interrupted,
            publishing=bool(row["publishing"]),
        )

    def _add(self, name: str, config: str, overwrite: bool, vet: Callable[[list[Job]], str | None]) -> str:
        """Queue a new job (one insert): ``vet(the queued and running jobs of this name)`` runs inside the
        insert's transaction and raises to refuse it, or returns the id of an equal job to give back instead."""
        with self._tx() as conn:
            rows = conn.execute(
                "select * from jobs where name = ? and state in (?, ?) order by seq",
                (name, JobState.QUEUED.value, JobState.RUNNING.value),
            ).fetchall()
            same = vet([self._job(r) for r in rows])
            if same is not None:
                return same
            job_id = uuid.uuid4().hex[:12]
            conn.execute(
                "insert into jobs (id, name, config, overwrite, state, created) values (?, ?, ?, ?, ?, ?)",
                (job_id, name, config, int(bool(overwrite)), JobState.QUEUED.value, time.time()),
            )
        return job_id

    # -------------------------------------------------------------- files of a job
    def log_path(self, job_id: str) -> Path:
        """Where the worker writes the full traceback of a job's unexpected failure."""
        return self.dd.queue / "logs" / f"{re.sub(r'[^A-Za-z0-9_-]', '_', job_id)}.log"

    def checkpoint_path(self, job_id: str) -> Path:
        return self.dd.checkpoints / f"{job_id}.ckpt"

    def remove_checkpoint(self, job_id: str) -> None:
        """Remove the job's checkpoint — only what normvar wrote: ``<id>.ckpt`` when it is a normvar checkpoint
        (``is_own_checkpoint``: a regular file with one name, an archive with normvar's metadata), the temp
        files of its atomic rewrite (``.<id>.ckpt.tmp-<pid>``, regular files with one name) and its compute lock
        when no live process holds it (``run_lock.remove_if_stale``). Anything else under those names (a
        symbolic link, a hard link, a folder, another program's file) is left as it is."""
        path = self.checkpoint_path(job_id)
        if is_own_checkpoint(path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        for p in self.dd.checkpoints.glob(f".{glob_escape(path.name)}.tmp-*"):  # temp files of an atomic rewrite
            st = lstat_or_none(p)
            if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                with contextlib.suppress(OSError):
                    p.unlink()
        remove_if_stale(lock_path(path))  # the compute lock of the checkpoint, left by a killed worker

    # -------------------------------------------------------------- reading
    def list(self, limit: int | None = 50, *, states: tuple[str, ...] | None = None) -> list[Job]:
        """Jobs, newest first."""
        sql = "select * from jobs"
        params: list[Any] = []
        if states:
            sql += f" where state in ({','.join('?' * len(states))})"
            params += [str(s) for s in states]
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
                "select * from jobs where id = ? union select * from jobs where id like ? escape '\\' limit 3",
                (job_id, job_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"),
            ).fetchall()
        exact = [r for r in rows if r["id"] == job_id]
        if exact:
            return self._job(exact[0])
        if not rows:
            raise NormvarError(f"no job {job_id!r} in {self.dd.root}", fix="see `normvar jobs` for the ids")
        if len(rows) > 1:
            raise NormvarError(f"job id {job_id!r} is ambiguous", fix="give more characters of the id")
        return self._job(rows[0])

    def cancel_requested(self, job_id: str) -> bool:
        """Whether a cancel was asked for the job (True, too, for a job that is gone)."""
        with self._conn() as conn:
            row = conn.execute("select cancel_requested from jobs where id=?", (job_id,)).fetchone()
        return bool(row is None or row["cancel_requested"])

    def worker_running(self) -> bool:
        """Whether a worker holds this data directory's worker lock (exact, even after SIGKILL)."""
        try:
            fd = open_regular(self.lock_path, os.O_RDONLY, what="the worker lock")
        except (FileNotFoundError, NormvarError):  # none, or not a lock (a worker refuses it)
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

    # -------------------------------------------------------------- cancel (CLI, dashboard)
    def cancel(self, job_id: str) -> Job:
        """Cancel a job. A queued job never runs; a running job stops at its next batch or step of the finalize
        (the worker marks it cancelled, publishes nothing and removes its checkpoint), unless its run is being
        published (the returned job's ``publishing``: it ends done, ``job.LATE_CANCEL``). A finished job is
        returned unchanged."""
        job = self.get(job_id)
        now = time.time()
        with self._tx() as conn:
            state = conn.execute("select state from jobs where id = ?", (job.id,)).fetchone()["state"]
            if state == JobState.QUEUED:
                move(conn, job.id, "cancel_queued", cancel_requested=1, finished=now, message="cancelled before it ran")
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

    def begin_publish(self, job_id: str) -> bool:
        """The worker's point of no return for a running job's run file (``publish.publish``'s ``before_publish``):
        True when no cancel was asked and the job is marked ``publishing`` (a cancel from now on comes too late);
        False when a cancel came first (nothing is published). One guarded ``UPDATE``: a cancel and this never
        both win."""
        with self._tx() as conn:
            return (
                conn.execute(
                    "update jobs set publishing = 1 where id = ? and state = ? and cancel_requested = 0",
                    (job_id, JobState.RUNNING.value),
                ).rowcount
                == 1
            )

    # -------------------------------------------------------------- the worker's operations
    def record_worker(self, job_id: str | None) -> None:
        """This process is the data directory's worker, alive now, running ``job_id`` (None: idle)."""
        now = time.time()
        with self._conn() as conn:
            conn.execute(
                "insert into worker (one, pid, started, heartbeat, job_id) values (1, ?, ?, ?, ?) "
                "on conflict(one) do update set pid=excluded.pid, heartbeat=excluded.heartbeat, "
                "job_id=excluded.job_id, started=coalesce(case when worker.pid=excluded.pid "
                "then worker.started end, excluded.started)",
                (os.getpid(), now, now, job_id),
            )

    def forget_worker(self) -> None:
        """This process's worker row is removed (the worker stops)."""
        with self._conn() as conn:
            conn.execute("delete from worker where pid=?", (os.getpid(),))

    def claim_next(self) -> Job | None:
        """The next queued job (``NEXT_JOB_ORDER``) -> running in this process (``started`` kept from a
        first attempt, one more attempt), in one write transaction; None when nothing is queued. A queued
        job whose cancel was asked (a cancel that raced with a requeue) is cancelled on the way; a job
        whose stored config is not JSON is marked failed and the next one is taken."""
        while True:
            now = time.time()
            with self._tx() as conn:
                rows = conn.execute(
                    f"select id, cancel_requested from jobs where state = ? order by {NEXT_JOB_ORDER}",
                    (JobState.QUEUED.value,),
                ).fetchall()
                cancelled = [r["id"] for r in rows if r["cancel_requested"]]
                for job_id in cancelled:
                    move(conn, job_id, "cancel_queued", finished=now, message="cancelled")
                job_id = next((r["id"] for r in rows if not r["cancel_requested"]), None)
                if job_id is not None:
                    move(
                        conn,
                        job_id,
                        "claim",
                        started=("sql", f"coalesce(started, {float(now)!r})"),
                        heartbeat=now,
                        worker_pid=os.getpid(),
                        attempts=("sql", "attempts + 1"),
                        message=None,
                    )
                    row = conn.execute("select * from jobs where id=?", (job_id,)).fetchone()
            for other in cancelled:
                log.info("job %s: cancelled before it ran", other)
                self.remove_checkpoint(other)
            if job_id is None:
                return None
            try:
                return self._job(row, worker_running=True)
            except ValueError as err:
                self.finish(job_id, JobState.FAILED, f"invalid stored configuration: {err}")

    def heartbeat(self, job_id: str) -> None:
        """The running job's worker is alive now."""
        with self._conn() as conn:
            conn.execute("update jobs set heartbeat=? where id=?", (time.time(), job_id))

    def write_progress(self, job_id: str, progress: dict) -> None:
        """Store the running job's progress (a JSON-able dict, ``job_progress.progress_dict``); a beat too."""
        with self._conn() as conn:
            conn.execute(
                "update jobs set progress=?, heartbeat=? where id=?", (json.dumps(progress), time.time(), job_id)
            )

    def finish(self, job_id: str, state: JobState, message: str | None = None, run_path: str | None = None) -> None:
        """running -> done, failed or cancelled, with its message and what it wrote; the checkpoint is
        removed. A finish by the job's own worker is its last heartbeat too (a dead worker's is kept)."""
        now = time.time()
        with self._tx() as conn:
            move(
                conn,
                job_id,
                _FINISH[JobState(state)],
                message=message,
                run_path=run_path,
                finished=now,
                heartbeat=("sql", f"case when worker_pid = {os.getpid()} then {now!r} else heartbeat end"),
                worker_pid=None,
            )
        self.remove_checkpoint(job_id)

    def requeue(self, job_id: str, *, shutdown: str | None = None) -> None:
        """running -> queued; having started, it comes before every fresh job (``NEXT_JOB_ORDER``) and
        resumes from its checkpoint. ``shutdown``: the message of a job a worker's shutdown put back (that
        attempt does not count); None for a job that a dead worker left (the attempt counts)."""
        columns: dict[str, Any] = {"worker_pid": None, "publishing": 0}
        if shutdown is not None:
            columns.update(attempts=("sql", "max(attempts - 1, 0)"), message=shutdown)
        with self._tx() as conn:
            move(conn, job_id, "requeue", **columns)


__all__ = ["JobTable", "move", "database_errors", "NEXT_JOB_ORDER", "SCHEMA", "check_own_table", "is_own_checkpoint"]
