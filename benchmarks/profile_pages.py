"""Server time of every dashboard page, without a browser: each page run through Streamlit's AppTest
cold (Streamlit's caches cleared; the modules already imported) and warm (the same process, caches
filled). ``bench_pages.py`` gives the times in a browser; the difference is the browser's share.

Besides the wall seconds, for the warm run: the CPU seconds of the script thread (``time.thread_time`` in
that thread: what the page's Python costs, whatever else the machine runs), the bytes of every message
the run sends to the browser, and what its figures ask the browser to draw (figure JSON bytes, WebGL and
SVG traces, points, annotations). ``--profile KEY``: the warm run of that page under ``cProfile`` (the
script thread), its top functions by cumulative time.

    NORMVAR_DATA=DIR .venv/bin/python benchmarks/profile_pages.py --run NAME [--pages a,b] [--profile KEY]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LAST: dict = {}
"""What the last AppTest script run measured: ``cpu`` (s, script thread), ``bytes`` (messages sent),
``figures`` (the plotly specs, decoded), ``profile`` (a cProfile.Profile when one was asked for)."""


def _instrument(profile: bool) -> None:
    """Wrap AppTest's script runner: CPU seconds (and a cProfile) of the script thread, bytes it sends."""
    from streamlit.testing.v1.local_script_runner import LocalScriptRunner

    thread, run = LocalScriptRunner._run_script_thread, LocalScriptRunner.run

    def timed_thread(self) -> None:
        prof = cProfile.Profile() if profile else None
        t0 = time.thread_time()
        if prof:
            prof.enable()
        try:
            thread(self)
        finally:
            if prof:
                prof.disable()
            LAST.update(cpu=time.thread_time() - t0, profile=prof)

    def counted_run(self, *a, **kw):
        tree = run(self, *a, **kw)
        msgs = self.forward_msgs()
        LAST["bytes"] = sum(m.ByteSize() for m in msgs)
        LAST["figures"] = [
            json.loads(m.delta.new_element.plotly_chart.spec)
            for m in msgs
            if m.WhichOneof("type") == "delta"
            and m.delta.WhichOneof("type") == "new_element"
            and m.delta.new_element.WhichOneof("type") == "plotly_chart"
        ]
        return tree

    LocalScriptRunner._run_script_thread, LocalScriptRunner.run = timed_thread, counted_run


def page_seconds(key: str, run: str) -> float:
    """Seconds of one AppTest run of app.py followed by the page ``key`` (``?run=run``)."""
    from streamlit.testing.v1 import AppTest

    from normvar_core.viz.pages import PAGES

    file = next(p.file for p in PAGES if p.key == key)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params.update({"run": run})
    at.run()
    t0 = time.perf_counter()
    at.switch_page(f"views/{file}").run()
    if at.exception:
        print(f"{key}: {at.exception[0].value}", file=sys.stderr)
    return time.perf_counter() - t0


def figure_load(figures: list[dict]) -> dict:
    """What the browser is asked to draw: figure JSON bytes, WebGL / SVG traces, points, annotations."""

    def points(t: dict) -> int:
        x = t.get("x")
        if isinstance(x, dict) and "bdata" in x:
            return len(x["bdata"]) * 3 // 4 // int(x["dtype"][1:])
        return len(x) if isinstance(x, list) else 0

    traces = [t for f in figures for t in f.get("data", [])]
    return {
        "kb": sum(len(json.dumps(f)) for f in figures) / 1e3,
        "gl": sum(t.get("type", "").endswith("gl") for t in traces),
        "svg": sum(not t.get("type", "").endswith("gl") for t in traces),
        "points": sum(points(t) for t in traces),
        "annotations": sum(len(f.get("layout", {}).get("annotations", [])) for f in figures),
    }


def main(argv: list[str] | None = None) -> None:
    import streamlit as st

    from normvar_core.viz.pages import PAGE_KEYS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--pages", default=",".join(PAGE_KEYS))
    ap.add_argument("--profile", default="", help="a page whose warm run is profiled (cProfile, top 25)")
    ap.add_argument("--repeat", type=int, default=1, help="warm runs per page (the median is shown)")
    args = ap.parse_args(argv)
    _instrument(profile=bool(args.profile))
    page_seconds("runs", args.run)  # imports and the app shell once, outside every page's numbers
    print(
        "| page | cold s | warm s | warm CPU s | sent KB | figure KB | WebGL / SVG traces | points | annotations |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    for key in [k for k in args.pages.split(",") if k]:
        st.cache_data.clear()
        st.cache_resource.clear()
        cold = page_seconds(key, args.run)
        warm, cpu = [], []
        for _ in range(max(args.repeat, 1)):
            warm.append(page_seconds(key, args.run))
            cpu.append(LAST["cpu"])
        warm.sort(), cpu.sort()
        f = figure_load(LAST["figures"])
        print(
            f"| {key} | {cold:.2f} | {warm[len(warm) // 2]:.2f} | {cpu[len(cpu) // 2]:.3f} | {LAST['bytes'] / 1e3:.0f} "
            f"| {f['kb']:.0f} | {f['gl']} / {f['svg']} | {f['points']:,} | {f['annotations']} |",
            flush=True,
        )
        if key == args.profile and LAST.get("profile") is not None:
            out = io.StringIO()
            pstats.Stats(LAST["profile"], stream=out).sort_stats("cumulative").print_stats(25)
            print(out.getvalue(), file=sys.stderr)


if __name__ == "__main__":
    main()
