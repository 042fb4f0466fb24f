"""`make bench-gpu`: a run's cost on a CUDA GPU — the tail, compute against a bare bf16 forward pass, and the cost
of each optional measure.

1. **Compute against the bare pass.** For MiniLM, MPNet and SmolLM2 (those installed; the shipped novels) and for
   random-init models of the bert-base and Llama-7B shapes (Zipf-distributed synthetic token ids,
   ``run_plan.synthetic_plan``), in bf16:

   * bare   = ``model(..., output_hidden_states=True)`` over the plan's batches, nothing else;
   * compute = the same forward passes through every measure of a default run (moments, samples, geometry,
     self-similarity, outliers, halves; ``execute.run_range``) plus their results (spectra, TwoNN on the device,
     seed 004's batches) — the write, on the host, is left out (and the occurrences of the synthetic shapes) — once
    per scatter dtype (float64, float32), then
     with ``--scatter-dtype auto`` and each of the two costliest measures off (``VARIANTS``:
     ``--no-neighbourhoods``, ``--no-layer-linearity``, both).

   Reports compute / bare, the results' seconds (finalize), embeddings per second, peak GPU memory
   (``max_memory_allocated``) and what ``--scatter-dtype auto`` picks on this GPU.
2. **The tail.** Whole ``normvar compute`` runs (``compute_run``: load, tokenize, the early pass, the forward
   passes, the results and the run file) of MiniLM and SmolLM2, bf16, once per variant of ``VARIANTS``,
   alternated, medians of ``--repeat``: the wall seconds of the run, the seconds after its last forward batch
   (the measures' results and the write: the tail) and their share (target: at most 15 %), and each variant's
   seconds against the default run (negative: what the measures turned off cost).
3. **Several GPUs** (``bench_multigpu.py``): a device-mapped Llama-7B shape over every visible GPU against one
   GPU, seconds and the peak memory of each GPU (one line when fewer than two GPUs are visible).

Prints markdown tables (docs/benchmarks.md). Without a CUDA GPU it prints one line and exits 0 (CI runs it that
way). ``--cpu-check`` runs the same code on the CPU at a tiny size (40 sentences, a 2-layer d = 64 BERT): it checks
the script, its numbers measure nothing.
Usage: .venv/bin/python benchmarks/bench_gpu.py [--sentences N] [--llama-sentences M] [--repeat R] [--only NAME,...]
       [--cpu-check]
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

import torch  # noqa: E402  -- after the offline variables and sys.path above

SCATTER = ("float64", "float32")
VARIANTS = {
    "default": {},
    "- neighbourhoods": {"neighbourhoods": False},
    "- layer linearity": {"layer_linearity": False},
    "- both": {"neighbourhoods": False, "layer_linearity": False},
}
"""The runs compared: the default run (every measure, the neighbourhoods and the layer linearity included), and
with each of those two turned off (RunConfig fields): a measure's cost is the default's seconds minus the run
without it."""
PICKED: dict = {"scatter": SCATTER, "variants": VARIANTS}
"""What the tables run: everything on a GPU; one scatter dtype, the default and "- both" in ``--cpu-check``."""
TAIL_MODELS = ("minilm", "smollm2")
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
            out = model(
                input_ids=b.input_ids.to(dev, non_blocking=True),
                attention_mask=b.attention_mask.to(dev, non_blocking=True),
                output_hidden_states=True,
            )
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
    return {
        "loop": t1 - t0,
        "finalize": t2 - t1,
        "total": t2 - t0,
        "embeddings": n,
        "peak_gb": _peak_gb(),
        "accs": ",".join(measures),
    }


def compare(name: str, t_bare: float, source, plan, ctx_of, rows: list) -> None:
    """The compute rows of one model: every scatter dtype with the default measures, then ``--scatter-dtype auto``
    with each variant of ``VARIANTS`` that turns measures off; ``ctx_of(cfg)`` is the RunContext of ``cfg``."""
    runs = [(sd, "default", {}) for sd in PICKED["scatter"]]
    runs += [("auto", v, opts) for v, opts in PICKED["variants"].items() if opts]
    for sd, variant, opts in runs:
        r = compute(source, plan, ctx_of(dict(scatter_dtype=sd, **opts)))
        rows.append(
            (
                name,
                sd,
                variant,
                f"{t_bare:.2f}",
                f"{r['total']:.2f} ({r['finalize']:.2f})",
                f"{r['total'] / t_bare:.2f}x",
                f"{r['embeddings'] / r['total']:,.0f}",
                f"{r['peak_gb']:.1f}",
                r["accs"],
            )
        )


def _dtype() -> str:
    return "bfloat16" if DEVICE.type == "cuda" else "float32"


def real_model(alias: str, n: int, rows: list) -> None:
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.execute.prepare import prepare
    from normvar_core.pipeline.models import alias_installed

    if not alias_installed(alias):
        rows.append((alias, "not installed (make models)", "", "", "", "", "", "", ""))
        return
    base = RunConfig(model=alias, max_sentences=n, device=DEVICE.type, dtype=_dtype())
    setup = prepare(base)
    plan, source, ctx = setup.plan, setup.source, setup.ctx
    model = source.loaded.model
    bare(model, plan)  # warm-up: kernels, allocator
    t_bare = min(bare(model, plan), bare(model, plan))
    compare(alias, t_bare, source, plan, lambda kw: dataclasses.replace(ctx, cfg=base.replace(**kw)), rows)


def _contexts(base, plan, dim: int):
    """cfg options -> the RunContext of a synthetic plan's run with them."""
    from normvar_core.pipeline.contracts import RunContext

    return lambda kw: RunContext(
        cfg=base.replace(**kw), layers=plan.layers, dim=dim, device=DEVICE, plan=plan, tokens=plan.tokens
    )


