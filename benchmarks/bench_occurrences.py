"""The Occurrences page's scatter at one million points in headless chromium: time to the first drawn frame,
then frame times while panning (mouse drags) and zooming (wheel), measured with requestAnimationFrame.

The page's own spec builder (``viz.occurrence_figures``: the same JSON ``st.pydeck_chart`` gets on the page)
draws N seeded points (a mixture of Gaussian clusters coloured by cluster, like token types) in a one-chart
Streamlit script served on 127.0.0.1; Playwright drives chromium (Debian's, software WebGL unless a GPU is
given) and records every frame interval during 3 s of panning and 3 s of zooming.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_occurrences.py [--points 1000000] [--gpu]

Prints the median / 90th percentile frame time and frames per second for each gesture, the build time of the
spec in Python and the time to the first frame, with the load average (noisy on a shared machine).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

SCRIPT = """
import sys, time
import numpy as np
import streamlit as st
sys.path.insert(0, {root!r})
from normvar_core.viz.occurrence_figures import deck_spec, PALETTE

@st.cache_resource
def spec(n):
    rng = np.random.default_rng(0)
    k = rng.integers(0, 10, n)
    centres = rng.normal(0, 4, (10, 2))
    xy = centres[k] + rng.normal(0, 1, (n, 2))
    t = time.perf_counter()
    s = deck_spec(xy[:, 0], xy[:, 1], PALETTE[k])
    return s, time.perf_counter() - t, len(s.to_json())

s, build, size = spec({n})
st.caption(f"build {{build:.2f}} s, {{size / 1e6:.1f}} MB")
st.pydeck_chart(s, height=700, key="bench")
"""

PROBE = """() => new Promise(resolve => {
    const t = []; let last = performance.now(); const end = last + %d;
    function tick(now) { t.push(now - last); last = now; if (now < end) requestAnimationFrame(tick); else resolve(t); }
    requestAnimationFrame(tick);
})"""


def _stats(frames: list[float]) -> dict:
    import numpy as np

    f = np.asarray(frames[1:] or [0.0])
    return {"frames": int(f.size), "median_ms": float(np.median(f)), "p90_ms": float(np.percentile(f, 90)),
            "fps": float(1000.0 / max(np.mean(f), 1e-9))}


def gesture(page, box, kind: str, seconds: float) -> dict:
    """Frame intervals while the mouse pans (drags back and forth) or zooms (wheel in and out)."""
    handle = page.evaluate_handle(PROBE % int(seconds * 1000))
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx, cy)
    t_end = time.monotonic() + seconds
    step = 0
    while time.monotonic() < t_end:
        if kind == "pan":
            page.mouse.down()
            for i in range(8):
                page.mouse.move(cx + (20 if step % 2 == 0 else -20) * (i + 1), cy + 5 * (i + 1))
            page.mouse.up()
            page.mouse.move(cx, cy)
        else:
            page.mouse.wheel(0, -120 if (step // 6) % 2 == 0 else 120)
            page.wait_for_timeout(30)
        step += 1
    return _stats(handle.json_value())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--gpu", action="store_true", help="let chromium use the GPU (default: software WebGL)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright
    from test_dashboard_browser import ARGS, CHROMIUM

    tmp = Path(tempfile.mkdtemp(prefix="bench-occ-"))
    script = tmp / "bench_app.py"
    script.write_text(SCRIPT.format(root=str(ROOT), n=args.points))
    port = 8600 + os.getpid() % 200
    log = open(tmp / "streamlit.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true",
                             "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--server.maxMessageSize", "1000", "--browser.gatherUsageStats", "false"],
                            stdout=log, stderr=subprocess.STDOUT)
    out = {"points": args.points, "load_before": os.getloadavg()}
    try:
        chrome_args = [a for a in ARGS if not (args.gpu and a == "--disable-gpu")]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=chrome_args)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            for _ in range(60):
                try:
                    page.goto(f"http://127.0.0.1:{port}/", timeout=5000)
                    break
                except Exception:  # noqa: BLE001 - the server is still starting
                    time.sleep(1)
            t0 = time.perf_counter()
            page.wait_for_selector("[data-testid=stDeckGlJsonChart] canvas", timeout=600000)
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            out["first_frame_s"] = time.perf_counter() - t0
            out["caption"] = page.get_by_text("build").first.inner_text()
            page.wait_for_timeout(2000)
            box = page.locator("[data-testid=stDeckGlJsonChart]").bounding_box()
            out["idle"] = _stats(page.evaluate(PROBE % 2000))
            out["pan"] = gesture(page, box, "pan", args.seconds)
            out["zoom"] = gesture(page, box, "zoom", args.seconds)
            out["renderer"] = page.evaluate("""() => { const c = document.createElement('canvas').getContext('webgl2');
                const e = c && c.getExtension('WEBGL_debug_renderer_info');
                return e ? c.getParameter(e.UNMASKED_RENDERER_WEBGL) : (c ? c.getParameter(c.RENDERER) : 'none'); }""")
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
