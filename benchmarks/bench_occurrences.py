"""The Occurrences page's scatter at one million points in headless chromium: time to the first drawn frame,
then frame times while panning (mouse drags) and zooming (wheel), measured with requestAnimationFrame.

The page's own component (``views/_scatter_gl.py``: the hand-written WebGL scatter, gl.POINTS, and the same
bytes ``occurrence_figures.scatter_payload`` makes on the page) draws N seeded points (a mixture of Gaussian
clusters coloured by cluster, like token types) in a one-chart Streamlit script served on 127.0.0.1;
Playwright drives chromium (Debian's, software WebGL unless a GPU is given) and records every frame interval
during 3 s of panning and 3 s of zooming.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_occurrences.py [--points 1000000] [--gpu]

Prints, per gesture, the requestAnimationFrame intervals and the component's redraws (how many, and each one's
time up to a one-pixel readPixels, i.e. with the GPU — software WebGL here — done), the build time of the
payload in Python and the time to the first frame, with the load average (noisy on a shared machine).
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
from normvar_core.viz.occurrence_figures import PALETTE, points_block, scatter_payload
from views._scatter_gl import scatter

@st.cache_resource
def payload(n):
    rng = np.random.default_rng(0)
    k = rng.integers(0, 10, n)
    centres = rng.normal(0, 4, (10, 2))
    xy = centres[k] + rng.normal(0, 1, (n, 2))
    t = time.perf_counter()
    raw = scatter_payload(xy[:, 0], xy[:, 1], points_block(xy[:, 0], xy[:, 1], PALETTE[k]), height=700)
    return raw, time.perf_counter() - t

raw, build = payload({n})
st.caption(f"build {{build:.2f}} s, {{len(raw) / 1e6:.1f}} MB")
scatter(data=raw, key="bench", height=740, on_picked_change=lambda: None, on_selection_change=lambda: None)
"""

HOOK = """() => {
  // the component's state (host.__nv): from now on each redraw is timed up to a one-pixel readPixels, which
  // waits for the GPU (software here) to finish the frame: the time a frame really takes
  // the component lives in a shadow root (Streamlit isolates its styles)
  const roots = [document, ...[...document.querySelectorAll('*')].filter(e => e.shadowRoot).map(e => e.shadowRoot)];
  const host = roots.map(r => r.querySelector('.nv-scatter')).find(Boolean);
  if (!host || !host.__nv) return false;
  window.__nvTimed = true;
  window.__nv = host.__nv;
  return true;
}"""

STEPS = 16
"""Mouse moves per drag (``--steps``): with software WebGL at 1M points a redraw takes tens of seconds, and a
move waits for the one before it."""

PROBE = """() => new Promise(resolve => {
    window.__nv.draws = [];
    const t = []; let last = performance.now(); const end = last + %d;
    function tick(now) { t.push(now - last); last = now; if (now < end) requestAnimationFrame(tick);
                         else resolve({frames: t, draws: window.__nv.draws.slice()}); }
    requestAnimationFrame(tick);
})"""


def _stats(probe: dict, seconds: float) -> dict:
    """rAF frame intervals (median, p90, frames per second) and the component's redraws (count, per second, median
    and p90 of their time with the GPU finished)."""
    import numpy as np

    f = np.asarray(probe["frames"][1:] or [0.0])
    d = np.asarray(probe["draws"] or [np.nan])
    return {
        "frames": int(f.size),
        "frame_median_ms": float(np.median(f)),
        "frame_p90_ms": float(np.percentile(f, 90)),
        "fps": float(1000.0 / max(np.mean(f), 1e-9)),
        "redraws": int(len(probe["draws"])),
        "redraws_per_s": float(len(probe["draws"]) / seconds),
        "redraw_median_ms": float(np.nanmedian(d)),
        "redraw_p90_ms": float(np.nanpercentile(d, 90)),
    }