def synthetic(name: str, config, n_sentences: int, batch_size: int, rows: list, every: int = 1) -> None:
    """A random-init model of ``config``'s shape; every ``every``-th hidden state kept (the Llama-7B
    shape keeps 9 of 33, so that its geometry fits the default memory limit), self-similarity on."""
    from transformers import AutoModel

    from normvar_core.config import RunConfig
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
    base = RunConfig(model=name, device=DEVICE.type, dtype=_dtype(), self_similarity="on")
    plan = synthetic_plan(
        base,
        n_sentences=n_sentences,
        vocab_size=int(config.vocab_size),
        layers=list(range(0, L, every)),
        batch_size=batch_size,
        min_len=8,
        max_len=64,
    )
    source = _ModelSource(model, plan.layers)
    bare(model, plan)
    t_bare = min(bare(model, plan), bare(model, plan))
    compare(name, t_bare, source, plan, _contexts(base, plan, int(config.hidden_size)), rows)
    del model, source, plan
    _reset_peak()


def tail(alias: str, n: int, repeat: int, lines: list) -> None:
    """Whole runs of ``alias`` on ``n`` sentences, one per variant of ``VARIANTS``, alternated ``repeat`` times
    (after one discarded warm-up run when ``repeat`` > 1): medians of the run's wall seconds and of its tail (after the
    last forward
    batch: the results and the write), the tail's share, the variant's seconds over the default run's, and the
    peak GPU memory (the process's peak RSS on the CPU)."""
    import statistics
    import tempfile

    from bench_cost import run_marks

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.models import alias_installed

    if not alias_installed(alias):
        lines.append(f"| {alias} | not installed (make models) | | | | | |")
        return
    data = tempfile.mkdtemp(prefix="normvar-bench-gpu-")

    def cfg(opts: dict, i: int) -> RunConfig:
        return RunConfig(model=alias, max_sentences=n, device=DEVICE.type, dtype=_dtype(), name=f"tail-{i}", **opts)

    if repeat > 1:  # warm-up: the model's files, kernels, numba's compiled loops
        run_marks(cfg({}, 0), data)
    runs: dict = {v: [] for v in PICKED["variants"]}
    for _ in range(repeat):
        for i, (v, opts) in enumerate(PICKED["variants"].items()):
            _reset_peak()
            m = run_marks(cfg(opts, i), data)
            runs[v].append((m["end"] - m["start"], m["end"] - m["last_batch"], _peak_gb()))
    med = {v: [statistics.median(r[k] for r in rs) for k in range(3)] for v, rs in runs.items()}
    for v, (wall, after, peak) in med.items():
        added = "" if v == "default" else f"{wall - med['default'][0]:+.2f} ({wall / med['default'][0]:.2f}x)"
        lines.append(
            f"| {alias}, {n:,} sentences | {v} | {wall:.2f} | {after:.2f} | {after / wall * 100:.1f} % | "
            f"{added} | {peak:.1f} |"
        )


