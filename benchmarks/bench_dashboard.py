"""Dashboard responsiveness: widget changes on the Trade-off page (and others) for a synthetic run of
30k token types x 25 layers, timed with Streamlit's AppTest (server side: the script rerun, cached
reads, figure building and serialization; the browser's WebGL drawing is not included).

    .venv/bin/python benchmarks/bench_dashboard.py [--types 30000] [--layers 25] [--dim 16] [--repeat 5]

Prints a markdown table for docs/benchmarks.md. Each "cold" row is the first time a value is seen (cache miss:
the analysis runs); "warm" rows revisit values already cached.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # runfiles.write_run


def synthetic_run(data_dir: Path, T: int, L: int, d: int, seed: int = 0) -> str:
    """A run file with a per-layer trade-off structure (Zipf counts, Q_t ~ const, M_t falling with n_t)."""
    from runfiles import write_run

    from normvar_core.stats.tokenstats import TokenStats

    rng = np.random.default_rng(seed)
    n = np.maximum(1, (3e6 / np.arange(1, T + 1) ** 1.1 * rng.uniform(0.5, 1.5, T))).astype(np.int64)
    logn = np.log10(n)
    mean = np.empty((L, T, d), np.float32)
    s = np.empty((L, T))
    for l in range(L):
        depth = l / (L - 1)
        q = 100 * (1 + 2 * depth) * (1 + (0.02 + 0.4 * abs(depth - 0.5)) * rng.standard_normal(T)).clip(0.2)
        f = (0.2 + 0.5 * depth - 0.06 * logn + 0.05 * rng.standard_normal(T)).clip(0.02, 0.98)
        dirs = rng.standard_normal((T, d))
        dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
        mean[l] = dirs * np.sqrt(f * q)[:, None]
        s[l] = (q - f * q) * n
    stats = TokenStats.from_moments(np.arange(T, dtype=np.int64), n, mean.astype(np.float64), s)
    name = f"synthetic-{T // 1000}k-x{L}"
    meta = dict(
        model="synthetic",
        architecture="Synthetic",
        norm_placement="post",
        num_layers=L - 1,
        dim=d,
        layers=list(range(L)),
        corpus_name="synthetic",
        n_sentences=int(n.sum() // 15),
    )
    write_run(
        data_dir / "runs" / f"{name}.duckdb",
        meta=meta,
        stats=stats,
        tokens=[f"tok{i}" for i in range(T)],
        sentence_lengths=rng.integers(1, 64, 10_000),
        samples=None,
        overwrite=True,
    )
    return name


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", type=int, default=30_000)
    ap.add_argument("--layers", type=int, default=25)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from streamlit.testing.v1 import AppTest

    rows: list[tuple[str, str, list[float], str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        t0 = time.perf_counter()
        name = synthetic_run(data, args.types, args.layers, args.dim)
        build_s = time.perf_counter() - t0
        os.environ["NORMVAR_DATA"] = str(data)
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        at.query_params["run"] = name
        first = timed(at.run)
        open_tradeoff = timed(lambda: at.switch_page("views/tradeoff.py").run())
        assert not at.exception, [e.value for e in at.exception]
        spec = at.get("plotly_chart")[0].proto.spec
        x = json.loads(spec)["data"][0]["x"]
        n_points = (
            np.frombuffer(base64.b64decode(x["bdata"]), dtype=np.dtype(x["dtype"])).size
            if isinstance(x, dict)
            else len(x)
        )
        rows.append(("Trade-off", "open page (run load + first figure)", [open_tradeoff], "cold"))

        layers = list(range(args.layers))
        cold, warm = [], []
        for i in range(args.repeat):
            cold.append(
                timed(lambda i=i: at.select_slider(key="w_layer").set_value(layers[(i * 7 + 1) % len(layers)]).run())
            )
        for i in range(args.repeat):
            warm.append(
                timed(lambda i=i: at.select_slider(key="w_layer").set_value(layers[(i * 7 + 1) % len(layers)]).run())
            )
        rows.append(("Trade-off", "layer slider", cold, "cold"))
        rows.append(("Trade-off", "layer slider", warm, "warm"))
        bands = [(1.0 + 0.1 * i, 5.0 - 0.1 * i) for i in range(1, args.repeat + 1)]
        cold = [timed(lambda b=b: at.slider(key="w_band").set_value(b).run()) for b in bands]
        warm = [timed(lambda b=b: at.slider(key="w_band").set_value(b).run()) for b in bands]
        rows.append(("Trade-off", "band slider", cold, "cold"))
        rows.append(("Trade-off", "band slider", warm, "warm"))
        tok = [
            timed(lambda s=s: at.text_input(key="w_tokens").set_value(s).run())
            for s in ("tok1", "tok1,tok20", "tok1,tok20,tok300", "tok5", "")[: args.repeat]
        ]
        rows.append(("Trade-off", "token search", tok, "–"))
        assert not at.exception, [e.value for e in at.exception]
        for page in ("layers", "decomposition", "frequency"):
            t_open = timed(lambda p=page: at.switch_page(f"views/{p}.py").run())
            cold = [
                timed(lambda b=b: at.slider(key="w_band").set_value(b).run())
                for b in [(1.2 + 0.1 * i, 4.6) for i in range(args.repeat)]
            ]
            assert not at.exception, [e.value for e in at.exception]
            label = page.capitalize()
            rows.append((label, "open page", [t_open], "–"))
            rows.append((label, "band slider", cold, "cold" if page == "layers" else "warm/cold mix"))

    print(
        f"Synthetic run: {args.types:,} token types × {args.layers} layers (d = {args.dim}); "
        f"{n_points:,} points in the default band; built in {build_s:.1f} s; app start {first:.2f} s.\n"
    )
    print("| page | widget change | cache | median (s) | max (s) | n |")
    print("|---|---|---|---:|---:|---:|")
    for page, what, ts, cache in rows:
        print(f"| {page} | {what} | {cache} | {statistics.median(ts):.3f} | {max(ts):.3f} | {len(ts)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
