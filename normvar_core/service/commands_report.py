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
    from normvar_core.errors import NormvarError
    from normvar_core.report.slides import build_slides
    from normvar_core.report.writers import write_report
    from normvar_core.runs.reader import open_run, resolve_run

    out = Path(args.out or f"{'_vs_'.join(Path(r).stem for r in args.runs)[:120]}.{args.format}")
    if out.is_dir():
        raise NormvarError(f"--out {out} is a folder", fix="give a file name, e.g. --out talk.pptx")
    if not out.parent.exists():
        raise NormvarError(f"the folder of --out does not exist: {out.parent}", fix="create it or choose another --out")
    runs = [open_run(resolve_run(r, args.data_dir)) for r in args.runs]  # all checked before any work
    try:
        path = write_report(build_slides(runs), out, args.format)
    except OSError as exc:
        raise NormvarError(f"cannot write {out}: {exc.strerror or exc}", fix="choose a writable --out") from None
    print(path)
    return 0
