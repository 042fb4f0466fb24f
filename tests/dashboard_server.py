"""A dashboard served by a real ``normvar`` process (``up``/``dashboard``): ``serve_until_ready`` starts it and
waits for its health check, ``stop`` interrupts it, ``LOCAL`` opens URLs on 127.0.0.1 without any proxy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READY_S = 240
LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # straight to 127.0.0.1, never a proxy


def serve_until_ready(args: list[str], env: dict) -> tuple[subprocess.Popen, str]:
    """Start `normvar ARGS`; return the process and its stdout's first line (the URL line) once the server
    answers its health check on 127.0.0.1 (200, or 403 before sign-in when a token is set); its stderr at once
    when it exits first, and after ``READY_S`` (generous: a loaded machine starts Streamlit slowly)."""
    port = args[args.index("--port") + 1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "normvar_core.service.cli", *args],
        cwd=ROOT,
        text=True,
        env=dict(env, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )  # its own group: stop() reaches the children that hold the pipes
    first = proc.stdout.readline()
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with LOCAL.open(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return proc, first
        except urllib.error.HTTPError as err:
            if err.code == 403:
                return proc, first
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(proc.stderr.read())


def stop(proc: subprocess.Popen) -> tuple[str, str]:
    """Interrupt the server (SIGINT, as Ctrl-C) and return the rest of its stdout and stderr. A server still up
    after 60 s is killed with its whole process group: a child left alive would hold the pipes open."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # a stuck server still goes, so one test never holds up the next
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # not a group leader (started elsewhere): the process alone
            proc.kill()
        return proc.communicate(timeout=60)
