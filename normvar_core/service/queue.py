"""The queue itself: huey with its SQLite storage (``queue/huey.sqlite``), task messages serialized
as JSON (never pickle), carrying nothing but the job id; huey's result store is off."""
from __future__ import annotations

import json
from pathlib import Path

from huey import SqliteHuey
from huey.registry import Message
from huey.serializer import Serializer

HUEY_NAME = "normvar"
TASK_NAME = "run_job"
LEGACY_MODULES = ("normvar_core.jobs", "normvar_core.service.jobs")  # where run_job lived before


def make_huey(queue_dir: Path, task_fn=None):
    """The huey instance of one data directory, with the ``run_job`` task registered.

    ``task_fn`` is what the worker executes; submitters register a placeholder under the same
    name (a task message holds only the task's name and the job id)."""
    huey = SqliteHuey(
        name=HUEY_NAME,
        filename=str(queue_dir / "huey.sqlite"),
        results=False,
        serializer=JsonSerializer(),
        journal_mode="wal",
        timeout=30,
    )

    def run_job(job_id: str) -> None:  # noqa: D401 - huey task
        if task_fn is None:
            raise RuntimeError("jobs are executed by `normvar worker`")
        task_fn(job_id)

    wrapper = huey.task(name=TASK_NAME)(run_job)
    for module in LEGACY_MODULES:  # tasks queued by older normvar versions carry their module in the name
        def legacy(job_id: str) -> None:
            run_job(job_id)

        legacy.__module__ = module
        huey.task(name=TASK_NAME)(legacy)
    return huey, wrapper


class JsonSerializer(Serializer):
    """Serializes huey task messages as JSON (huey's default is pickle, which we never use).

    Only plain tasks are supported: no eta/expiry/pipelines, and the arguments must be JSON
    (normvar passes just the job id)."""

    def _serialize(self, data):
        if not isinstance(data, Message):
            return json.dumps({"value": data}).encode()
        if any(getattr(data, f) is not None for f in
               ("eta", "on_complete", "on_error", "expires", "expires_resolved", "chord_config")):
            raise TypeError("normvar's queue carries only plain tasks (job ids)")
        fields = data._asdict()
        fields["args"] = list(fields["args"] or ())
        return json.dumps({"message": fields}).encode()

    def _deserialize(self, data):
        obj = json.loads(bytes(data).decode())
        if "message" in obj:
            fields = obj["message"]
            fields["args"] = tuple(fields.get("args") or ())
            return Message(**fields)
        return obj.get("value")



__all__ = ["make_huey", "JsonSerializer", "HUEY_NAME", "TASK_NAME"]
