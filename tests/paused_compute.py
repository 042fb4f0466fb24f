"""A real ``normvar compute`` (or ``worker``) process stopped at a chosen point, for the interrupt tests
(tests/test_sigterm.py, tests/test_early_interrupt.py, tests/test_write_signals.py, tests/test_compute_log.py,
tests/test_early_pass_checkpoint.py, tests/test_checkpoint_interrupt_lines.py, tests/test_compute_lock.py) and
the worker's fault injection (tests/test_worker_faults.py).

``PATCHES[stage]`` is code run before the CLI that calls ``stop_here()`` when the process reaches ``stage``.
``paused_compute`` defines ``stop_here`` as: write ``marker`` and wait until the file ``go`` exists (the test has
sent its signal) or 120 s have passed, so the test can interrupt the process there; the fault injection
defines it as a SIGKILL of the process itself. "update-slow-save" makes the checkpoint's save start with a 5 s
pause (``<marker>.saving`` written when it starts), "update-file-size-limit" runs the process under a 64 kB file
size limit (every larger write fails, as on a full disk). ``wait_for_pause`` waits until the process is there;
``interrupt_at_pause`` then signals it and lets it go on (or not: the signal must end the pause)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

PATCHES = {
    "load": """
        from normvar_core.pipeline import models as M
        real = M.load_model
        def load_model(*a, **k):
            stop_here()
            return real(*a, **k)
        M.load_model = load_model
    """,
    "first-forward": """
        from normvar_core.pipeline import sources as S
        real = S.TransformerSource._forward
        def forward(self, bi, *a, **k):
            if bi == 0:
                stop_here()
            yield from real(self, bi, *a, **k)
        S.TransformerSource._forward = forward
    """,
    "forward": """
        from normvar_core.pipeline import sources as S
        real, calls = S.TransformerSource._forward, [0]
        def forward(self, *a, **k):
            calls[0] += 1
            if calls[0] == 3:   # two batches done, the third in its forward pass
                stop_here()
            yield from real(self, *a, **k)
        S.TransformerSource._forward = forward
    """,
    "update": """
        from normvar_core.pipeline.execute import partials as P
        real = P.update_all
        def update_all(measures, sb, on_layer=None):
            first = {k: v for k, v in measures.items() if k == "moments"}
            real(first, sb, on_layer)
            if sb.index == AT:
                stop_here()         # the moments hold batch AT, the other measures not yet
            real({k: v for k, v in measures.items() if k != "moments"}, sb, on_layer)
        P.update_all = update_all
    """,
    "update-slow-save": """
        from normvar_core.pipeline.execute import partials as P, checkpoint as C
        real, real_save = P.update_all, C.save
        def update_all(measures, sb, on_layer=None):
            real(measures, sb, on_layer)
            if sb.index == AT:
                stop_here()         # batch AT added; the signal ends the pass after it
        def slow_save(*a, **k):
            Path(str(MARKER) + ".saving").write_text("x")
            time.sleep(5)           # a large checkpoint's save: a second interrupt lands in it
            return real_save(*a, **k)
        P.update_all, C.save = update_all, slow_save
    """,
    "update-file-size-limit": """
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # writes past the limit fail with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        from normvar_core.pipeline.execute import partials as P
        real = P.update_all
        def update_all(measures, sb, on_layer=None):
            real(measures, sb, on_layer)
            if sb.index == AT:
                stop_here()
        P.update_all = update_all
    """,
    "write": """
        from normvar_core.runs import writer
        real, calls = writer._append, [0]
        def append(*a):
            if calls[0] == 2:   # the temp file holds the run row and two tables
                stop_here()
            calls[0] += 1
            return real(*a)
        writer._append = append
    """,
    "import": """
        import builtins
        real_import, seen = builtins.__import__, [False]
        def imp(name, *a, **k):
            if name == "torch" and not seen[0]:
                seen[0] = True
                stop_here()         # the command's first import of torch: seconds in which a SIGTERM may come
            return real_import(name, *a, **k)
        builtins.__import__ = imp
    """,
    "write-held": """
        from normvar_core.runs import writer
        real, calls = writer._db, [0]
        def db(guard, step, call, *args):
            calls[0] += 1
            if calls[0] != AT:
                return real(guard, step, call, *args)
            def paused(*a):
                stop_here()         # inside DuckDB call AT of the write, signals held: the signal waits for it
                return call(*a)
            return real(guard, step, paused, *args)
        writer._db = db
    """,
}


def paused_compute(
    argv: list[str], stage: str | None, marker: Path, log: Path, *, at: int = 0, go: Path | None = None
) -> subprocess.Popen:
    """``normvar <argv>`` in a child process that pauses at ``stage`` (a key of ``PATCHES``; None: no pause) —
    at batch ``at`` for "update", at the run file's DuckDB call ``at`` for "write-held" — writing ``marker`` and waiting
    for ``go``; stderr goes to ``log``."""
    go = go if go is not None else marker.with_name(marker.name + ".never")
    code = f"import sys, time\nfrom pathlib import Path\nAT = {at}\nMARKER = {str(marker)!r}\n"
    code += (
        f"def stop_here():\n    Path({str(marker)!r}).write_text('x')\n    t = time.monotonic()\n"
        f"    while not Path({str(go)!r}).exists() and time.monotonic() - t < 120:\n        time.sleep(0.02)\n"
    )
    code += textwrap.dedent(PATCHES[stage]) if stage else ""
    code += f"from normvar_core.service import cli\nsys.exit(cli.main({argv!r}))\n"
    env = dict(os.environ, PYTHONPATH=os.getcwd(), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    with open(log, "wb") as fh:
        return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=fh, env=env)


def wait_for_pause(p: subprocess.Popen, marker: Path, log: Path, timeout_s: float = 240) -> None:
    """Until ``p`` has written ``marker`` (it is paused); an exit before that fails with its log."""
    t0 = time.monotonic()
    while not marker.exists():
        assert p.poll() is None, log.read_text()
        assert time.monotonic() - t0 < timeout_s, f"no pause within {timeout_s:.0f} s"
        time.sleep(0.02)


def interrupt_at_pause(
    p: subprocess.Popen, marker: Path, go: Path | None, log: Path, sig=signal.SIGTERM, *, exit_within_s: float = 120
) -> int:
    """``sig`` to ``p`` once it is paused, then ``go`` written 0.5 s later (the signal is in before the paused step
    goes on); ``go`` None: none written, the signal itself must end the pause (``p`` was started without ``go``).
    Its exit status, which must come within ``exit_within_s``."""
    wait_for_pause(p, marker, log)
    p.send_signal(sig)
    if go is not None:
        time.sleep(0.5)
        go.write_text("x")
    return p.wait(timeout=exit_within_s)
