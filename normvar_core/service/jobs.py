"""The persistent job queue of a data directory, and what may be queued in it (``JobStore``).

Everything lives under one data directory (``DataDir``); two data directories never share state:

``queue/jobs.sqlite``
    The queue and the record of every job, in one table (``job_table.JobTable``: its columns, the
    order the worker takes jobs in, and every transition of a job's state). There is no second store
    to keep in step with it: what the table says is queued is what the worker runs next.
``queue/worker.lock``
    ``flock``-ed by the one worker of this data directory for its whole life; the kernel drops
    the lock when the worker dies, even on SIGKILL. A second worker is refused.
``checkpoints/<job id>.ckpt``
    The checkpoint that ``compute_run`` rewrites atomically while a job runs.

A job left ``running`` by a worker that was killed is put back at the front of the queue when a
worker starts again, and resumes from its checkpoint.

Public API (used by the CLI and the dashboard)::

    store = JobStore(data_dir)
    job_id = store.submit(cfg, overwrite=False)      # -> str
    job_id = store.submit_report(runs, "pptx")       # a slide deck / PDF / HTML built by the worker
    job_id = store.submit_null(run, "isotropic")     # a Gaussian null run drawn by the worker
    job_id = store.submit_sentence(run, text)        # "your own sentence" against a run
    store.list(limit=50) -> list[Job]; store.get(job_id) -> Job; store.cancel(job_id) -> Job
    store.worker() -> WorkerInfo | None              # is a worker running on this data dir?
    worker.Worker(data_dir).run(once=False) -> int    # the worker loop (normvar worker), service/worker.py
    store_corpus(data_dir, data, ext) -> Path        # uploaded corpora: corpora/<sha256><ext>
    progress_text(job.progress, job.task) -> str     # one line of a running job's progress
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from normvar_core.config import RunConfig, default_run_name
from normvar_core.destination import check_destination, not_a_run_file
from normvar_core.errors import NormvarError
from normvar_core.run_lock import check_free
from normvar_core.service.corpus_store import (
    CORPUS_EXTENSIONS,
    DEFAULT_MAX_UPLOAD_MB,
    corpus_extension,
    max_upload_bytes,
    store_corpus,
)
from normvar_core.service.job import Job, WorkerInfo
from normvar_core.service.job_progress import fmt_eta, progress_dict, progress_text
from normvar_core.service.job_table import JobTable, database_errors


def _absolute_paths(cfg: RunConfig) -> RunConfig:
    """The worker may run in another directory: make local corpus/model paths absolute."""
    changes: dict[str, Any] = {}
    if cfg.dataset:
        from normvar_core.pipeline.corpus.dataset import absolute_dataset

        changes["dataset"] = absolute_dataset(cfg.dataset)
    if cfg.corpus and not Path(cfg.corpus).expanduser().is_absolute():
        changes["corpus"] = str(Path(cfg.corpus).expanduser().resolve())
    m = cfg.model
    looks_local = m.startswith((".", "~", "/")) or os.sep in m and Path(m).expanduser().exists()
    if looks_local and Path(m).expanduser().exists() and not Path(m).expanduser().is_absolute():
        changes["model"] = str(Path(m).expanduser().resolve())
    return cfg.replace(**changes) if changes else cfg


def _same_run(job: Job, cfg: RunConfig) -> bool:
    try:
        return RunConfig.from_dict(job.config).to_json() == cfg.to_json()
    except (NormvarError, ValueError):
        return False


class JobStore(JobTable):
    """The job table of one data directory (``JobTable``) and the submissions it accepts: runs and the
    worker's tasks (``tasks.TASKS``), each checked before anything is queued."""

    def submit(self, cfg: RunConfig | dict, *, overwrite: bool = False) -> str:
        """Queue a run; returns the job id. Validates the configuration and refuses a run name
        that is already published or queued/running (unless ``overwrite``); with ``overwrite``, refuses
        only a second job with the very same options."""
        if isinstance(cfg, dict):
            cfg = RunConfig.from_dict(cfg)
        elif not isinstance(cfg, RunConfig):
            raise NormvarError(f"not a run configuration: {type(cfg).__name__}", fix="pass a RunConfig")
        cfg = RunConfig.from_dict(cfg.to_dict())  # validates
        cfg = _absolute_paths(cfg)
        from normvar_core.pipeline.execute.preflight import check_inputs, check_model

        check_inputs(cfg, self.dd.root)  # the checks compute and plan make: refused here, not by the worker
        check_model(cfg, self.dd.root)  # and those compute makes once it has the model's config
        name = cfg.name or default_run_name(cfg)
        cfg = cfg.replace(name=name)
        path = self.dd.run_path(name)
        check_destination(path, overwrite)  # the same pre-load check as `normvar run`
        check_free(path, unless_job=True)  # a `normvar compute` of this name running now: refused, named

        def vet(active: list[Job]) -> None:
            if overwrite:  # other options may replace a queued run; the very same ones would only repeat it
                for other in (o for o in active if _same_run(o, cfg)):
                    raise NormvarError(
                        f"run {name!r} is already {other.state} as job {other.id} with the same "
                        "options; --overwrite would only queue a duplicate",
                        fix=f"wait for it (normvar jobs) or cancel it first (normvar cancel {other.id})",
                    )
            elif os.path.lexists(path):
                raise not_a_run_file(path) or NormvarError(
                    f"a run named {name!r} already exists ({path})",
                    fix="choose another --name, or pass --overwrite to replace it",
                )
            elif active:
                raise NormvarError(
                    f"a run named {name!r} is already {active[0].state} as job {active[0].id}",
                    fix="choose another --name, cancel that job, or pass --overwrite",
                )

        return self._add(name, cfg.to_json(), overwrite, vet)

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
        """Queue the Gaussian null of a published run (``pipeline.execute.null_run.write_null_run``; with the run's
        layer geometry it takes up to a minute or two at bert-base scale); publishes ``null_name``."""
        from normvar_core.runs.null import check_kind, null_name
        from normvar_core.runs.reader import open_run, resolve_run

        check_kind(kind)
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
        """Queue a worker task other than a run (``tasks.TASKS``); the same task already queued or running
        is not queued twice: its job id is returned."""
        config = {task: json.loads(json.dumps(spec))}  # as it reads back from the table
        return self._add(
            name, json.dumps(config), False, lambda active: next((j.id for j in active if j.config == config), None)
        )


__all__ = [
    "JobStore",
    "Job",
    "WorkerInfo",
    "database_errors",
    "progress_text",
    "progress_dict",
    "fmt_eta",
    "store_corpus",
    "max_upload_bytes",
    "corpus_extension",
    "CORPUS_EXTENSIONS",
    "DEFAULT_MAX_UPLOAD_MB",
]
