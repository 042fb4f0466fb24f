"""``normvar plan``: a run's memory before any weight loads — the same options as ``compute``.

The model is built on the meta device from its config alone and the corpus tokenized as ``compute``
would (``pipeline.execute.dry_run.plan_run``); printed per measure and in total, with the weights at the
chosen dtype, against ``--memory-gb`` (default: what the device reports free), what is dropped and
the fixes. ``--json`` prints one object (params, weights_bytes, hidden_states, dim, types,
measures, total_bytes, memory_bytes, fits, dropped, suggestions, ...).
"""

from __future__ import annotations

import argparse
import json

from normvar_core.config import RunConfig


def register(sub) -> None:
    from normvar_core.service.args import add_data_dir

    p = sub.add_parser(
        "plan",
        help="the memory a run needs, before any weight loads (same options as compute)",
        description="Per measure and in total, the bytes a run will hold, from the model's config "
        "(no weights read) and the tokenized corpus; what fits in --memory-gb and the "
        "fixes for what does not.",
    )
    RunConfig.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--devices",
        default=None,
        help="plan the run device-mapped over these devices, sizes in GiB (2^30 bytes, as --memory-gb): 8x80, "
        "2x24,cpu=256; each device's weights, state and pass (--json: devices)",
    )
    add_data_dir(p)
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    import gc

    # a plan is a short process that imports torch and transformers and builds large lists and arrays without
    # cycles: the cyclic collector's passes over them are a tenth of its CPU time and free next to nothing
    gc.disable()
    try:
        from normvar_core.pipeline.execute.dry_run import plan_run

        mp = plan_run(RunConfig.from_args(args), args.data_dir, devices=args.devices)
    finally:
        gc.enable()
    if args.json:
        print(json.dumps(mp.to_dict(), sort_keys=True))
    else:
        print("\n".join(mp.lines()))
    return 0


def plan_in_subprocess(cfg: RunConfig, data_dir=None, timeout: float = 180.0) -> dict:
    """The plan's JSON computed in a child process (the dashboard never imports torch):
    ``{"error": line}`` when the options are bad or the child fails or times out."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    request = json.dumps({"config": cfg.to_dict(), "data_dir": None if data_dir is None else str(data_dir)})
    try:
        out = subprocess.run(
            [sys.executable, "-m", "normvar_core.service.commands_plan"],
            input=request,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"the memory plan took longer than {timeout:.0f} s (a large corpus is tokenized first)"}
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (out.stderr.strip().splitlines() or ["the memory plan failed"])[-1][:300]}


def _child() -> None:
    """Read {"config", "data_dir"} on stdin, print the plan's JSON (or {"error": line})."""
    import sys

    from normvar_core.errors import NormvarError
    from normvar_core.pipeline.execute.dry_run import plan_run
    from normvar_core.pipeline.memory.plan import gb

    req = json.loads(sys.stdin.read())
    try:
        mp = plan_run(RunConfig.from_dict(req["config"]), req.get("data_dir"))
        print(json.dumps({**mp.to_dict(), "summary": mp.summary(), "gb_total": gb(mp.total_bytes)}))
    except NormvarError as err:
        print(json.dumps({"error": str(err)}))


if __name__ == "__main__":
    _child()
