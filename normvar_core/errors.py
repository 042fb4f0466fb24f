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


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``timeout``, ``docker stop``, a scheduler) during a foreground command,
    raised by ``terminate_as_interrupt``'s handler: every ``except KeyboardInterrupt`` / ``finally``
    cleans up as for Ctrl-C (temp files removed, checkpoint kept); the CLI exits 143 (128 + 15)."""

    exit_code = 143


class terminate_as_interrupt:
    """``with terminate_as_interrupt(): ...`` — SIGTERM raises ``Terminated`` in the main thread for
    the duration (a second SIGTERM during the clean-up is ignored); the old handler comes back after.
    Outside the main thread it does nothing."""

    def __enter__(self):
        import signal
        import threading

        self.old = None
        if threading.current_thread() is threading.main_thread():
            self.fired = False
            self.old = signal.signal(signal.SIGTERM, self._raise)
        return self

    def _raise(self, signum, frame):  # noqa: ARG002
        if not self.fired:
            self.fired = True
            raise Terminated("terminated (SIGTERM)")

    def __exit__(self, *exc):
        import signal

        if self.old is not None:
            signal.signal(signal.SIGTERM, self.old)
        return False
