"""``normvar plan``: a run's memory before any weight loads — the same options as ``compute``.

The model is built on the meta device from its config alone and the corpus tokenized as ``compute``
would (``pipeline.memory.plan_run``); printed per accumulator and in total, with the weights at the
chosen dtype, against ``--memory-gb`` (default: what the device reports free), what is dropped and
the fixes. ``--json`` prints one object (params, weights_bytes, hidden_states, dim, types,
accumulators, total_bytes, memory_bytes, fits, dropped, suggestions, ...).
"""
from __future__ import annotations

import argparse
import json

from normvar_core.config import RunConfig


def register(sub) -> None:
    from normvar_core.service.args import add_data_dir

    p = sub.add_parser("plan", help="the memory a run needs, before any weight loads (same options as compute)",
                       description="Per accumulator and in total, the bytes a run will hold, from the model's config "
                                   "(no weights read) and the tokenized corpus; what fits in --memory-gb and the "
                                   "fixes for what does not.")
    RunConfig.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_data_dir(p)
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    from normvar_core.pipeline.memory import plan_run

    mp = plan_run(RunConfig.from_args(args), args.data_dir)
    if args.json:
        print(json.dumps(mp.to_dict(), sort_keys=True))
    else:
        print("\n".join(mp.lines()))
    return 0
