"""The one validator of every number a user gives normvar: a command-line option (``--seed``, ``--memory-gb``,
``--port``, ...) or an environment variable (``NORMVAR_MAX_UPLOAD_MB``, ``NORMVAR_PORT``).

``Number(name, kind, least, most)`` reads a text (or a value already parsed) as ``kind`` (int or float) and
checks it, so that every refusal is one ``NormvarError`` line that names the option or variable, the value given
and the range, whatever went wrong: not a number, NaN, an infinity, a float that overflows (``1e400``), an integer
too large for the code that uses it (``99999999999999999999999``), a value outside [least, most]:

    --seed 99999999999999999999999 is not a whole number from 0 to 9,007,199,254,740,991
    NORMVAR_MAX_UPLOAD_MB=nan is not a number from 0.01 to 1,048,576

An option is written ``--flag VALUE``, a variable ``NAME=VALUE``. ``least_open``: the least value itself is out
(a size must be above 0). Base layer: no numpy, no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from normvar_core.errors import NormvarError

MAX_SEED = 2**53 - 1
"""The largest seed: the largest integer the New-run form's number field holds exactly (a browser's number is a
float64); the seed is hashed as an unsigned 64-bit integer and stored in a run file's BIGINT column."""
MAX_MEMORY_GB = 1 << 20
"""The largest --memory-gb (1 PiB): any machine's memory, and still an exact number of bytes in an int64."""
MAX_UPLOAD_MB = 1 << 20
"""The largest upload cap, in MB (1 TB)."""
MAX_COUNT = 2**62
"""The largest count any other option takes (sentences, words, tokens, a batch): beyond it, sizes overflow."""
MAX_SECONDS = 1e7
"""The largest interval or timeout in seconds (about 116 days)."""


def _fmt(x: float | int) -> str:
    """1,048,576 (thousands marked from 100,000 on), 65535, 0.01."""
    if isinstance(x, int) or (float(x).is_integer() and abs(x) < 1e16):
        return f"{int(x):,}" if abs(x) >= 100_000 else str(int(x))
    return f"{x:g}"


@dataclass(frozen=True)
class Number:
    """How one option or variable's value is read and bounded (the module docstring)."""

    name: str  # "--seed" or "NORMVAR_MAX_UPLOAD_MB"
    kind: type = float  # int or float
    least: float | int = 0
    most: float | int = MAX_COUNT
    least_open: bool = False
    note: str = ""  # what the special values mean, e.g. "0: any free port"
    __name__ = "number"  # argparse's name for a type in its own messages

    def given(self, text: Any) -> str:
        shown = str(text).strip()[:60]
        return f"{self.name}={shown}" if not self.name.startswith("-") else f"{self.name} {shown}"

    def range_words(self) -> str:
        what = "a whole number" if self.kind is int else "a number"
        span = (
            f"above {_fmt(self.least)} and at most {_fmt(self.most)}"
            if self.least_open
            else f"from {_fmt(self.least)} to {_fmt(self.most)}"
        )
        return f"{what} {span}" + (f" ({self.note})" if self.note else "")

    def refuse(self, text: Any) -> NormvarError:
        fix = (
            f"give {self.name} a value in that range"
            if self.name.startswith("-")
            else f"set {self.name} to a value in that range, or unset it"
        )
        return NormvarError(f"{self.given(text)} is not {self.range_words()}", fix=fix)

    def __call__(self, text: Any) -> int | float:
        """``text`` as a checked ``kind``; one NormvarError line naming ``name`` and its range otherwise."""
        value = self.parse(text)
        low_ok = value > self.least if self.least_open else value >= self.least
        if not (low_ok and value <= self.most):
            raise self.refuse(text)
        return value

    def parse(self, text: Any) -> int | float:
        if isinstance(text, bool):
            raise self.refuse(text)
        try:
            if self.kind is int:
                if isinstance(text, int):
                    return int(text)
                if isinstance(text, float):
                    if not (math.isfinite(text) and text.is_integer()):
                        raise ValueError
                    return int(text)
                s = str(text).strip().replace("_", "")
                if len(s) > 40:  # longer than any integer in range: no quadratic int() on a huge text
                    raise ValueError
                return int(s)
            value = float(str(text).strip().replace("_", "") if not isinstance(text, (int, float)) else text)
        except (ValueError, TypeError, OverflowError):
            raise self.refuse(text) from None
        if not math.isfinite(value):  # nan, inf, and a text that overflows a float (1e400 reads as inf)
            raise self.refuse(text)
        return value


def env_number(name: str, default, environ=None, **bounds) -> int | float:
    """The environment variable ``name`` checked as ``Number(name, **bounds)``, or ``default`` when it is unset
    (set but empty is refused: a value was meant)."""
    import os

    env = os.environ if environ is None else environ
    text = env.get(name)
    if text is None:
        return default
    return Number(name, **bounds)(text)


PORT: dict[str, Any] = dict(kind=int, least=0, most=65535, note="0: any free port")
"""A port: 0 to 65535, 0 meaning any free one (``--port``, ``NORMVAR_PORT``)."""
UPLOAD_MB: dict[str, Any] = dict(kind=float, least=0, most=MAX_UPLOAD_MB, least_open=True)
"""An upload cap in MB: above 0, at most ``MAX_UPLOAD_MB`` (``--max-upload-mb``, ``NORMVAR_MAX_UPLOAD_MB``)."""


__all__ = [
    "MAX_COUNT",
    "MAX_MEMORY_GB",
    "MAX_SECONDS",
    "MAX_SEED",
    "MAX_UPLOAD_MB",
    "PORT",
    "UPLOAD_MB",
    "Number",
    "env_number",
]
