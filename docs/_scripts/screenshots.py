"""Every screenshot the manual shows, taken from the real dashboard over a real (small) run.

``make screenshots`` (or ``python docs/_scripts/screenshots.py``) computes a MiniLM run of the shipped novels
(``--sentences``, 300 by default), a word-level run of half as many sentences (the second run of Compare), the
first run's isotropic Gaussian null and an HTML report of the two runs, all with the ``normvar`` command line in
a data directory of its own; serves the dashboard with ``normvar dashboard`` on a free 127.0.0.1 port; opens
each view of ``SHOTS`` in Debian's chromium (Playwright) at ``--width`` pixels and writes the page's main block
as ``OUT/<name>.png``. At the end it checks that every image under ``screenshots/`` that a page of docs/
references was written, and exits 1 naming any that was not. Nothing is compared pixel by pixel.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
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
RUN = "minilm-novels"
WORDS = "minilm-novels-words"
NULL = f"{RUN}__null-isotropic-s0"
PLOT = "() => [...document.querySelectorAll('.js-plotly-plot')].some(g => g._fullData && g._fullData.length)"
TABLE = "() => !!document.querySelector('[data-testid=stDataFrame] canvas, [data-testid=stDataFrame] table')"
SCATTER = ".nv-scatter[data-frames]"  # a selector: the WebGL component lives in a shadow root, which Playwright pierces

# (file name, the view's query string, what the page must show before the shot: a JS predicate or a CSS selector)
SHOTS: tuple[tuple[str, str, str], ...] = (
    ("runs", f"page=runs&run={RUN}", TABLE),
    ("findings", f"page=findings&run={RUN}", TABLE),
    ("tradeoff", f"page=tradeoff&run={RUN}&layer=2", PLOT),
    ("layers", f"page=layers&run={RUN}", PLOT),
    ("decomposition", f"page=decomposition&run={RUN}", PLOT),
    ("frequency", f"page=frequency&run={RUN}", PLOT),
    ("clouds_pca", f"page=clouds&run={RUN}&layer=2", PLOT),
    ("token_neighbours", f"page=token&run={RUN}&token=the&section=neighbours", PLOT),
    ("occurrences", f"page=occurrences&run={RUN}&layer=3", SCATTER),
    ("geometry_null_overlay", f"page=geometry&run={RUN}&null={NULL}", PLOT),
    ("outliers", f"page=outliers&run={RUN}", PLOT),
    ("highdim", f"page=highdim&run={RUN}&null={NULL}", PLOT),
    ("compare", f"page=compare&run={RUN}&run2={WORDS}", PLOT),
)


def normvar(*args: str, data: Path) -> None:
    """One ``normvar`` command on ``data``; its failure ends the script with its output."""
    cmd = [sys.executable, "-m", "normvar_core.service.cli", *args, "--data-dir", str(data)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"screenshots: {' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def build_runs(data: Path, sentences: int) -> Path:
    """The runs the shots show (kept in ``data``: a second call reuses them) and the report's HTML file."""
    runs = data / "runs"
    if not (runs / f"{RUN}.duckdb").exists():
        normvar("compute", "--max-sentences", str(sentences), "--name", RUN, "--quiet", data=data)
    if not (runs / f"{WORDS}.duckdb").exists():
        normvar(
            "compute",
            "--max-sentences",
            str(max(sentences // 2, 40)),
            "--unit",
            "word",
            "--no-geometry",
            "--name",
            WORDS,
            "--quiet",
            data=data,
        )
    if not (runs / f"{NULL}.duckdb").exists():
        normvar("null", RUN, "--kind", "isotropic", data=data)
    report = data / "report.html"
    if not report.exists():
        normvar("report", RUN, WORDS, "--format", "html", "--out", str(report), data=data)
    return report


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(data: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """``normvar dashboard`` on a free loopback port; (process, base URL) once its health check answers."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "normvar_core.service.cli",
            "dashboard",
            "--data-dir",
            str(data),
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
        ],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with opener.open(base + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return proc, base
        except OSError:
            time.sleep(0.3)
    proc.kill()
    sys.exit(f"screenshots: the dashboard did not start:\n{log.read_text()[-2000:]}")


def referenced() -> set[str]:
    """The names of every ``screenshots/<name>.png`` that a page of the manual shows."""
    names = set()
    for page in DOCS.rglob("*.md"):
        names |= set(re.findall(r"screenshots/([\w.-]+\.png)", page.read_text(encoding="utf-8")))
    return names


def shoot(base: str, report: Path, out: Path, width: int) -> list[str]:
    from playwright.sync_api import sync_playwright

    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        for name, query, ready in SHOTS:
            # tall enough for the whole page: Streamlit scrolls inside its own container, and what lies below
            # the viewport would come out blank
            ctx = browser.new_context(viewport={"width": width, "height": 2400})
            page = ctx.new_page()
            page.goto(f"{base}/?{query}")
            if ready.startswith("()"):
                page.wait_for_function(ready, timeout=180_000)
            else:
                page.wait_for_selector(ready, timeout=180_000)
            page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=120_000)
            page.wait_for_timeout(1500)  # plotly's and the tables' last layout pass
            page.locator("[data-testid=stMainBlockContainer]").screenshot(path=str(out / f"{name}.png"))
            written.append(f"{name}.png")
            ctx.close()
        ctx = browser.new_context(viewport={"width": width, "height": 900})
        page = ctx.new_page()
        page.goto(report.resolve().as_uri())
        page.wait_for_function(PLOT, timeout=120_000)
        page.wait_for_timeout(1000)
        page.screenshot(path=str(out / "report_page.png"))
        written.append("report_page.png")
        browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DOCS / "screenshots", help="where the PNG files go")
    ap.add_argument(
        "--data",
        type=Path,
        default=None,
        help="data directory for the runs (kept and reused; default: a fresh temporary one)",
    )
    ap.add_argument("--sentences", type=int, default=300, help="sentences of the shipped novels in the run")
    ap.add_argument("--width", type=int, default=1400, help="the browser's width in pixels")
    args = ap.parse_args(argv)
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    data = args.data or Path(tempfile.mkdtemp(prefix="normvar-screenshots-"))
    data.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    report = build_runs(data, args.sentences)
    proc, base = serve(data, data / "dashboard.log")
    try:
        written = shoot(base, report, args.out, args.width)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    missing = sorted(name for name in referenced() if not (args.out / name).is_file())
    print(f"screenshots: {len(written)} written to {args.out}")
    if missing:
        print(f"screenshots: the manual shows images that were not written: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
