"""The Ray executor on a local Ray (CPU): driver memory with K actors, tokenization spread over them,
and equality with the single-process run.

1. **Driver peak RSS.** MiniLM on the first N sentences (default 600) of the shipped novels,
   ``--batch-size 16``, every default measure. One run with ``--executor local`` and one with
   ``--executor ray --workers K`` for each K (default 1, 2, 4), each in a fresh process whose own peak
   RSS (``ru_maxrss`` of the driver; Ray's processes are children and not counted) is reported, with
   the wall-clock seconds and the largest relative difference of token_stats and layer_geometry from
   the local run. With every range's partial state held until the end the issue measured 3.2 GB
   with 1 actor and 5.7 GB with 3; with one incoming partial held whole during a merge, 1.66 GB with 1
   and 1.98 GB with 4 (1.19x); the driver now merges in place one layer block at a time.
2. **Tokenization per actor.** ``RayPool.encode`` on the first M sentences (default 40,000): each of
   K actors tokenizes one contiguous share; reported: CPU seconds of each actor's share and that the
   merged encoding equals ``encode_sentences`` on the whole list (the path CSV takes).
3. **Byte ranges per actor.** The first M lines of the novels written to a temp ``.txt`` and the same
   as ``.jsonl`` (``{"text": line}``): the driver cuts the file (``ray_corpus.cut_for_actors``, its CPU
   seconds reported) and each of K actors parses, selects and tokenizes its range
   (``RayPool.read_corpus``; each actor's CPU seconds of the three phases, ``RayPool.read_cpu_s``,
   measured in the actor with ``time.process_time``); and that the sentences, counts and encoding
   equal ``load_sentences`` + ``encode_sentences`` in one process.

On a 2-core box the actors share the cores, so wall-clock time can only grow with K: what this
measures is memory, work per actor and exactness, not speed-up.

Usage: .venv/bin/python benchmarks/bench_ray.py [--sentences N] [--workers 1,2,4] [--tokenize M] [--ranges M]
(``--sentences 0``, ``--tokenize 0``, ``--ranges 0`` skip a part.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402  -- after the offline variables and sys.path above


def _one_run(executor: str, workers: int, sentences: int, batch_size: int, out: str) -> dict:
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.execute.local import compute_run
    from normvar_core.runs.reader import open_run

    cfg = RunConfig(
        model="minilm",
        max_sentences=sentences,
        batch_size=batch_size,
        device="cpu",
        name=f"bench-{executor}-{workers}",
        executor=executor,
        workers=workers if executor == "ray" else None,
    )
    t = time.perf_counter()
    path = compute_run(cfg, out)
    secs = time.perf_counter() - t
    notes = open_run(path).meta["notes"]
    return {
        "path": str(path),
        "seconds": secs,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "notes": {k: notes.get(k) for k in ("shards", "ray_workers", "tokenize_cpu_s")},
    }


def _frame(path: str, sql: str):
    import duckdb

    con = duckdb.connect(path, read_only=True)
    try:
        return con.sql(sql).df()
    finally:
        con.close()


def _max_rel(paths: tuple[str, str]) -> dict:
    out = {}
    for table, cols, order in (
        ("token_stats", ("n", "q", "m", "v"), "layer, token_id"),
        ("layer_geometry", ("anisotropy", "participation_ratio", "trace", "mean_cosine", "twonn_id"), "layer"),
    ):
        a, b = (_frame(p, f"SELECT * FROM {table} ORDER BY {order}") for p in paths)
        out[table] = max(float(np.max(np.abs(a[c] - b[c]) / np.maximum(np.abs(b[c]), 1e-300))) for c in cols)
    return out


def _tokenize(workers: int, sentences: int) -> dict:
    import ray

    from normvar_core.config import RunConfig
    from normvar_core.pipeline import encoding as E
    from normvar_core.pipeline.corpus.read import load_sentences
    from normvar_core.pipeline.execute.on_ray import RayPool
    from normvar_core.pipeline.models import load_model

    cfg = RunConfig(model="minilm", max_sentences=sentences, device="cpu", executor="ray", workers=workers)
    text = load_sentences(cfg).sentences
    tok = load_model(cfg).tokenizer
    pool = RayPool(cfg, None)
    try:
        t = time.perf_counter()
        got = pool.encode(text, max_length=512, unit="token")
        secs = time.perf_counter() - t
    finally:
        pool.close()
        ray.shutdown()
    t = time.process_time()
    whole = E.encode_sentences(text, tok, max_length=512)
    local_cpu = time.process_time() - t
    same = all(np.array_equal(getattr(got, f), getattr(whole, f)) for f in ("ids", "special", "starts", "lengths"))
    return {
        "cpu_s": pool.tokenize_cpu_s,
        "wall_s": secs,
        "local_cpu_s": local_cpu,
        "equal": same,
        "tokens": int(whole.ids.size),
    }


def _ranges(workers: int, corpus: str) -> dict:
    """Part 3 in one process: the Ray byte-range read against the one-process read and encoding."""
    import ray

    from normvar_core.config import RunConfig
    from normvar_core.pipeline import encoding as E
    from normvar_core.pipeline.corpus.read import load_sentences
    from normvar_core.pipeline.execute.on_ray import RayPool
    from normvar_core.pipeline.execute.ray_corpus import cut_for_actors
    from normvar_core.pipeline.models import load_model

    cfg = RunConfig(
        model="minilm",
        corpus=corpus,
        device="cpu",
        executor="ray",
        workers=workers,
        text_column="text" if corpus.endswith(".jsonl") else None,
    )
    loaded = load_model(cfg)
    max_length = int(cfg.max_length or loaded.info.max_length)
    pool = RayPool(cfg, None)
    try:
        t = time.process_time()
        pool.cut = cut_for_actors(cfg, None, len(pool.actors), pool.ray.put)
        cut_cpu = time.process_time() - t
        got = pool.read_corpus(cfg, None)
        _, used, enc = pool.encoded  # the actors' encoding of their ranges, kept for ``encode``
    finally:
        pool.close()
        ray.shutdown()
    t = time.process_time()
    want = load_sentences(cfg)
    whole = E.encode_sentences(want.sentences, loaded.tokenizer, max_length=max_length, unit=cfg.unit)
    local_cpu = time.process_time() - t
    counts = ("n_read", "n_sampled_out", "n_too_long", "n_capped", "sha256")
    same = (
        used == {(max_length, cfg.unit)}
        and got.sentences == want.sentences
        and all(getattr(got, c) == getattr(want, c) for c in counts)
        and all(np.array_equal(getattr(enc, f), getattr(whole, f)) for f in ("ids", "special", "starts", "lengths"))
    )
    return {
        "cpu_s": pool.read_cpu_s,
        "tokenize_cpu_s": pool.tokenize_cpu_s,
        "cut_cpu_s": cut_cpu,
        "local_cpu_s": local_cpu,
        "equal": bool(same),
        "sentences": len(want.sentences),
        "tokens": int(whole.ids.size),
    }


def _write_corpora(lines: int, folder: str) -> list[str]:
    """The first ``lines`` non-empty lines of the shipped novels as .txt and as .jsonl ({"text": line})."""
    import gzip

    from normvar_core.pipeline.corpus.formats import resolve_corpus_path

    with gzip.open(resolve_corpus_path(""), "rt", encoding="utf-8") as fh:
        text = [ln.rstrip("\n") for ln, _ in zip((x for x in fh if x.strip()), range(lines))]
    txt, jsonl = Path(folder, "novels.txt"), Path(folder, "novels.jsonl")
    txt.write_text("".join(ln + "\n" for ln in text), encoding="utf-8")
    jsonl.write_text("".join(json.dumps({"text": ln}) + "\n" for ln in text), encoding="utf-8")
    return [str(txt), str(jsonl)]


def _print_ranges(common: list, ks: list[int], lines: int) -> None:
    print(f"Byte-range corpus ({lines:,} novel lines), CPU seconds per actor (parse + select + tokenize)\n")
    print(
        "| corpus | actors | CPU s per actor (each range) | max | mean | of it tokenizing (max) | "
        "driver cut CPU s | equals one process |\n|---|---:|---|---:|---:|---:|---:|---|"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for corpus in _write_corpora(lines, tmp):
            for k in ks:
                t = _spawn(*common, "--child", "ranges", "--k", k, "--out", corpus)
                cpu = t["cpu_s"]
                print(
                    f"| {Path(corpus).suffix} | {k} | {', '.join(f'{x:.2f}' for x in cpu)} | {max(cpu):.2f} | "
                    f"{sum(cpu) / len(cpu):.2f} | {max(t['tokenize_cpu_s']):.2f} | {t['cut_cpu_s']:.3f} | "
                    f"{'yes' if t['equal'] else 'NO'} ({t['sentences']:,} sentences, {t['tokens']:,} tokens; "
                    f"one process {t['local_cpu_s']:.2f} s) |",
                    flush=True,
                )
    print(f"\nLoad average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} ({os.cpu_count()} cores)\n")


def _child(args) -> None:
    if args.child == "tokenize":
        print(json.dumps(_tokenize(args.k, args.tokenize)))
    elif args.child == "ranges":
        print(json.dumps(_ranges(args.k, args.out)))
    else:
        print(json.dumps(_one_run(args.child, args.k, args.sentences, args.batch_size, args.out)))


def _spawn(*argv) -> dict:
    res = subprocess.run(
        [sys.executable, __file__, *map(str, argv)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if res.returncode != 0:
        sys.exit(f"benchmark child failed: {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=600)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--tokenize", type=int, default=40_000, help="sentences for the tokenization measure (0: skip)")
    ap.add_argument("--ranges", type=int, default=40_000, help="novel lines for the byte-range measure (0: skip)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--k", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return _child(args)
    ks = [int(x) for x in args.workers.split(",")]
    common = ["--sentences", args.sentences, "--batch-size", args.batch_size, "--tokenize", args.tokenize]
    if args.tokenize:
        print(f"Tokenization of {args.tokenize:,} sentences (RayPool.encode), CPU seconds per actor\n")
        print("| actors | CPU s per actor (each share) | max | wall s | equals one process |\n|---:|---|---:|---:|---|")
        for k in ks:
            t = _spawn(*common, "--child", "tokenize", "--k", k)
            print(
                f"| {k} | {', '.join(f'{x:.2f}' for x in t['cpu_s'])} | {max(t['cpu_s']):.2f} | {t['wall_s']:.1f} | "
                f"{'yes' if t['equal'] else 'NO'} ({t['tokens']:,} tokens; one process {t['local_cpu_s']:.2f} s) |",
                flush=True,
            )
        print()
    if args.ranges:
        _print_ranges(common, ks, args.ranges)
    if not args.sentences:
        return
    with tempfile.TemporaryDirectory() as tmp:
        local = _spawn(*common, "--child", "local", "--out", tmp)
        rays = {k: _spawn(*common, "--child", "ray", "--k", k, "--out", tmp) for k in ks}
        diffs = {k: _max_rel((r["path"], local["path"])) for k, r in rays.items()}
    print(f"MiniLM, {args.sentences} sentences, --batch-size {args.batch_size}, {os.cpu_count()} cores, CPU\n")
    print("| executor | driver peak RSS (MB) | seconds | max rel. diff vs local |\n|---|---:|---:|---|")
    print(f"| local | {local['peak_rss_mb']:,.0f} | {local['seconds']:.1f} | — |")
    for k, r in rays.items():
        d = diffs[k]
        print(
            f"| ray, {k} actor{'s' if k > 1 else ''} | {r['peak_rss_mb']:,.0f} | {r['seconds']:.1f} | "
            f"token_stats {d['token_stats']:.1e}, layer_geometry {d['layer_geometry']:.1e} |"
        )
    base = rays[ks[0]]["peak_rss_mb"]
    print(
        "\nDriver peak RSS relative to 1 actor: "
        + ", ".join(f"{k} actors {r['peak_rss_mb'] / base:.2f}" for k, r in rays.items())
    )


if __name__ == "__main__":
    main()
