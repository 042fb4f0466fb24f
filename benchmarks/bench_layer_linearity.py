"""The layer linearity measure's own cost against the forward pass, in one process on one thread (CPU time of the
thread: steadier than wall time when other jobs share the cores).

The default run's measures (MiniLM over ``--sentences`` of the shipped novels) are fed the batches the run's
source gives; the thread's CPU seconds are summed separately for

* the source's step (tokenized batch → forward pass → the counted states): the forward pass;
* the layer linearity measure's ``update_layer`` calls, after the geometry and the halves have computed the
  shared layer view (centring, Gram products): its marginal cost in a default run — the cross-scatter's Gram
  product per pair, the Chan updates, and the halves' split it asks of the views;
* the other layer-major measures' updates (for scale).

Prints one markdown table and the ratio linearity / forward.
Usage: .venv/bin/python benchmarks/bench_layer_linearity.py [--sentences 3000]
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
    ap.add_argument("--sentences", type=int, default=3000)
    args = ap.parse_args()

    import torch

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.execute.partials import build_measures
    from normvar_core.pipeline.execute.prepare import prepare
    from normvar_core.pipeline.measures.layerview import LayerMajor, update_layer_major
    from normvar_core.stats.layer_linearity import MEASURE

    torch.set_num_threads(1)
    setup = prepare(RunConfig(model="minilm", max_sentences=args.sentences, occurrences=0), tempfile.mkdtemp())
    measures = build_measures(setup.ctx)
    layered = [m for m in measures.values() if isinstance(m, LayerMajor)]
    spent = {"forward": 0.0, "linearity": 0.0, "others": 0.0}
    lin = measures[MEASURE]
    inner = lin.update_layer

    def timed(l, view, batch):
        t = time.thread_time()
        inner(l, view, batch)
        spent["linearity"] += time.thread_time() - t

    lin.update_layer = timed
    tokens = 0
    for sb in timed_batches(setup, spent):
        tokens += sb.size
        t = time.thread_time()
        update_layer_major(layered, sb)
        spent["others"] += time.thread_time() - t
    spent["others"] -= spent["linearity"]
    L, d = setup.ctx.num_layers, setup.ctx.dim
    print(
        f"MiniLM, {args.sentences:,} sentences, {tokens:,} embeddings, L = {L}, d = {d}, one thread "
        f"(load {os.getloadavg()[0]:.1f})\n"
    )
    print("| part | CPU s | × forward |\n|---|---|---|")
    for k, v in spent.items():
        print(f"| {k} | {v:.2f} | {v / spent['forward']:.3f} |")


if __name__ == "__main__":
    main()
