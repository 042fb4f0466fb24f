"""`make bench-gpu`: the cost of every streamed measure on a CUDA GPU, per scatter dtype.

For MiniLM, MPNet and SmolLM2 (those installed; the shipped novels) and for random-init models of the
bert-base and Llama-7B shapes (Zipf-distributed synthetic token ids, ``run_plan.synthetic_plan``), in bf16:

* bare   = ``model(..., output_hidden_states=True)`` over the plan's batches, nothing else;
* compute = the same forward passes through every measure of a default run (moments, samples,
  geometry, self-similarity, outliers; ``execute.run_range``) plus their results (spectra, TwoNN on
  the device, seed 004's batches) — the write, on the host, is left out — once per scatter dtype
  (float64, float32).

Reports compute / bare, embeddings per second of the compute, peak GPU memory (``max_memory_allocated``)
and what ``--scatter-dtype auto`` picks on this GPU; prints a markdown table (docs/benchmarks.md). Then the multi-GPU
section (``bench_multigpu.py``): a device-mapped Llama-7B shape over every visible GPU against one GPU, seconds
and the peak memory of each GPU (one line when fewer than two GPUs are visible). Without a CUDA GPU it prints one
line and exits 0 (CI runs it that way).
Usage: .venv/bin/python benchmarks/bench_gpu.py [--sentences N] [--llama-sentences M] [--only NAME,...]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

import torch  # noqa: E402

SCATTER = ("float64", "float32")
DEVICE = torch.device("cuda")


def _sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def _reset_peak() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _peak_gb() -> float:
    if DEVICE.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**30
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # the process's peak RSS (Linux: KiB)


class _ModelSource:
    """StateBatches from a model already on the GPU (the synthetic shapes: no tokenizer, no files)."""

    def __init__(self, model, layers):
        self.loaded = SimpleNamespace(model=model, extra={})
        self.layers = list(layers)

    def batches(self, plan, start, stop):
        from normvar_core.pipeline import batches as B
        from normvar_core.pipeline.contracts import StateBatch
        from normvar_core.pipeline.sources import positions_of

        for bi in range(start, stop):
            b = plan.batches[bi]
            states, ids = B.extract(self.loaded, b, layers=self.layers, **plan.exclusions)
            sent, pos = positions_of(b, B.counted_mask(b, **plan.exclusions))
            yield StateBatch(index=bi, states=states, token_ids=ids, sentence_ids=sent, positions=pos)


def bare(model, plan) -> float:
    dev = next(model.parameters()).device
    _sync()
    t0 = time.perf_counter()
    with torch.inference_mode():
        for b in plan.batches:
            out = model(input_ids=b.input_ids.to(dev, non_blocking=True),
                        attention_mask=b.attention_mask.to(dev, non_blocking=True), output_hidden_states=True)
            del out
    _sync()
    return time.perf_counter() - t0


def compute(source, plan, ctx) -> dict:
    """Every measure over every batch, then their results; seconds, embeddings, peak memory."""
    from normvar_core.pipeline.execute.partials import build_measures, run_range

    _reset_peak()
    _sync()
    t0 = time.perf_counter()
    measures = build_measures(ctx)
    run_range(source, plan, measures, 0, plan.n_batches)
    _sync()
    t1 = time.perf_counter()
    for measure in measures.values():
        measure.result()
    _sync()
    t2 = time.perf_counter()
    n = int(measures["moments"].n_embeddings)
    return {"loop": t1 - t0, "finalize": t2 - t1, "total": t2 - t0, "embeddings": n,
            "peak_gb": _peak_gb(), "accs": ",".join(measures)}


def real_model(alias: str, n: int, rows: list) -> None:
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.models import alias_installed
    from normvar_core.pipeline.execute.prepare import prepare

    if not alias_installed(alias):
        rows.append((alias, "not installed (make models)", "", "", "", "", "", ""))
        return
    base = RunConfig(model=alias, max_sentences=n, device=DEVICE.type, dtype="bfloat16" if DEVICE.type == "cuda" else "float32")
    setup = prepare(base)
    plan, source, ctx = setup.plan, setup.source, setup.ctx
    model = source.loaded.model
    bare(model, plan)  # warm-up: kernels, allocator
    t_bare = min(bare(model, plan), bare(model, plan))
    for sd in SCATTER:
        r = compute(source, plan, dataclasses.replace(ctx, cfg=base.replace(scatter_dtype=sd)))
        rows.append((alias, sd, f"{t_bare:.2f}", f"{r['total']:.2f} ({r['finalize']:.2f})", f"{r['total'] / t_bare:.2f}x",
                     f"{r['embeddings'] / r['total']:,.0f}", f"{r['peak_gb']:.1f}", r["accs"]))


def synthetic(name: str, config, n_sentences: int, batch_size: int, rows: list, every: int = 1) -> None:
    """A random-init model of ``config``'s shape; every ``every``-th hidden state kept (the Llama-7B
    shape keeps 9 of 33, so that its geometry fits the default memory limit), self-similarity on."""
    from transformers import AutoModel

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.run_plan import synthetic_plan

    torch.manual_seed(0)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16 if DEVICE.type == "cuda" else torch.float32)
    try:
        with DEVICE:
            model = AutoModel.from_config(config).eval()
    finally:
        torch.set_default_dtype(old)
    L = int(config.num_hidden_layers) + 1
    base = RunConfig(model=name, device=DEVICE.type, dtype="bfloat16" if DEVICE.type == "cuda" else "float32",
                     self_similarity="on")
    plan = synthetic_plan(base, n_sentences=n_sentences, vocab_size=int(config.vocab_size),
                          layers=list(range(0, L, every)),
                          batch_size=batch_size, min_len=8, max_len=64)
    source = _ModelSource(model, plan.layers)
    bare(model, plan)
    t_bare = min(bare(model, plan), bare(model, plan))
    for sd in SCATTER:
        cfg = base.replace(scatter_dtype=sd)
        ctx = RunContext(cfg=cfg, layers=plan.layers, dim=int(config.hidden_size), device=DEVICE,
                         plan=plan, tokens=plan.tokens)
        r = compute(source, plan, ctx)
        rows.append((name, sd, f"{t_bare:.2f}", f"{r['total']:.2f} ({r['finalize']:.2f})", f"{r['total'] / t_bare:.2f}x",
                     f"{r['embeddings'] / r['total']:,.0f}", f"{r['peak_gb']:.1f}", r["accs"]))
    del model, source, plan
    _reset_peak()


def cpu_check(args) -> int:
    """The benchmark's code paths on the CPU with small shapes: MiniLM and a 2-layer random-init BERT."""
    from transformers import BertConfig

    rows: list = []
    real_model("minilm", args.sentences, rows)
    synthetic("tiny bert (random init)", BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                                    intermediate_size=128), args.sentences, 16, rows)
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=4000)
    ap.add_argument("--llama-sentences", type=int, default=512)
    ap.add_argument("--only", default="", help="comma-separated: minilm,mpnet,smollm2,bert-base,llama-7b,multi-gpu")
    ap.add_argument("--cpu-check", action="store_true",
                    help="run the same code on the CPU with small shapes (checks the script, measures nothing useful)")
    args = ap.parse_args()
    global DEVICE
    if args.cpu_check:
        DEVICE = torch.device("cpu")
        return cpu_check(args)
    if not torch.cuda.is_available():
        print("bench-gpu: no CUDA GPU on this machine (torch.cuda.is_available() is False): nothing measured")
        return 0
    from transformers import BertConfig, LlamaConfig

    from normvar_core.pipeline.measures.layerview import resolve_scatter_dtype

    only = set(filter(None, args.only.split(",")))
    want = lambda k: not only or k in only  # noqa: E731
    dev = torch.device("cuda")
    cap = torch.cuda.get_device_capability(dev)
    rows: list = []
    for alias in ("minilm", "mpnet", "smollm2"):
        if want(alias):
            real_model(alias, args.sentences, rows)
    if want("bert-base"):
        synthetic("bert-base (random init)", BertConfig(), args.sentences, 64, rows)
    if want("llama-7b"):
        cfg = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                          num_key_value_heads=32, vocab_size=32000)
        synthetic("Llama-7B shape (random init, 9 of 33 layers)", cfg, args.llama_sentences, 16, rows, every=4)
    print(f"{torch.cuda.get_device_name(dev)} (compute capability {cap[0]}.{cap[1]}), bf16 forward; "
          f"--scatter-dtype auto picks {resolve_scatter_dtype('auto', dev)} here. compute = every measure of a "
          f"default run + their results (finalize in brackets), no write.\n")
    print("| model | scatter dtype | bare bf16 forward (s) | compute (s) | compute / bare | embeddings/s | peak GPU GB "
          "| measures |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if want("multi-gpu"):  # a device-mapped model over every visible GPU against one GPU (bench_multigpu.py)
        from bench_multigpu import multi_gpu

        print("\n" + "\n".join(multi_gpu(args.llama_sentences)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
