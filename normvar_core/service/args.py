"""Arguments shared by every ``normvar`` sub-command (kept apart from ``cli`` so that the
command modules never import the entry point: no import cycle)."""

from __future__ import annotations

import argparse


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data directory (runs/, corpora/, queue/, checkpoints/); default $NORMVAR_DATA or ./data",
    )


class Count:
    """``type=Count("--resamples", 100, MAX_RESAMPLES, why)``: a count option bounded where it is declared, read by
    the one validator of numbers (``numbers.Number``). A value that is not a whole number, or is outside
    [minimum, maximum], is refused while the command line is parsed — one ``normvar: error:`` line naming the
    option and its range (``why``: where the bound comes from), before any work."""

    def __init__(self, flag: str, minimum: int, maximum: int, why: str = ""):
        from normvar_core.numbers import Number

        self.flag, self.minimum, self.maximum, self.why = flag, int(minimum), int(maximum), why
        self.number = Number(flag, kind=int, least=self.minimum, most=self.maximum, note=why)
        self.__name__ = "integer"  # argparse's name for the type in its own messages

    def __call__(self, text: str) -> int:
        return int(self.number(text))
