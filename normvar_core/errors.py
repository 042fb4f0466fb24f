"""One exception type for every user-facing failure.

Every error raised to a user names what went wrong and the fix, on one line:
``NormvarError("corpus file not found: x.txt", fix="check the path ...")``.
The CLI prints ``str(err)`` and exits with status 2; the dashboard shows it.
"""
from __future__ import annotations


class NormvarError(Exception):
    """A user-facing error: ``message`` says what happened, ``fix`` what to do."""

    def __init__(self, message: str, fix: str | None = None):
        self.message = message
        self.fix = fix
        super().__init__(f"{message} — {fix}" if fix else message)


class CancelledError(NormvarError):
    """Raised inside a computation when its job was cancelled."""
