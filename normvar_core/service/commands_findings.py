"""``normvar findings RUN [RUN ...] [--json]``: each claim of the studies (Yamagiwa & Shimodaira
2024, the Gaussian-geometry comment, Razzhigaev et al. 2024) tested on the run(s) — value, interval, layer and
verdict (``stats.findings``)."""

from __future__ import annotations

import argparse
import json


def register(sub) -> None:
    from normvar_core.constants import MAX_RESAMPLES
    from normvar_core.numbers import MAX_SEED, Number
    from normvar_core.service.args import Count, add_data_dir

    p = sub.add_parser("findings", help="test each claim of the studies on runs: verdict, value and interval")
    p.add_argument("runs", nargs="+", help="run names or .duckdb paths (several: side by side)")
    p.add_argument("--json", action="store_true", help="print a JSON list of findings (one object per claim and run)")
    p.add_argument(
        "--resamples",
        type=Count(
            "--resamples",
            100,
            MAX_RESAMPLES,
            "95 % percentile intervals need 100 or more; each resample is a pass over the types",
        ),
        default=1000,
        help=f"bootstrap resamples over token types (default 1000, 100 to {MAX_RESAMPLES:,})",
    )
    p.add_argument(
        "--seed",
        type=Number("--seed", kind=int, most=MAX_SEED),
        default=0,
        help="seed of the bootstrap and of the Gaussian null",
    )
    add_data_dir(p)
    p.set_defaults(func=cmd_findings)


def format_table(per_run: dict) -> str:
    """Claims as rows, runs as columns: 'verdict: value [low, high] @layer'."""
    from normvar_core.stats.findings import CLAIMS, cell

    names = list(per_run)
    rows = [["claim"] + names]
    for k, c in enumerate(CLAIMS):
        rows.append([c.id] + [cell(per_run[n][k]) for n in names])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def cmd_findings(args: argparse.Namespace) -> int:
    from normvar_core.errors import NormvarError
    from normvar_core.runs.reader import open_run, resolve_run
    from normvar_core.stats.findings import CLAIMS, findings, samples_note

    if args.seed < 0:
        raise NormvarError(f"--seed must be >= 0, got {args.seed}", fix="pass --seed 0 or more")
    runs = [open_run(resolve_run(r, args.data_dir)) for r in args.runs]  # all checked before any work
    per_run = {r.name: findings(r, resamples=args.resamples, seed=args.seed) for r in runs}
    if args.json:
        out = []
        for name, fs in per_run.items():
            out += [{**f.to_dict(), "run": name} for f in fs]
        print(json.dumps(out, indent=1, ensure_ascii=False))
        return 0
    print(format_table(per_run))
    print()
    if samples_note(per_run):
        print(samples_note(per_run) + "\n")  # type: ignore[operator]  # checked above
    for name, fs in per_run.items():
        print(f"# {name}")
        for f, c in zip(fs, CLAIMS):
            print(f"- {f.id} ({c.seed}): {c.wording}\n    {f.verdict}: {f.why}")
    return 0
