"""The dashboard served for a real browser: ``start_streamlit`` runs ``streamlit run views/_server.py`` (app.py as
``normvar dashboard`` serves it) on a free 127.0.0.1 port; Debian's chromium is driven by Playwright with ``ARGS``
(the recipe in ../shared/ENVIRONMENT.md); ``ARTIFACTS`` is where the browser tests leave their screenshots."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# screenshots: outside the checkout, kept between runs (the same folder every time)
ARTIFACTS = Path(tempfile.gettempdir()) / "normvar-test-artifacts"
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PLOT_READY = (
    "() => { const g = document.querySelector('.js-plotly-plot'); return !!(g && g._fullData && g._fullData.length); }"
)


def wait_url(page, *parts: str, absent: tuple[str, ...] = (), timeout: int = 30000) -> None:
    """Wait until the address bar holds every one of ``parts`` and none of ``absent``: the dashboard writes its query
    parameters after a rerun has drawn, so a URL read once right after an interaction can still be the old one."""
    page.wait_for_function(
        "([want, gone]) => want.every(s => location.href.includes(s)) && !gone.some(s => location.href.includes(s))",
        arg=[list(parts), list(absent)],
        timeout=timeout,
    )


FREE_PORTS = range(20000, 32000)
"""Where ``free_port`` draws: below Linux's ephemeral range (32768-60999: every outgoing connection's source port,
and the port the system hands a server asking for port 0, as Ray's and Chromium's do) and above Ray's worker ports
(10002-19999). A port the system handed out once and freed could be any outgoing connection's a moment later:
a server of another test then failed to start on it ("Address already in use")."""


def free_port() -> int:
    """A port nothing is bound to on 127.0.0.1 (nor on every address: such a bind holds it there too), drawn from
    ``FREE_PORTS`` at random: two tests starting servers at once draw the same port once in 12,000."""
    rng = random.SystemRandom()
    for _ in range(100):
        port = rng.choice(FREE_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))  # no SO_REUSEADDR: a port still in TIME_WAIT is refused too
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {FREE_PORTS}")


def start_streamlit(data: Path, log_path: Path) -> tuple[subprocess.Popen, str, object]:
    """`streamlit run views/_server.py` (app.py as `normvar dashboard` serves it) on a free 127.0.0.1 port over
    ``data``; returns (process, base URL, log
    file) once its health check answers."""
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "views" / "_server.py"),
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--server.fileWatcherType",
            "none",
            "--browser.gatherUsageStats",
            "false",
            "--",
            "--data-dir",
            str(data),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"streamlit did not start: {Path(log_path).read_text()[-2000:]}")
        time.sleep(0.3)
    return proc, base, log


def stop_streamlit(proc: subprocess.Popen, log) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def serving(data: Path, log_path: Path):
    """A module fixture's body: the dashboard over ``data`` (its base URL), stopped afterwards."""
    proc, base, log = start_streamlit(data, log_path)
    yield base
    stop_streamlit(proc, log)
