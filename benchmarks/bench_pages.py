"""Every dashboard page against the floor of its framework, in a real browser.

The dashboard is served as `normvar dashboard` serves it (``views/_server.py``: app.py as an ASGI app). The floor is a
one-figure Streamlit page (plotly Scattergl, 2,000 points: ``benchmarks/floor_page.py``)
served by the same Streamlit, measured in the same run. Each page is loaded in a fresh browser context
(no cache, no session) and timed from the navigation's start to its first figure or table
(a plotly graph with its data drawn, a data frame, a table, a form or a deck.gl canvas; on a page that
has nothing to draw for the run, e.g. Training without a sweep, its message).

* **cold**: the first load of that page after its server started (Streamlit's caches empty for it);
* **warm**: a second load of the same page in a new browser context, same server (caches filled).

Each round starts both servers afresh; the table gives the median over rounds and the ratio to the
floor's median of the same kind; each round takes the pages (and the floor) in another order, a rotation
of the list. ``--tsne``: then, per round, the first t-SNE map of the Token clouds
(a fresh server, the run's stored maps in DIR/cache/tsne/ removed first): seconds from the click on
t-SNE to the map drawn. ``--cpu``: each load is traced (Chrome's trace) and the table adds its CPU seconds:
the thread time of every top-level task of every chromium process, navigation to first figure — steadier than
wall seconds on a machine that runs other jobs (the tracing itself adds a little to both).

    .venv/bin/python benchmarks/bench_pages.py --data-dir DIR --run NAME [--rounds 5] [--pages a,b] [--tsne] [--cpu]

Everything talks to 127.0.0.1 only. Prints a markdown table for the docs.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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
# The first thing a page shows that is worth waiting for.
READY = """(MESSAGE_PAGE) => {
  for (const g of document.querySelectorAll('.js-plotly-plot')) if (g._fullData && g._fullData.length) return true;
  if (document.querySelector('[data-testid="stDataFrame"] canvas, [data-testid="stTable"] table')) return true;
  if (document.querySelector('[data-testid="stForm"]')) return true;
  // the Occurrences scatter (a v2 component in a shadow root) once it has drawn a frame
  for (const e of document.querySelectorAll('*'))
    if (e.shadowRoot && e.shadowRoot.querySelector('.nv-scatter[data-frames]')) return true;
  return !!(MESSAGE_PAGE && document.querySelector('[data-testid="stAlertContainer"]'));
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(script: Path, data_dir: Path | None) -> tuple[subprocess.Popen, str]:
    """``streamlit run script`` on a free loopback port; returns (process, base URL) once healthy."""
    port = _free_port()
    tail = ["--", "--data-dir", str(data_dir)] if data_dir else []
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(script),
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
            "--theme.base",
            "light",
            *tail,
        ],
        cwd=ROOT,
        env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return proc, base
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"{script.name} did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


DASHBOARD = ROOT / "views" / "_server.py"
"""What `normvar dashboard` / `normvar up` serve: app.py behind the middleware that answers page URLs."""

MESSAGE_PAGES = ("training",)
"""Pages that show a message, not a figure, for a run that is not part of a sweep."""


TOP_LEVEL_TASKS = ("RunTask", "ThreadControllerImpl::RunTask", "ThreadPool_RunTask")


def trace_cpu(trace: bytes) -> float:
    """CPU seconds in a Chrome trace: the thread time (``tdur``) of its top-level tasks, every process and thread."""
    import json

    events = json.loads(trace)
    events = events["traceEvents"] if isinstance(events, dict) else events
    return (
        sum(e["tdur"] for e in events if e.get("ph") == "X" and "tdur" in e and e.get("name") in TOP_LEVEL_TASKS) / 1e6
    )


