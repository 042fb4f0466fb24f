"""Training sweeps: one run per checkpoint of a training series (a trainer's checkpoint-<step>/ folders,
or a hub model's revisions), each with the same corpus and options, grouped by the run row's ``sweep``
and ``step`` (Razzhigaev et al.'s training dynamics). ``plan_sweep`` builds the configs, ``queue_sweep`` submits
those the sweep does not have yet as worker jobs. Used by ``normvar sweep`` and the New-run page."""

from __future__ import annotations

import re
from pathlib import Path


def plan_sweep(base, *, checkpoints: str | None = None, revisions: str | None = None):
    """One RunConfig per checkpoint of a trainer's folder (``checkpoints``) or per hub revision of
    ``base.model`` (``revisions``, comma-separated), each with ``base``'s options, the sweep's name and
    the step: (sweep name, configs, problems)."""
    from normvar_core.errors import NormvarError
    from normvar_core.pipeline.models.training_steps import discover_checkpoints, parse_revisions

    if base.name is not None or base.step is not None:
        raise NormvarError("--name and --step are set per checkpoint by the sweep", fix="use --sweep NAME instead")
    if bool(checkpoints) == bool(revisions):
        raise NormvarError(
            "a sweep needs a checkpoints folder or hub revisions (one of them)",
            fix="give --checkpoints DIR, or --model ID with --revisions step1000,step8000",
        )
    problems: list[str] = []
    if checkpoints:
        cps, problems = discover_checkpoints(checkpoints)
        default = Path(checkpoints).expanduser().resolve().name
    else:
        cps = parse_revisions(base.model, revisions)  # type: ignore[arg-type]  # a sweep's base names its model
        default = base.model.rstrip("/").split("/")[-1]
    sweep = base.sweep or re.sub(r"[^A-Za-z0-9._-]+", "-", default).strip("-._")[:100] or "sweep"
    cfgs = [
        base.replace(
            model=str(Path(c.path).resolve()) if checkpoints else c.path,
            revision=c.revision or base.revision,
            sweep=sweep,
            step=c.step,
            name=f"{sweep}__step{c.step}",
        )
        for c in cps
    ]
    return sweep, cfgs, problems


def queue_sweep(data_dir, sweep: str, cfgs: list, *, extend: bool = False) -> list[tuple[str, object]]:
    """Submit the configs a sweep does not have yet: [(job id, config)]. Without ``extend`` a sweep
    that already has some of these checkpoints is refused (nothing is queued)."""
    from normvar_core.datadir import DataDir
    from normvar_core.errors import NormvarError
    from normvar_core.service.jobs import JobStore

    dd = DataDir.at(data_dir)
    store = JobStore(dd)
    have = {j.name for j in store.list(limit=None)} | {p.stem for p in dd.published_runs()}
    todo = [c for c in cfgs if c.name not in have]
    if len(todo) < len(cfgs) and not extend:
        taken = ", ".join(c.name for c in cfgs if c.name in have)
        raise NormvarError(f"sweep {sweep!r} already has {taken}", fix="pass --extend to add only new checkpoints")
    return [(store.submit(cfg), cfg) for cfg in todo]


__all__ = ["plan_sweep", "queue_sweep"]
