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

    def _raise(self, signum, frame):
        if not self.fired:
            self.fired = True
            raise Terminated("terminated (SIGTERM)")

    def __exit__(self, *exc):
        import signal

        if self.old is not None:
            signal.signal(signal.SIGTERM, self.old)
        return False


class interrupts_between_batches:
    """``with interrupts_between_batches() as guard:`` — SIGINT and SIGTERM keep their handlers (Ctrl-C's
    KeyboardInterrupt, ``terminate_as_interrupt``'s, a worker's) but, between ``guard.hold()`` and
    ``guard.release()``, a signal only waits: ``release`` hands it to its handler then. A run holds
    from the start of a batch's update to the end of that batch (all its pieces, ``on_batch`` done),
    so an interrupt lands in a forward pass or between batches, never in a half-added batch: the
    state saved on the way out holds every batch done. Outside the main thread it does nothing."""

    SIGNALS = ("SIGINT", "SIGTERM")

    def __enter__(self):
        import signal
        import threading

        self.held, self.pending, self.old = False, None, {}
        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                sig = getattr(signal, name)
                self.old[sig] = signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum, frame):
        if self.held:
            self.pending = self.pending or signum
        else:
            self._deliver(signum, frame)

    def _deliver(self, signum, frame=None):
        import os
        import signal

        handler = self.old.get(signum)
        if callable(handler):
            handler(signum, frame)
        elif handler == signal.SIG_DFL:  # the default action (end the process), as without the guard
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def hold(self) -> None:
        self.held = True

    def release(self) -> None:
        self.held = False
        signum, self.pending = self.pending, None
        if signum is not None:
            self._deliver(signum)

    def __exit__(self, *exc):
        import signal

        for sig, handler in self.old.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self.old = {}
        return False