def load_time(browser, url: str, timeout_s: float = 60, cpu: list[float] | None = None) -> float:
    """Seconds from the navigation's start to the first figure or table, in a fresh context (inf when
    nothing came within ``timeout_s``; a screenshot of that page lands in test-artifacts/). ``cpu``: the load
    is traced and its CPU seconds (``trace_cpu``) appended there."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = ctx.new_page()
    try:
        if cpu is not None:
            browser.start_tracing(page=page, categories=["toplevel", "disabled-by-default-devtools.timeline"])
        t0 = time.perf_counter()
        page.goto(url, wait_until="commit")
        message_page = url.split("/")[3].split("?")[0] in MESSAGE_PAGES
        page.wait_for_function(READY, arg=message_page, timeout=timeout_s * 1000, polling=25)
        seconds = time.perf_counter() - t0
        if cpu is not None:
            cpu.append(trace_cpu(browser.stop_tracing()))
        return seconds
    except PlaywrightTimeout:
        if cpu is not None:
            browser.stop_tracing()
            cpu.append(float("nan"))
        (ROOT / "test-artifacts").mkdir(exist_ok=True)
        page.screenshot(
            path=str(ROOT / "test-artifacts" / f"bench_pages_timeout_{url.split('/')[3].split('?')[0] or 'runs'}.png")
        )
        print(f"no figure or table within {timeout_s:.0f} s: {url}", file=sys.stderr)
        return float("inf")
    finally:
        ctx.close()


TSNE_DRAWN = """() => [...document.querySelectorAll('.js-plotly-plot')].some(
  g => g._fullData && g._fullData.length && ((g.layout.title || {}).text || '').includes('t-SNE'))"""


def tsne_time(browser, base: str, run: str, data_dir: Path, timeout_s: float = 120) -> float:
    """Seconds from the click on t-SNE (Token clouds, the run's default tokens) to the map drawn, with the
    run's maps on disk (DIR/cache/tsne/<run>/) removed first: the first map of this server."""
    import shutil

    shutil.rmtree(data_dir / "cache" / "tsne" / run, ignore_errors=True)
    ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = ctx.new_page()
    try:
        page.goto(f"{base}/clouds?run={run}", wait_until="commit")
        page.wait_for_function(READY, arg=False, timeout=timeout_s * 1000, polling=25)
        t0 = time.perf_counter()
        page.get_by_text("t-SNE", exact=True).click()
        page.wait_for_function(TSNE_DRAWN, timeout=timeout_s * 1000, polling=25)
        return time.perf_counter() - t0
    finally:
        ctx.close()


def page_urls(base: str, run: str, keys: list[str]) -> dict[str, str]:
    from normvar_core.viz.pages import DEFAULT_PAGE

    return {k: f"{base}/{'' if k == DEFAULT_PAGE else k}?run={run}" for k in keys}


def main(argv: list[str] | None = None) -> None:
    from normvar_core.viz.pages import PAGE_KEYS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pages", default=",".join(PAGE_KEYS))
    ap.add_argument("--tsne", action="store_true", help="also time the first t-SNE map of Token clouds")
    ap.add_argument("--cpu", action="store_true", help="trace each load: the browser's CPU seconds too")
    args = ap.parse_args(argv)
    keys = [k for k in args.pages.split(",") if k]
    from playwright.sync_api import sync_playwright

    tsne: list[float] = []
    times: dict[str, dict[str, list[float]]] = {k: {"cold": [], "warm": []} for k in ["floor", *keys]}
    cpus: dict[str, dict[str, list[float]]] = {k: {"cold": [], "warm": []} for k in ["floor", *keys]}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        for r in range(args.rounds):
            floor, fbase = serve(ROOT / "benchmarks" / "floor_page.py", None)
            app, base = serve(DASHBOARD, args.data_dir)
            try:
                urls = {"floor": fbase + "/", **page_urls(base, args.run, keys)}
                # each round starts at another place in the list (the floor included): a page is not always
                # measured after the same others, in a browser that has already drawn them
                order = list(urls)[r % len(urls) :] + list(urls)[: r % len(urls)]
                for kind in ("cold", "warm"):
                    for k in order:
                        url = urls[k]
                        times[k][kind].append(load_time(browser, url, cpu=cpus[k][kind] if args.cpu else None))
                        print(f"{kind} {k}: {times[k][kind][-1]:.2f} s", file=sys.stderr)
                if args.tsne:
                    tsne.append(tsne_time(browser, base, args.run, args.data_dir))
                    print(f"first t-SNE map: {tsne[-1]:.2f} s", file=sys.stderr)
            finally:
                stop(floor)
                stop(app)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        browser.close()
    med = {k: {kind: statistics.median(v) for kind, v in d.items()} for k, d in times.items()}
    print(
        f"load average {os.getloadavg()[0]:.1f}; median of {args.rounds} rounds, seconds to the first figure or table"
    )
    print(
        "| page | cold | cold / floor | warm | warm / floor |"
        + (" warm CPU-s | warm CPU / floor |" if args.cpu else "")
    )
    print("|---|---:|---:|---:|---:|" + ("---:|---:|" if args.cpu else ""))
    fcpu = statistics.median(cpus["floor"]["warm"]) if args.cpu else 0.0
    for k, m in med.items():
        c = statistics.median(cpus[k]["warm"]) if args.cpu and cpus[k]["warm"] else float("nan")
        print(
            f"| {k} | {m['cold']:.2f} | {m['cold'] / med['floor']['cold']:.2f}x | {m['warm']:.2f} "
            f"| {m['warm'] / med['floor']['warm']:.2f}x |" + (f" {c:.2f} | {c / fcpu:.2f}x |" if args.cpu else "")
        )
    if tsne:
        print(
            f"\nfirst t-SNE map of Token clouds (click to map drawn): median {statistics.median(tsne):.2f} s, "
            f"max {max(tsne):.2f} s over {len(tsne)} rounds"
        )


if __name__ == "__main__":
    main()
