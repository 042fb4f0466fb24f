"""`normvar compute` versus a bare forward pass with output_hidden_states over the same batches.

MiniLM (the embedded default) on the first N sentences (default 5,000) of the shipped novels.
"bare" = tokenize with batches.make_batches, then model(**batch, output_hidden_states=True) for
every batch and nothing else. "compute" = compute_run end to end (corpus, model load, counting,
exact moments, PCA samples, writing the DuckDB file); its "loop" row is the batch loop alone
(extract + TokenMoments.update + sample gathering). Target: compute / bare <= 1.15.
Both wall-clock and process CPU seconds (all threads; robust when other jobs share the cores)
are reported. Prints a markdown table. Usage: .venv/bin/python benchmarks/bench_compute.py [--sentences N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline import batches as B
from normvar_core.pipeline.corpus.read import load_sentences
from normvar_core.pipeline.execute.local import compute_run
from normvar_core.pipeline.execute.progress import Progress
from normvar_core.pipeline.models import load_model


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _d(a, b) -> tuple[float, float]:
    return b[0] - a[0], b[1] - a[1]


def bare(cfg: RunConfig, data_dir: str) -> dict:
    t0 = _now()
    corpus = load_sentences(cfg, data_dir)
    loaded = load_model(cfg, data_dir)
    batches, _ = B.make_batches(
        corpus.sentences,
        loaded.tokenizer,
        max_length=cfg.max_length or loaded.info.max_length,
        batch_size=cfg.batch_size,
        max_tokens=B.auto_max_tokens(loaded.device.type),
    )
    t2 = _now()
    model = loaded.model
    n_tok = 0
    with torch.inference_mode():
        for b in batches:
            ids = torch.as_tensor(b.input_ids).to(loaded.device)
            att = torch.as_tensor(b.attention_mask).to(loaded.device)
            out = model(input_ids=ids, attention_mask=att, output_hidden_states=True)
            n_tok += int(att.sum())
            del out
    t3 = _now()
    return {"forward": _d(t2, t3), "total": _d(t0, t3), "tokens": n_tok, "batches": len(batches)}


def compute(cfg: RunConfig, data_dir: str) -> dict:
    marks: dict[str, float] = {}

    def progress(p: Progress) -> None:
        marks.setdefault(p.stage, _now())

    t0 = _now()
    path = compute_run(cfg, data_dir, progress=progress, overwrite=True)
    t1 = _now()
    size = path.stat().st_size
    return {
        "total": _d(t0, t1),
        "loop": _d(marks["compute"], marks["write"]),
        "write": _d(marks["write"], marks["done"]),
        "file_mb": size / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=None)
    args = ap.parse_args()
    cfg = RunConfig(model="minilm", max_sentences=args.sentences, batch_size=args.batch_size, name="bench")
    data_dir = tempfile.mkdtemp(prefix="normvar-bench-")
    load0 = os.getloadavg()[0]
    bare(cfg.replace(max_sentences=200), data_dir)  # warm-up (imports, numba compile cache)
    compute(cfg.replace(max_sentences=200), data_dir)
    b_runs, c_runs = [], []
    for _ in range(args.repeat):  # interleaved, best of R
        b_runs.append(bare(cfg, data_dir))
        c_runs.append(compute(cfg, data_dir))

    def best(runs, key, i):
        return min(r[key][i] for r in runs)

    print(
        f"MiniLM, {args.sentences:,} sentences of the shipped novels, {b_runs[0]['batches']} batches, "
        f"{b_runs[0]['tokens']:,} tokens, torch threads {torch.get_num_threads()}, best of {args.repeat} "
        f"(interleaved), load average before/after {load0:.1f}/{os.getloadavg()[0]:.1f}\n"
    )
    print("| measurement | wall s | ratio | CPU s | ratio |")
    print("|---|---:|---:|---:|---:|")
    rows = [
        ("bare forward (output_hidden_states), batch loop", b_runs, "forward", b_runs, "forward"),
        ("compute batch loop (extract + exact moments + samples)", c_runs, "loop", b_runs, "forward"),
        ("bare end to end (load corpus + model, tokenize, forward)", b_runs, "total", b_runs, "total"),
        (
            f"compute end to end (+ counting, moments, samples, write {c_runs[0]['file_mb']:.0f} MB file)",
            c_runs,
            "total",
            b_runs,
            "total",
        ),
    ]
    for label, runs, key, ref, rkey in rows:
        w, c = best(runs, key, 0), best(runs, key, 1)
        print(f"| {label} | {w:.2f} | {w / best(ref, rkey, 0):.2f} | {c:.2f} | {c / best(ref, rkey, 1):.2f} |")
    print(f"| of which: writing the run file | {best(c_runs, 'write', 0):.2f} | | {best(c_runs, 'write', 1):.2f} | |")


if __name__ == "__main__":
    main()
