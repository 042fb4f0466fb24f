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
    """``type=Count("--resamples", 100, MAX_RESAMPLES, why)``: a count option bounded where it is declared.
    A value that is not an integer, or is outside [minimum, maximum], is refused while the command line is
    parsed — one ``normvar: error:`` line naming the bound (``why``: where it comes from), before any work."""

    def __init__(self, flag: str, minimum: int, maximum: int, why: str = ""):
        self.flag, self.minimum, self.maximum, self.why = flag, int(minimum), int(maximum), why
        self.__name__ = "integer"  # argparse's name for the type in its own messages

    def __call__(self, text: str) -> int:
        from normvar_core.errors import NormvarError

        try:
            value = int(str(text).strip().replace("_", ""))
        except ValueError:
            raise NormvarError(
                f"{self.flag} must be an integer, got {text!r}"[:200],
                fix=f"pass {self.flag} with a whole number from {self.minimum} to {self.maximum:,}",
            ) from None
        if value < self.minimum:
            raise NormvarError(
                f"{self.flag} {value:,} is too few{f' ({self.why})' if self.why else ''}",
                fix=f"use {self.flag} {self.minimum} or more",
            )
        if value > self.maximum:
            raise NormvarError(
                f"{self.flag} {value:,} is more than {self.maximum:,}{f' ({self.why})' if self.why else ''}",
                fix=f"use {self.flag} {self.maximum} or less",
            )
        return value
