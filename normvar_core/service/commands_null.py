"""``normvar null RUN --kind isotropic|offset|matched [--seed S] [--name NAME]``: publish the Gaussian
null of a run (the Gaussian-geometry comment) next to it."""

from __future__ import annotations

import argparse

from normvar_core.constants import NULL_KINDS
from normvar_core.numbers import MAX_SEED, Number


def register(sub) -> None:
    from normvar_core.service.args import add_data_dir

    p = sub.add_parser("null", help="publish a Gaussian null run of the same shape as RUN (high-dimensional baseline)")
    p.add_argument("run", help="run name or .duckdb path")
    p.add_argument(
        "--kind",
        default="isotropic",
        choices=NULL_KINDS,
        help="isotropic: N(0, Q/d I); offset: N(c, V/d I), |c|^2 = M; matched: N(mu_t, V_t/d I)",
    )
    p.add_argument("--seed", type=Number("--seed", kind=int, most=MAX_SEED), default=0)
    p.add_argument("--name", default=None, help="default <run>__null-<kind>-s<seed>")
    p.add_argument("--overwrite", action="store_true")
    add_data_dir(p)
    p.set_defaults(func=cmd_null)


def cmd_null(args: argparse.Namespace) -> int:
    from normvar_core.config import RunConfig
    from normvar_core.datadir import DataDir
    from normvar_core.pipeline.execute.null_run import write_null_run
    from normvar_core.runs.null import null_name
    from normvar_core.runs.reader import open_run, resolve_run

    run = open_run(resolve_run(args.run, args.data_dir))
    name = args.name or null_name(run, args.kind, args.seed)
    RunConfig(name=name).validate()  # the same rule for run names everywhere
    from normvar_core.pipeline.measures.geometry import host_search  # torch's threaded top-k for TwoNN

    path = write_null_run(
        run,
        args.kind,
        DataDir.at(args.data_dir).run_path(name),
        seed=args.seed,
        overwrite=args.overwrite,
        search=host_search,
    )
    print(path)
    return 0
