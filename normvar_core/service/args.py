"""Arguments shared by every ``normvar`` sub-command (kept apart from ``cli`` so that the
command modules never import the entry point: no import cycle)."""
from __future__ import annotations

import argparse


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", default=None,
        help="data directory (runs/, corpora/, queue/, checkpoints/); default $NORMVAR_DATA or ./data",
    )
