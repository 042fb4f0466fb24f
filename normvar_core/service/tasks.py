"""The worker's tasks besides runs (``TASKS``: report, null, sentence). A job that is not a run holds
``{task: spec}`` as its config (``JobStore.submit_report/submit_null/submit_sentence``); the worker calls
``TASKS[task](data_dir, job_id, spec, progress=...)`` and records the path it returns. ``TASKS`` is the one
list of task names: ``Job.task`` reads it too. Each task imports what it needs when it runs, so reading the
job table stays light."""

from __future__ import annotations

from pathlib import Path

from normvar_core.datadir import DataDir


def write_report(dd: DataDir, job_id: str, spec: dict, progress=None) -> Path:
    """Task "report": the slides of the runs -> ``reports/<job id>.<format>`` (temp file + rename);
    phases read (runs), slides, write."""
    from normvar_core.report.slides import build_slides
    from normvar_core.report.writers import write_report as write_slides
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
    return write_slides(slides, dd.reports / f"{job_id}.{fmt}", fmt)


def write_null(dd: DataDir, job_id: str, spec: dict, progress=None) -> Path:
    """Task "null": the Gaussian null of a run, published as an ordinary run (atomically)."""
    from normvar_core.pipeline.execute.null_run import write_null_run
    from normvar_core.pipeline.measures.geometry import host_search
    from normvar_core.runs.null import null_name
    from normvar_core.runs.reader import open_run

    run = open_run(spec["run"])
    name = null_name(run, spec["kind"], int(spec["seed"]))
    return write_null_run(
        run,
        spec["kind"],
        dd.run_path(name),
        seed=int(spec["seed"]),
        overwrite=True,
        search=host_search,
        progress=progress,
    )


def write_sentence(dd: DataDir, job_id: str, spec: dict, progress=None) -> Path:
    """Task "sentence": a typed sentence against a run's statistics (``own_sentence``) ->
    ``reports/<job id>.sentence.json``."""
    from normvar_core.service.own_sentence import write_sentence as write_json

    return write_json(spec["run"], spec["text"], dd.reports / f"{job_id}.sentence.json", dd.root, progress=progress)


TASKS = {"report": write_report, "null": write_null, "sentence": write_sentence}
"""Worker tasks besides runs, by the key of their job's config ``{task: spec}``."""

__all__ = ["TASKS", "write_report", "write_null", "write_sentence"]
