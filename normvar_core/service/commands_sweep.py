"""``normvar sweep --checkpoints DIR`` / ``normvar sweep --model ID --revisions step1000,step8000``: one
run per checkpoint of a training series, queued as worker jobs and grouped as one sweep (the run row's
``sweep`` and ``step``), with every option ``compute`` takes, the same for each checkpoint. ``--extend``
adds checkpoints to an existing sweep, skipping the steps it already has."""

from __future__ import annotations

import argparse
import sys


def register(sub) -> None:
    from normvar_core.config import RunConfig
    from normvar_core.service.args import add_data_dir

    p = sub.add_parser(
        "sweep", help="queue one run per training checkpoint (the Razzhigaev et al. 2024 protocol's training dynamics)"
    )
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
    from normvar_core.service.sweeps import plan_sweep

    return plan_sweep(RunConfig.from_args(args), checkpoints=args.checkpoints, revisions=args.revisions)


def cmd_sweep(args: argparse.Namespace) -> int:
    from normvar_core.service.sweeps import queue_sweep

    sweep, cfgs, problems = sweep_configs(args)
    queued = queue_sweep(args.data_dir, sweep, cfgs, extend=args.extend)
    for p in problems:
        print(f"normvar: skipped checkpoint {p}", file=sys.stderr)
    for job, cfg in queued:
        print(f"{job}  {cfg.name}  step {cfg.step}")  # type: ignore[attr-defined]  # RunConfig objects
    if not queued:
        print(f"sweep {sweep!r}: nothing new to add")
    return 0
