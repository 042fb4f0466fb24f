"""The "Layer by Layer" measures' own cost (prompt entropy, dataset entropy, curvature) against the forward pass,
in one process on one thread (CPU time of the thread: steadier than wall time when other jobs share the cores).

MiniLM over ``--sentences`` of the shipped novels: the batches the run's source gives are fed to each measure
alone; the thread's CPU seconds are summed separately for the source's step (tokenized batch → forward pass → the
counted states: the bare forward pass) and for each measure's hooks (``begin_batch``, ``update_layer`` of every
layer, ``end_batch``) and its ``result()``. A measure is on by default when its cost is at most 0.03× the forward
pass (docs/benchmarks.md).

Prints one markdown table. Usage: .venv/bin/python benchmarks/bench_layer_by_layer.py [--sentences 300]
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
    ap.add_argument("--sentences", type=int, default=300)
    args = ap.parse_args()

    import torch

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.execute.prepare import prepare
    from normvar_core.pipeline.measures.curvature import CurvatureMeasure
    from normvar_core.pipeline.measures.dataset_entropy import DatasetEntropyMeasure
    from normvar_core.pipeline.measures.layerview import update_layer_major
    from normvar_core.pipeline.measures.prompt_entropy import PromptEntropyMeasure

    torch.set_num_threads(1)
    cfg = RunConfig(model="minilm", max_sentences=args.sentences, occurrences=0)
    setup = prepare(cfg, tempfile.mkdtemp())
    measures = [cls(setup.ctx) for cls in (PromptEntropyMeasure, DatasetEntropyMeasure, CurvatureMeasure)]
    spent = {"forward": 0.0, **{m.name: 0.0 for m in measures}}
    tokens = 0
    for sb in timed_batches(setup, spent):
        tokens += sb.size
        for m in measures:
            t = time.thread_time()
            update_layer_major([m], sb)
            spent[m.name] += time.thread_time() - t
    for m in measures:
        t = time.thread_time()
        m.result()
        spent[m.name] += time.thread_time() - t
    L, d = setup.ctx.num_layers, setup.ctx.dim
    print(
        f"MiniLM, {args.sentences:,} sentences, {tokens:,} embeddings, L = {L}, d = {d}, one thread "
        f"(load {os.getloadavg()[0]:.1f})\n"
    )
    print("| part | CPU s | × forward |\n|---|---|---|")
    for k, v in spent.items():
        print(f"| {k} | {v:.3f} | {v / spent['forward']:.4f} |")


if __name__ == "__main__":
    main()
