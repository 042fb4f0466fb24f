"""``normvar export RUN --format parquet|csv|projector --out DIR``: a run's tables for other tools
(pandas, polars, DuckDB, Embedding Atlas, TensorBoard Projector); see ``runs/export.py`` for the files."""

from __future__ import annotations

import argparse

# = runs.export.FORMATS (checked by tests/test_export.py), spelled out so that building the parser
# does not import duckdb/pyarrow for every other command
FORMATS = ("parquet", "csv", "projector")


def register(sub) -> None:
    from normvar_core.numbers import Number
    from normvar_core.service.args import add_data_dir

    p = sub.add_parser(
        "export",
        help="write a run's tables as Parquet or CSV (+ means as .npy), or a Projector TSV pair",
        description="write a run's tables as Parquet or CSV (+ the per-type means as .npy), or "
        "TensorBoard Projector's vectors.tsv/metadata.tsv for one layer",
    )
    p.add_argument("run", help="run name (in DATA/runs) or path to a .duckdb file")
    p.add_argument("--format", choices=FORMATS, default="parquet")
    p.add_argument("--out", required=True, help="folder to create (new or empty; see --overwrite)")
    p.add_argument(
        "--layer",
        type=Number("--layer", kind=int),
        default=None,
        help="hidden-state index for --format projector (default: the last)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --out folder")
    add_data_dir(p)
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from normvar_core.runs.export import export_run
    from normvar_core.runs.reader import resolve_run

    out = export_run(
        resolve_run(args.run, args.data_dir), args.out, args.format, layer=args.layer, overwrite=args.overwrite
    )
    print(f"normvar: exported {args.run} as {args.format} to {out}")
    return 0
