"""The end-of-run TwoNN time against the size of the run (issue 33), MiniLM on the shipped novels.

One process per call: the plan, then one pass in which only the geometry measure is fed; prints the
seconds of the forward pass (the source's batches), of the geometry's updates (the covariance etc. and,
since issue 33, the neighbour search of the sampled rows as they arrive: "search during the pass") and
of its ``result()`` (the end of the run: spectra, seed 004's batches, TwoNN), with the sample size and the
load average. Run it on an older tree (PYTHONPATH) for the "before" figures.
Usage: .venv/bin/python benchmarks/bench_twonn_end.py [--sentences 600,3000] [--id-sample 16384]
"""

from __future__ import annotations

import argparse
import os
import time


def one(n: int, id_sample: int) -> str:
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.execute.prepare import prepare
    from normvar_core.pipeline.measures.geometry import GeometryMeasure

    cfg = RunConfig(model="minilm", max_sentences=n, samples_per_token=0, id_sample=id_sample, self_similarity="off")
    setup = prepare(cfg)
    plan, source, ctx = setup.plan, setup.source, setup.ctx
    geo = GeometryMeasure(ctx)
    search = [0.0]
    nb = getattr(geo, "neighbours", None)
    if nb is not None:  # since issue 33: the neighbour search during the pass
        arrive = nb.arrive

        def timed(*a, **k):
            t = time.perf_counter()
            arrive(*a, **k)
            search[0] += time.perf_counter() - t

        nb.arrive = timed
    forward = update = 0.0
    it = source.batches(plan, 0, plan.n_batches)
    while True:
        t = time.perf_counter()
        sb = next(it, None)
        forward += time.perf_counter() - t
        if sb is None:
            break
        t = time.perf_counter()
        geo.update(sb)
        update += time.perf_counter() - t
    t = time.perf_counter()
    rows = geo.result()["rows"]
    end = time.perf_counter() - t
    k, b = rows[0]["id_sample"], rows[0]["twonn_batches"]
    return (
        f"| {n:,} | {int(plan.counts.sum()):,} | {k:,} in {b} | {forward:.1f} | {update - search[0]:.1f} | "
        f"{search[0]:.1f} | {end:.1f} | {os.getloadavg()[0]:.1f} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", default="600,3000")
    ap.add_argument("--id-sample", type=int, default=16384)
    args = ap.parse_args()
    print(
        "| sentences | embeddings / layer | TwoNN sample (batches) | forward (s) | geometry updates (s) | "
        "search during the pass (s) | end of run: result() (s) | load |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.sentences.split(",")):
        print(one(n, args.id_sample), flush=True)


if __name__ == "__main__":
    main()
