"""Job states and their transitions, in one place.

    queued --claim--> running --finish--> done | failed | cancelled
    queued --cancel--> cancelled          running --requeue--> queued   (SIGTERM, or a dead worker)

``move(conn, job_id, transition, **columns)`` performs a transition as ONE ``UPDATE`` guarded by
the state it starts from (``... WHERE id = ? AND state IN (...)``), so two processes racing on
a job never both succeed; it returns the number of rows changed (0: the job was not in that state).
"""
from __future__ import annotations

import sqlite3
from enum import Enum


class JobState(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def __str__(self) -> str:  # f"{state}" and sqlite parameters read as the plain value
        return self.value

    @property
    def active(self) -> bool:
        return self in ACTIVE

    @property
    def final(self) -> bool:
        return self in FINAL


ACTIVE = (JobState.QUEUED, JobState.RUNNING)
FINAL = (JobState.DONE, JobState.FAILED, JobState.CANCELLED)

# name -> (states it may start from, state it ends in)
TRANSITIONS: dict[str, tuple[tuple[JobState, ...], JobState]] = {
    "claim": ((JobState.QUEUED,), JobState.RUNNING),
    "cancel_queued": ((JobState.QUEUED,), JobState.CANCELLED),
    "cancel_running": ((JobState.RUNNING,), JobState.CANCELLED),
    "requeue": ((JobState.RUNNING,), JobState.QUEUED),
    "succeed": ((JobState.RUNNING,), JobState.DONE),
    "fail": ((JobState.RUNNING,), JobState.FAILED),
}
_ALLOWED_COLUMNS = {"started", "finished", "heartbeat", "worker_pid", "attempts", "message", "run_path",
                    "cancel_requested"}


def move(conn: sqlite3.Connection, job_id: str, transition: str, *, where: str = "", **columns) -> int:
    """Apply ``transition`` to ``job_id`` with the extra ``columns`` set (values, or SQL expressions
    given as ``("sql", "expr")`` tuples); ``where`` adds a guard. Returns the rows changed."""
    frm, to = TRANSITIONS[transition]
    sets, args = ["state = ?"], [to.value]
    for col, val in columns.items():
        if col not in _ALLOWED_COLUMNS:
            raise ValueError(f"unknown job column {col!r}")
        if isinstance(val, tuple) and val and val[0] == "sql":
            sets.append(f"{col} = {val[1]}")
        else:
            sets.append(f"{col} = ?")
            args.append(val)
    marks = ", ".join("?" for _ in frm)
    sql = f"UPDATE jobs SET {', '.join(sets)} WHERE id = ? AND state IN ({marks})" + (f" AND {where}" if where else "")
    return conn.execute(sql, (*args, job_id, *(s.value for s in frm))).rowcount


__all__ = ["JobState", "ACTIVE", "FINAL", "TRANSITIONS", "move"]
