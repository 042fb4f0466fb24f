"""Job states and their transitions, in one place.

    queued --claim--> running --finish--> done | failed | cancelled
    queued --cancel--> cancelled          running --requeue--> queued   (SIGTERM, or a dead worker)

``job_table.move(conn, job_id, transition, **columns)`` performs a transition as ONE ``UPDATE`` guarded
by the states it starts from (``TRANSITIONS``), so two processes racing on a job never both succeed.
"""
from __future__ import annotations

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

__all__ = ["JobState", "ACTIVE", "FINAL", "TRANSITIONS"]
