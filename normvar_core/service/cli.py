"""The ``normvar`` command line. Each group of sub-commands lives in its own module and
registers itself here; every command takes ``--data-dir`` (default $NORMVAR_DATA or ./data).

A user-facing failure (``NormvarError``) prints one line ``normvar: error: ...`` and exits 2; so does a
command line argparse refuses (an unknown option, a value of the wrong type), without the usage.
A closed stderr (``2>&-``) is replaced by /dev/null before anything runs: nothing said there changes the
outcome, and no file opened later takes descriptor 2.
"""

from __future__ import annotations

import argparse
import os
import sys

from normvar_core.errors import NormvarError, Terminated, terminate_as_interrupt


class OneLineParser(argparse.ArgumentParser):
    """argparse, whose refusals are one ``normvar: error:`` line (a NormvarError) rather than the usage and a line."""

    def error(self, message: str):
        raise NormvarError(f"{self.prog}: {message}"[:300], fix=f"see `{self.prog} --help`")


def build_parser() -> argparse.ArgumentParser:
    from normvar_core.service import (
        commands_app,
        commands_contexts,
        commands_export,
        commands_findings,
        commands_jobs,
        commands_null,
        commands_plan,
        commands_report,
        commands_runs,
        commands_sweep,
    )

    parser = OneLineParser(
        prog="normvar",
        description="Exact norm/variance statistics of contextualized embeddings.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (
        commands_runs,
        commands_plan,
        commands_contexts,
        commands_null,
        commands_report,
        commands_sweep,
        commands_jobs,
        commands_app,
        commands_export,
        commands_findings,
    ):
        module.register(sub)
    return parser


def quiet_library_warnings() -> None:
    """No raw warning on stderr: normvar's own warnings (``warnings.warn`` in normvar_core) become one
    ``normvar: note:`` line; the libraries' (numpy RuntimeWarnings, deprecations, transformers' log
    warnings) are not shown. ``NORMVAR_WARNINGS=1`` shows everything as Python would."""
    import warnings

    if os.environ.get("NORMVAR_WARNINGS"):
        return

    def show(message, category, filename, lineno, file=None, line=None):
        if "normvar_core" in str(filename) and not issubclass(category, (RuntimeWarning, DeprecationWarning)):
            text = str(message).strip().splitlines()
            print(f"normvar: note: {text[0] if text else category.__name__}", file=sys.stderr)

    warnings.showwarning = show
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # read when transformers is first imported
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()


def main(argv: list[str] | None = None) -> int:
    """The ``normvar`` command. ``argv``: the arguments (tests, other programs); None: the program's own,
    and the process ends here (``end_process``)."""
    code = run_command(argv)
    if argv is None:
        end_process(code)
    return code


def stderr_or_devnull() -> None:
    """A closed descriptor 2 (``2>&-``; Python then sets ``sys.stderr`` to None) becomes /dev/null."""
    if sys.stderr is not None:
        return
    fd = os.open(os.devnull, os.O_WRONLY)  # the lowest free descriptor: 2 itself when it is closed
    if fd != 2:
        os.dup2(fd, 2)
        os.close(fd)
    sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")


def run_command(argv: list[str] | None) -> int:
    stderr_or_devnull()
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    quiet_library_warnings()
    try:
        # SIGTERM as Ctrl-C from the first moment (a command's imports of torch and transformers take seconds):
        # one line and 143, never a silent end; the worker and the dashboard install their own handlers inside
        with terminate_as_interrupt():
            args = build_parser().parse_args(argv)  # a bounded option (args.Count) refuses here, before any work
            return int(args.func(args) or 0)
    except NormvarError as err:
        print(f"normvar: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `normvar show RUN | head -1`: the reader has gone, as with SIGPIPE
        quiet_closed_stdout()
        return 141
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM in a foreground compute (errors.Terminated)
        default = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        print(f"normvar: {getattr(exc, 'message', None) or default}", file=sys.stderr)
        return getattr(exc, "exit_code", 130)


def quiet_closed_stdout() -> None:
    """stdout's reader has gone: what is still buffered goes to /dev/null, so the flush at exit raises
    no second BrokenPipeError ("Exception ignored ...")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file behind stdout (a test's capture)
        pass


def end_process(code: int) -> None:
    """End the process now with ``code``: the output flushed and the atexit handlers run, as at a normal
    exit, but without the interpreter's teardown — one garbage collection per module over the millions
    of objects torch, transformers and the run left, 1.0-1.4 s at the end of every compute (measured,
    MiniLM; 0.2 s this way). The OS takes the memory back. The normal exit instead where another
    (non-daemon) thread still runs (the exit waits for it) or a profiler or tracer (cProfile, coverage)
    writes its data at the exit."""
    import atexit
    import threading

    if sys.getprofile() is not None or sys.gettrace() is not None:
        return
    if any(t is not threading.main_thread() and t.is_alive() and not t.daemon for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be said
            pass
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
