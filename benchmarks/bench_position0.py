"""The cost of the run without its first position (``position0``) beside the geometry it shares its layer views
with, against the forward pass, in one process on one thread (CPU time of the thread).

``--model`` over ``--sentences`` of the shipped novels: each batch the run's source gives is fed to the geometry
alone and to the geometry with ``position0`` (alternately first, the first batch uncounted, so neither pays a cold
cache), each on its own measures; the thread's CPU seconds of the forward pass (the source's step), of each and of
``position0.result()`` are summed. ``position0``'s cost is the difference: what it adds to a run that holds the
geometry (its n₀ rows' Gram, the backward update and Chan's pooling of a d × d per layer and batch). A measure is on
by default when its cost is at most 0.03× the forward pass (docs/benchmarks.md).

Prints one markdown table. Usage: .venv/bin/python benchmarks/bench_position0.py [--model minilm] [--sentences 300]
[--batch-size 32]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from thread_time import timed_batches

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--sentences", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=32, help="sentences a batch (the first one warms up, uncounted)")
    args = ap.parse_args()

    import torch

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.execute.prepare import prepare
    from normvar_core.pipeline.measures.geometry import GeometryMeasure
    from normvar_core.pipeline.measures.layerview import update_layer_major
    from normvar_core.pipeline.measures.position0 import Position0Measure

    torch.set_num_threads(1)
    cfg = RunConfig(
        model=args.model, max_sentences=args.sentences, batch_size=args.batch_size, occurrences=0, device="cpu"
    )
    setup = prepare(cfg, tempfile.mkdtemp())
    alone = [GeometryMeasure(setup.ctx)]
    both = [GeometryMeasure(setup.ctx), Position0Measure(setup.ctx)]
    spent = {"forward": 0.0, "geometry": 0.0, "geometry + position0": 0.0}
    tokens = batches = 0
    for sb in timed_batches(setup, spent):
        tokens += sb.size
        runs = [("geometry", alone), ("geometry + position0", both)]
        for name, measures in runs if batches % 2 == 0 else runs[::-1]:
            t = time.thread_time()
            update_layer_major(measures, sb)
            if batches:  # the first batch warms both up, uncounted
                spent[name] += time.thread_time() - t
        batches += 1
    t = time.thread_time()
    both[1].result()
    result = time.thread_time() - t
    added = spent["geometry + position0"] - spent["geometry"] + result
    L, d = setup.ctx.num_layers, setup.ctx.dim
    print(
        f"{args.model}, {args.sentences:,} sentences, {tokens:,} embeddings, L = {L}, d = {d}, one thread "
        f"(load {os.getloadavg()[0]:.1f})\n"
    )
    print("| part | CPU s | × forward |\n|---|---|---|")
    for k, v in {**spent, "position0.result()": result, "position0 added": added}.items():
        print(f"| {k} | {v:.3f} | {v / spent['forward']:.4f} |")


if __name__ == "__main__":
    main()
