"""``normvar sweep --checkpoints DIR`` / ``normvar sweep --model ID --revisions step1000,step8000``: one
run per checkpoint of a training series, queued as worker jobs and grouped as one sweep (the run row's
``sweep`` and ``step``), with every option ``compute`` takes, the same for each checkpoint. ``--extend``
adds checkpoints to an existing sweep, skipping the steps it already has."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path


def register(sub) -> None:
    from normvar_core.config import RunConfig
    from normvar_core.service.args import add_data_dir

    p = sub.add_parser("sweep", help="queue one run per training checkpoint (seed 004's training dynamics)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoints", default=None, help="a trainer's folder of checkpoint-<step>/ folders")
    src.add_argument("--revisions", default=None, help="hub revisions of --model, e.g. step1000,step8000")
    p.add_argument("--extend", action="store_true", help="add to an existing sweep: skip steps it already has")
    RunConfig.add_arguments(p)  # --sweep names the sweep; --model is the hub id for --revisions
    add_data_dir(p)
    p.set_defaults(func=cmd_sweep)


def sweep_configs(args: argparse.Namespace):
    """(sweep name, [RunConfig per checkpoint], problems) — checked before anything is queued."""
    from normvar_core.config import RunConfig

    return plan_sweep(RunConfig.from_args(args), checkpoints=args.checkpoints, revisions=args.revisions)


def plan_sweep(base, *, checkpoints: str | None = None, revisions: str | None = None):
    """One RunConfig per checkpoint of a trainer's folder (``checkpoints``) or per hub revision of
    ``base.model`` (``revisions``, comma-separated), each with ``base``'s options, the sweep's name and
    the step: (sweep name, configs, problems). Shared by ``normvar sweep`` and the New-run page."""
    from normvar_core.errors import NormvarError
    from normvar_core.pipeline.models.training_steps import discover_checkpoints, parse_revisions

    if base.name is not None or base.step is not None:
        raise NormvarError("--name and --step are set per checkpoint by the sweep", fix="use --sweep NAME instead")
    if bool(checkpoints) == bool(revisions):
        raise NormvarError("a sweep needs a checkpoints folder or hub revisions (one of them)",
                           fix="give --checkpoints DIR, or --model ID with --revisions step1000,step8000")
    problems: list[str] = []
    if checkpoints:
        cps, problems = discover_checkpoints(checkpoints)
        default = Path(checkpoints).expanduser().resolve().name
    else:
        cps = parse_revisions(base.model, revisions)
        default = base.model.rstrip("/").split("/")[-1]
    sweep = base.sweep or re.sub(r"[^A-Za-z0-9._-]+", "-", default).strip("-._")[:100] or "sweep"
    cfgs = [base.replace(model=str(Path(c.path).resolve()) if checkpoints else c.path,
                         revision=c.revision or base.revision, sweep=sweep, step=c.step,
                         name=f"{sweep}__step{c.step}") for c in cps]
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


def cmd_sweep(args: argparse.Namespace) -> int:
    sweep, cfgs, problems = sweep_configs(args)
    queued = queue_sweep(args.data_dir, sweep, cfgs, extend=args.extend)
    for p in problems:
        print(f"normvar: skipped checkpoint {p}", file=sys.stderr)
    for job, cfg in queued:
        print(f"{job}  {cfg.name}  step {cfg.step}")
    if not queued:
        print(f"sweep {sweep!r}: nothing new to add")
    return 0
