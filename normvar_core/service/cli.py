"""The ``normvar`` command line. Each group of sub-commands lives in its own module and
registers itself here; every command takes ``--data-dir`` (default $NORMVAR_DATA or ./data).

A user-facing failure (``NormvarError``) prints one line ``normvar: error: ...`` and exits 2.
"""
from __future__ import annotations

import argparse
import os
import sys

from normvar_core.errors import NormvarError


def build_parser() -> argparse.ArgumentParser:
    from normvar_core.service import commands_app
    from normvar_core.service import commands_jobs
    from normvar_core.service import commands_contexts
    from normvar_core.service import commands_findings
    from normvar_core.service import commands_null
    from normvar_core.service import commands_report
    from normvar_core.service import commands_runs
    from normvar_core.service import commands_sweep

    parser = argparse.ArgumentParser(
        prog="normvar",
        description="Exact norm/variance statistics of contextualized embeddings.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (commands_runs, commands_contexts, commands_null, commands_report, commands_sweep, commands_jobs,
                   commands_app, commands_findings):
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except NormvarError as err:
        print(f"normvar: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("normvar: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
