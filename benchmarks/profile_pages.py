"""Server time of every dashboard page, without a browser: each page run through Streamlit's AppTest
cold (Streamlit's caches cleared; the modules already imported) and warm (the same process, caches
filled). ``bench_pages.py`` gives the times in a browser; the difference is the browser's share.

    NORMVAR_DATA=DIR .venv/bin/python benchmarks/profile_pages.py --run NAME [--pages a,b]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def page_seconds(key: str, run: str) -> float:
    """Seconds of one AppTest run of app.py followed by the page ``key`` (``?run=run``)."""
    from streamlit.testing.v1 import AppTest

    from normvar_core.viz.pages import PAGES

    file = next(p.file for p in PAGES if p.key == key)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params.update({"run": run})
    t0 = time.perf_counter()
    at.run()
    at.switch_page(f"views/{file}").run()
    if at.exception:
        print(f"{key}: {at.exception[0].value}", file=sys.stderr)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    import streamlit as st

    from normvar_core.viz.pages import PAGE_KEYS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--pages", default=",".join(PAGE_KEYS))
    args = ap.parse_args(argv)
    page_seconds("runs", args.run)  # imports and the app shell once, outside every page's numbers
    print("| page | cold s | warm s |\n|---|---:|---:|")
    for key in [k for k in args.pages.split(",") if k]:
        st.cache_data.clear()
        st.cache_resource.clear()
        cold = page_seconds(key, args.run)
        warm = page_seconds(key, args.run)
        print(f"| {key} | {cold:.2f} | {warm:.2f} |", flush=True)


if __name__ == "__main__":
    main()
