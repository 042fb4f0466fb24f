"""One job: its states (``JobState``, one enum) and their transitions (``TRANSITIONS``, as data), what its
row of the job table reads as (``Job``, a snapshot), and the data directory's worker (``WorkerInfo``).

    queued --claim--> running --finish--> done | failed | cancelled
    queued --cancel--> cancelled          running --requeue--> queued   (SIGTERM, or a dead worker)

A running job asked to cancel stops at its next batch or step of the finalize and ends ``cancelled``, unless its
run file was already being published (``publishing``): then it ends ``done`` with ``LATE_CANCEL`` as its message.

``job_table.move(conn, job_id, transition, **columns)`` performs a transition as ONE ``UPDATE`` guarded
by the states it starts from, so two processes racing on a job never both succeed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from normvar_core.config import RunConfig
from normvar_core.service.tasks import TASKS


class JobState(StrEnum):  # str(state), f"{state}" and sqlite parameters read as the plain value
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def active(self) -> bool:
        return self in ACTIVE

    @property
    def final(self) -> bool:
        return self in FINAL


LATE_CANCEL = "cancel came too late"
"""The message of a job that was asked to cancel once its run file was being published (``JobTable.begin_publish``):
it ends ``done``, shown as "done (cancel came too late)" (``Job.label``)."""

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
    publishing: bool = False
    """True once its run file is being published: a cancel then comes too late (``JobTable.begin_publish``)."""

    @property
    def label(self) -> str:
        """The state as ``normvar jobs`` and ``cancel`` say it: the state (``JobState``), or for a running job
        "interrupted" (its worker is gone), "cancelling", "publishing (cancel came too late)"; a job done after a
        cancel that came too late: "done (cancel came too late)"."""
        if self.state == JobState.RUNNING:
            if self.interrupted:
                return "interrupted"
            if self.cancel_requested:
                return f"publishing ({LATE_CANCEL})" if self.publishing else "cancelling"
        if self.state == JobState.DONE and self.message == LATE_CANCEL:
            return f"{JobState.DONE} ({LATE_CANCEL})"
        return str(self.state)

    @property
    def cfg(self) -> RunConfig:
        return RunConfig.from_dict(self.config)

    @property
    def task(self) -> str:
        """ "run", or the worker task of a job that is not a run (a key of ``tasks.TASKS``)."""
        return next((t for t in TASKS if isinstance(self.config, dict) and t in self.config), "run")

    @property
    def percent(self) -> float | None:
        if self.state == JobState.DONE:
            return 100.0
        p = self.progress or {}
        if p.get("percent") is not None and p.get("phase"):  # the whole run's, by phase (local.PHASE_SPAN)
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
    """The worker row: its process id, when it started, its last heartbeat, the job it runs (None: idle)."""

    pid: int | None
    started: float | None
    heartbeat: float | None
    job_id: str | None


__all__ = ["JobState", "ACTIVE", "FINAL", "LATE_CANCEL", "TRANSITIONS", "Job", "WorkerInfo"]
