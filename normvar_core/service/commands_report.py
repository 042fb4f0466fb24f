"""``normvar report RUN [RUN ...] --format pptx|pdf|html [--out FILE]``: a slide deck of the study's
figures for one run, or of several runs side by side on relative depth."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub) -> None:
    from normvar_core.service.args import add_data_dir

    p = sub.add_parser("report", help="a slide deck (pptx), PDF or self-contained HTML of runs")
    p.add_argument("runs", nargs="+", help="run names or .duckdb paths (several: a comparison)")
    p.add_argument("--format", default="pptx", choices=("pptx", "pdf", "html"))
    p.add_argument("--out", default=None, help="output file (default: <run>.<format> in the current folder)")
    add_data_dir(p)
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from normvar_core.destination import resolve_destination
    from normvar_core.errors import NormvarError
    from normvar_core.report.slides import build_slides
    from normvar_core.report.writers import write_report
    from normvar_core.runs.reader import open_run, resolve_run

    out = Path(args.out or f"{'_vs_'.join(Path(r).stem for r in args.runs)[:120]}.{args.format}")
    target = resolve_destination(out, what="--out")  # a regular file, a link's target, or exit 2
    runs = [open_run(resolve_run(r, args.data_dir)) for r in args.runs]  # all checked before any work
    try:
        write_report(build_slides(runs), target, args.format)
    except OSError as exc:
        raise NormvarError(f"cannot write {out}: {exc.strerror or exc}", fix="choose a writable --out") from None
    print(out)
    return 0