EXPLAIN = """() => {
  // where a frame's time goes: the same redraw (every point on screen, as panned) 5 times each with the points
  // as drawn, while moving (every k-th point), at 1 px, with every point off screen (vertex work only: nothing
  // rasterised) and with no point
  const s = window.__nv, v = {...s.view}, n = s.n, out = {};
  const median = (f) => { s.draws = []; for (let i = 0; i < 5; i++) { f(); s.drawNow(); }
                          const d = s.draws.slice().sort((a, b) => a - b); return d[2]; };
  out.as_drawn_ms = median(() => {});
  out.moving_ms = median(() => { s.moving = true; });  // every k-th point, as while panning or zooming
  s.moving = false;
  out.point_1px_ms = median(() => { s.px = 1; });
  s.px = null;
  out.all_clipped_ms = median(() => { s.view = {...v, cx: v.cx + 1e6 / v.ppu}; });
  s.view = {...v};
  out.no_points_ms = median(() => { s.n = 0; });
  s.n = n; s.drawNow();
  return out;
}"""


def gesture(page, box, kind: str, seconds: float) -> dict:
    """Frame intervals while the mouse pans (drags back and forth) or zooms (wheel in and out); "moved": the
    chart's pixels changed (the gesture reached the component)."""
    chart = page.locator(".nv-stage")
    before = chart.screenshot()
    assert page.evaluate(HOOK), "the component was not found"
    # started, not awaited (an evaluate of a promise waits for it): the gesture runs while it records
    page.evaluate(f"() => {{ window.__probe = ({PROBE % int(seconds * 1000)})(); return 1; }}")
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx, cy)
    t_end = time.monotonic() + seconds
    step = 0
    while time.monotonic() < t_end:
        if kind == "pan":
            page.mouse.down()
            sign = 1 if step % 2 == 0 else -1
            page.mouse.move(cx + sign * 160, cy + sign * 60, steps=STEPS)
            page.mouse.up()
            page.mouse.move(cx, cy)
        else:
            page.mouse.wheel(0, -120 if (step // 6) % 2 == 0 else 120)
            page.wait_for_timeout(30)
        step += 1
    out = _stats(page.evaluate("() => window.__probe"), seconds)
    if kind == "pan":  # leave the view off its start, so the screenshot shows whether it moved
        page.mouse.move(cx, cy)
        page.mouse.down()
        page.mouse.move(cx + 150, cy + 90, steps=2)
        page.mouse.up()
    else:
        page.mouse.wheel(0, -240)
    page.wait_for_timeout(1500)
    out["moved"] = chart.screenshot() != before
    return out


def main() -> None:
    global STEPS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--steps", type=int, default=STEPS, help="mouse moves per drag")
    ap.add_argument("--gpu", action="store_true", help="let chromium use the GPU (default: software WebGL)")
    args = ap.parse_args()
    STEPS = args.steps
    from browser_helpers import ARGS, CHROMIUM
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="bench-occ-"))
    script = tmp / "bench_app.py"
    script.write_text(SCRIPT.format(root=str(ROOT), n=args.points))
    port = 8600 + os.getpid() % 200
    log = open(tmp / "streamlit.log", "w")
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
            "--server.maxMessageSize",
            "1000",
            "--browser.gatherUsageStats",
            "false",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
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
                except Exception:
                    time.sleep(1)
            t0 = time.perf_counter()
            page.wait_for_selector(".nv-scatter[data-frames]", timeout=600000, state="attached")
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            out["first_frame_s"] = time.perf_counter() - t0
            out["caption"] = page.get_by_text("build").first.inner_text()
            page.wait_for_timeout(2000)
            box = page.locator(".nv-stage").bounding_box()
            out["hooked"] = page.evaluate(HOOK)
            out["idle"] = _stats(page.evaluate(PROBE % 2000), 2.0)
            out["pan"] = gesture(page, box, "pan", args.seconds)
            out["zoom"] = gesture(page, box, "zoom", args.seconds)
            page.locator("button[data-act=reset]").click()
            page.wait_for_timeout(500)
            out["explain"] = page.evaluate(EXPLAIN)
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
