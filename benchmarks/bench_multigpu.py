"""`make bench-gpu`'s multi-GPU section (``bench_gpu.py`` calls ``multi_gpu``): one model device-mapped over every
visible GPU (accelerate's balanced map, as ``--device-map auto``; each GPU's layers keep their measures there,
``pipeline/execute/layer_groups.py``) against the same model on one GPU: seconds of the pass through every
measure of a default run (+ results), and the peak memory of each GPU (``max_memory_allocated``).

The model is a random-init Llama of the 7B shape in bf16 (it fits one 80 GB GPU, so both sides run), built in host
memory and dispatched with ``accelerate.dispatch_model``; Zipf-distributed synthetic token ids
(``run_plan.synthetic_plan``). Fewer than two GPUs: one line, nothing measured.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import torch


class _MappedSource:
    """StateBatches from a (device-mapped) model: each layer group's states on its own device."""

    def __init__(self, model, layers, places):
        self.loaded = SimpleNamespace(model=model, extra={})
        self.layers, self.places = list(layers), places
        entries = list(dict.fromkeys(e for e, _ in places or ()))
        self.groups = (
            None
            if len(entries) < 2
            else [
                ([j for j, (e, _) in enumerate(places) if e == x], next(d for e, d in places if e == x))
                for x in entries
            ]
        )

    def batches(self, plan, start, stop):
        from normvar_core.pipeline import batches as B
        from normvar_core.pipeline.contracts import StateBatch
        from normvar_core.pipeline.sources import positions_of

        for bi in range(start, stop):
            b = plan.batches[bi]
            states, ids = B.extract(self.loaded, b, layers=self.layers, groups=self.groups, **plan.exclusions)
            sent, pos = positions_of(b, B.counted_mask(b, **plan.exclusions))
            grouped = isinstance(states, tuple)
            yield StateBatch(
                index=bi,
                states=None if grouped else states,
                token_ids=ids,
                sentence_ids=sent,
                positions=pos,
                groups=states if grouped else None,
            )


def _timed(model, plan, cfg, dim: int, places) -> tuple[float, list[float]]:
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.execute.partials import build_measures, run_range

    n = torch.cuda.device_count()
    for k in range(n):
        torch.cuda.reset_peak_memory_stats(k)
    first = places[0][1] if places else "cuda:0"
    ctx = RunContext(cfg=cfg, layers=plan.layers, dim=dim, device=first, plan=plan, tokens=plan.tokens, places=places)
    source = _MappedSource(model, plan.layers, places)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    measures = build_measures(ctx)
    run_range(source, plan, measures, 0, plan.n_batches)
    for measure in measures.values():
        (measure.gathered() if hasattr(measure, "gathered") else measure).result()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, [torch.cuda.max_memory_allocated(k) / 2**30 for k in range(n)]


def multi_gpu(n_sentences: int = 512, every: int = 4) -> list[str]:
    """Markdown lines: the device-mapped run over all GPUs against one GPU (module docstring)."""
    n = torch.cuda.device_count()
    if n < 2:
        return [f"multi-GPU: {n} GPU visible, nothing to compare (a device map needs two or more)"]
    from accelerate import dispatch_model
    from transformers import AutoModel, LlamaConfig
    from transformers.integrations.accelerate import _get_device_map

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.models.device_map import device_map_of, state_places
    from normvar_core.pipeline.models.probe import producers
    from normvar_core.pipeline.run_plan import synthetic_plan

    config = LlamaConfig(
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        vocab_size=32000,
    )
    torch.manual_seed(0)
    model = AutoModel.from_config(config, dtype=torch.bfloat16).eval()
    L = int(config.num_hidden_layers) + 1
    cfg = RunConfig(model="llama-7b-shape", device="cuda", dtype="bfloat16", self_similarity="on")
    plan = synthetic_plan(
        cfg,
        n_sentences=n_sentences,
        vocab_size=int(config.vocab_size),
        layers=list(range(0, L, every)),
        batch_size=16,
        min_len=8,
        max_len=64,
    )
    lines = [
        f"Multi-GPU: Llama-7B shape (random init, bf16, {len(plan.layers)} of {L} hidden states kept, "
        f"{n_sentences} synthetic sentences), every measure of a default run + results, no write.",
        "",
        "| placement | seconds | " + " | ".join(f"peak GB cuda:{k}" for k in range(n)) + " |",
        "|---|---:|" + "---:|" * n,
    ]
    model.to("cuda:0")
    _timed(model, plan, cfg, config.hidden_size, None)  # warm-up
    secs, peaks = _timed(model, plan, cfg, config.hidden_size, None)
    lines.append(f"| one GPU (cuda:0) | {secs:.2f} | " + " | ".join(f"{p:.1f}" for p in peaks) + " |")
    model.to("cpu")
    torch.cuda.empty_cache()
    dmap = _get_device_map(model, "auto", {k: torch.cuda.mem_get_info(k)[0] for k in range(n)}, None)
    model = dispatch_model(model, device_map=dmap)
    places = state_places(device_map_of(model), producers(model, L, None))
    places = [places[l] for l in plan.layers]
    _timed(model, plan, cfg, config.hidden_size, places)
    secs, peaks = _timed(model, plan, cfg, config.hidden_size, places)
    lines.append(f"| device map over {n} GPUs | {secs:.2f} | " + " | ".join(f"{p:.1f}" for p in peaks) + " |")
    return lines


__all__ = ["multi_gpu"]