TAIL_HEADER = (
    "| model | run | whole run (s) | after the last batch (s) | tail share | added to the default (s) "
    "| peak GB |\n|---|---|---:|---:|---:|---:|---:|"
)
COMPUTE_HEADER = (
    "| model | scatter dtype | measures | bare forward (s) | compute (s) (results) | compute / bare "
    "| embeddings/s | peak GB | measures held |\n|---|---|---|---:|---:|---:|---:|---:|---|"
)


def cpu_check(args) -> int:
    """The benchmark's code paths on the CPU at a tiny size: MiniLM (compute table and tail) and a 2-layer
    d = 64 random-init BERT."""
    from transformers import BertConfig

    n = args.sentences or 40
    PICKED.update(scatter=SCATTER[:1], variants={k: VARIANTS[k] for k in ("default", "- both")})
    rows: list = []
    real_model("minilm", n, rows)
    synthetic(
        "tiny bert (random init)",
        BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128),
        n,
        16,
        rows,
    )
    print("CPU check (measures nothing: the script's code paths at a tiny size)\n\n" + COMPUTE_HEADER)
    for r in rows:
        print("| " + " | ".join(r) + " |")
    lines: list = []
    tail("minilm", n, 1, lines)
    print("\n" + TAIL_HEADER + "\n" + "\n".join(lines))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--sentences",
        type=int,
        default=None,
        help="sentences of the real models' runs (default 4,000; 40 with --cpu-check)",
    )
    ap.add_argument("--llama-sentences", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3, help="rounds of the tail's runs (medians)")
    ap.add_argument(
        "--only", default="", help="comma-separated: minilm,mpnet,smollm2,bert-base,llama-7b,tail,multi-gpu"
    )
    ap.add_argument(
        "--cpu-check",
        "--cpu-smoke",
        action="store_true",
        help="run the same code on the CPU at a tiny size (checks the script, measures nothing useful)",
    )
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

    n = args.sentences or 4000
    only = set(filter(None, args.only.split(",")))

    def want(k):
        return not only or k in only

    dev = torch.device("cuda")
    cap = torch.cuda.get_device_capability(dev)
    print(
        f"{torch.cuda.get_device_name(dev)} (compute capability {cap[0]}.{cap[1]}), bf16 forward; "
        f"--scatter-dtype auto picks {resolve_scatter_dtype('auto', dev)} here.\n",
        flush=True,
    )
    if want("tail"):
        lines: list = []
        for alias in TAIL_MODELS:
            tail(alias, n, args.repeat, lines)
        print(
            f"Whole runs (median of {args.repeat}; target: the tail at most 10 % of the run):\n\n{TAIL_HEADER}\n"
            + "\n".join(lines)
            + "\n",
            flush=True,
        )
    rows: list = []
    for alias in ("minilm", "mpnet", "smollm2"):
        if want(alias):
            real_model(alias, n, rows)
    if want("bert-base"):
        synthetic("bert-base (random init)", BertConfig(), n, 64, rows)
    if want("llama-7b"):
        cfg = LlamaConfig(
            hidden_size=4096,
            intermediate_size=11008,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=32,
            vocab_size=32000,
        )
        synthetic("Llama-7B shape (random init, 9 of 33 layers)", cfg, args.llama_sentences, 16, rows, every=4)
    if rows:
        print("compute = every measure of the run + their results (in brackets), no write:\n\n" + COMPUTE_HEADER)
        for r in rows:
            print("| " + " | ".join(r) + " |")
    if want("multi-gpu"):  # a device-mapped model over every visible GPU against one GPU (bench_multigpu.py)
        from bench_multigpu import multi_gpu

        print("\n" + "\n".join(multi_gpu(args.llama_sentences)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
