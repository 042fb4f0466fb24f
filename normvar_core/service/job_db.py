"""The SQLite file of the job table (``queue/jobs.sqlite``): its schema, the connection settings (WAL, a
30 s busy timeout, autocommit with explicit short transactions) and its errors read as one
``NormvarError`` naming the fix (``database_errors``, used for huey's queue file too). Only
``job_table.JobTable`` opens the file."""
from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Iterator

from normvar_core.errors import NormvarError

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
        attempts integer not null default 0)""",
    "create index if not exists jobs_state on jobs (state)",
    "create index if not exists jobs_name on jobs (name)",
    """create table if not exists worker (
        one integer primary key check (one = 1),
        pid integer, started real, heartbeat real, job_id text)""",
)


def _damaged(path: Path, text: str) -> NormvarError:
    return NormvarError(f"the job database {path} is damaged ({text})",
                        fix=f"move it aside (mv {path} {path}.damaged) and start again; published runs "
                            "are not affected, the jobs queued in it are lost")


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
        raise _damaged(path, text) from None
    except sqlite3.DatabaseError as err:
        raise _damaged(path, str(err)) from None


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("pragma busy_timeout = 30000")
    conn.execute("pragma synchronous = normal")
    return conn


def set_wal(conn: sqlite3.Connection) -> None:
    deadline = time.monotonic() + 30.0
    while True:  # switching a fresh file to WAL needs a write lock; retry under concurrency
        try:
            conn.execute("pragma journal_mode = wal")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


__all__ = ["SCHEMA", "connect", "database_errors", "set_wal"]
