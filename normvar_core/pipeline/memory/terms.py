"""The terms of a run's peak memory (``memory.plan_memory`` adds them up; docs/scale.md, "The memory
formulas"), each in bytes:

* ``RUNTIME_BYTES``  the interpreter with torch, transformers, numba, DuckDB loaded (measured);
* ``weights_bytes``  parameters × bytes of the dtype + buffers;
* ``plan_bytes``     the kept sentences, their flat encoding, the counts and the sample plans;
* ``pass_bytes``     one forward pass of the largest padded batch:
                     H·P·d·e + P·(f + 4d)·e + rows·h·width²·e + L·N·d·e;
                     on the CPU the heap keeps a batch's freed pages for the next (``pass_work``);
* ``loop_total``     the measures' update of that batch beside it (``loop_parts``): one layer's shared view
                     (``LayerView.view_bytes``) + Σ held + max(peak − held) over the kept measures' ``update_bytes``;
* ``publish_bytes``  what publish holds beside the state: each kept measure's ``publish_bytes`` (its result and
                     tables' work: results are kept until the file is written) + the writer's ``writer_bytes``;

and what the device has: ``device_memory`` (free now), ``memory_in_use`` (held by this process).
"""

from __future__ import annotations

import sys

import numpy as np

from normvar_core.pipeline.batches import PaddedBatches
from normvar_core.pipeline.encoding import Encoded
from normvar_core.pipeline.measures.layerview import LayerMajor, LayerView
from normvar_core.runs.write_memory import INSERT_BYTES, WRITER_MEMORY

GiB = 1 << 30
RUNTIME_BYTES = 640 << 20
"""The process before any run state: Python with torch, transformers, tokenizers, numba, pyarrow and
DuckDB imported (measured 472 MB peak RSS for the imports alone, 600-700 MB once a tokenizer and the
numba kernels are loaded: benchmarks/bench_plan.py)."""

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def weights_bytes(shape, dtype: str) -> int:
    """Parameters × bytes of ``dtype`` + buffers (``shape``: a ``model_shape.ModelShape``)."""
    return shape.params * DTYPE_BYTES[dtype] + shape.buffer_bytes


# ----------------------------------------------------------------------------- the device
def device_memory(device_type: str) -> int:
    """Bytes the device reports free now: CUDA free memory, else the available RAM (psutil)."""
    if device_type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info()[0])
    import psutil

    return int(psutil.virtual_memory().available)


def memory_in_use(device_type: str) -> int:
    """Bytes this process already holds on the device (added back to the free memory when a run
    measures its budget after loading the model: the plan counts those bytes itself)."""
    if device_type == "cuda":
        import torch

        return int(torch.cuda.memory_reserved())
    import psutil

    return int(psutil.Process().memory_info().rss)


def loaded_budget(device_type: str) -> int:
    """What the device reports free plus what this process (holding the model) already holds there."""
    return device_memory(device_type) + memory_in_use(device_type)


# ----------------------------------------------------------------------------- the plan's parts
def flat_encoding(batches) -> Encoded | None:
    """The flat encoding behind the plan's batches (``PaddedBatches.enc``); None for a list of built ``Batch``
    (``run_plan.synthetic_plan``)."""
    return batches.enc if isinstance(batches, PaddedBatches) else None


def plan_bytes(plan) -> int:
    """Bytes the built plan holds through the pass: the sentences (Python strings) and every numpy
    array of the flat encoding, the counts and the sample plans."""
    n = sum(map(sys.getsizeof, plan.sentences)) + 8 * len(plan.sentences)  # each string and its list slot
    arrays = [plan.token_ids, plan.counts, plan.sentence_lengths]
    enc = flat_encoding(plan.batches)
    if enc is not None:
        arrays += [enc.ids, enc.special, enc.starts, enc.lengths, enc.word_type, enc.word_occ]
    for sp in (plan.samples, plan.uniform):
        if sp is not None:
            arrays += [sp.token_ids, sp.i, sp.batch, sp.sentence, sp.offset, sp.char_start, sp.char_end]
    n += sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))
    n += sum(map(sys.getsizeof, plan.tokens.values())) + 100 * len(plan.tokens)  # the type strings and their dict
    return int(n)


def largest_batch(batches) -> tuple[int, int, int]:
    """(rows, padded width, real tokens) of the batch with the most padded tokens."""
    enc = flat_encoding(batches)
    best = (0, 0, 0)
    if enc is not None:  # every batch at once from the flat encoding; the first of the largest, as a scan would
        rows, width, tokens = batches.shapes()
        padded = rows * width
        if padded.size and int(padded.max()) > 0:
            i = int(np.argmax(padded))
            best = (int(rows[i]), int(width[i]), int(tokens[i]))
        return best
    for b in batches:
        rows, width = (int(x) for x in b.input_ids.shape)
        if rows * width > best[0] * best[1]:
            best = (rows, width, int(b.attention_mask.sum()))
    return best


def pass_bytes(shape, plan, num_layers: int, dtype: str, batch: tuple[int, int, int] | None = None) -> int:
    """One forward pass of the largest padded batch (the module docstring's ``pass``); ``batch``:
    (rows, width, real tokens) of another batch instead."""
    rows, width, n = largest_batch(plan.batches) if batch is None else batch
    P, d, e = rows * width, shape.dim, DTYPE_BYTES[dtype]
    return int(
        shape.num_hidden_states * P * d * e
        + P * (shape.ffn + 4 * d) * e
        + rows * shape.heads * width**2 * e
        + num_layers * n * d * e
    )


def loop_parts(ctx, registry, batch: tuple[int, int, int] | None = None) -> dict:
    """What the measures' update of the largest batch (``batch``: (rows, width, real tokens) of another) holds
    beside the pass, per measure the run asks for: {"view": (bytes without a split, with one), "of": {name: (held,
    peak, splits the view, layer-major)}}; ``loop_total`` adds up the kept ones."""
    rows, _, n = largest_batch(ctx.plan.batches) if batch is None else batch
    d = ctx.dim
    of = {
        cls.name: (
            int(cls.update_held(ctx, n, rows)),
            int(cls.update_bytes(ctx, n, rows)),
            cls.splits_view,
            issubclass(cls, LayerMajor),
        )
        for cls in registry
        if cls.asked(ctx.cfg)
    }
    return {"view": (LayerView.view_bytes(n, d, False), LayerView.view_bytes(n, d, True)), "of": of}


def loop_total(parts: dict, drop=()) -> int:
    """The update's bytes with the measures of ``parts`` (``loop_parts``) not in ``drop``: the shared view (when a
    layer-major measure is kept; split when one asks for it) + Σ held + max(peak − held): the measures update one
    after another, each keeping only its held part while the others run."""
    kept = [v for name, v in parts["of"].items() if name not in drop]
    if not kept:
        return 0
    view = parts["view"][any(v[2] for v in kept)] if any(v[3] for v in kept) else 0
    return int(view + sum(v[0] for v in kept) + max(v[1] - v[0] for v in kept))


HEAP_KEPT = 1.0
"""On the CPU the run's heap keeps the pages a batch freed for the next one (``execute.heap.reuse_heap``): the
plan counts a pass as (1 + HEAP_KEPT) x ``pass_bytes`` (measured above the state: 1.34x on a d = 1,024 decoder
with 4 layers, 1.65x with 16; glibc may keep up to ``heap.FREE_GROWTH`` x the first batch's free pages)."""


def host_pass(nbytes: int, host: bool) -> int:
    """A pass's bytes as the plan counts them: (1 + HEAP_KEPT) x on the CPU (``HEAP_KEPT``), as is on a GPU."""
    return int(nbytes * (1 + HEAP_KEPT)) if host else int(nbytes)


def pass_work(forward: int, loop: int, host: bool) -> int:
    """The pass and the measures' update of its batch (``loop_total``): forward + loop on a GPU; on the CPU
    forward + max(HEAP_KEPT x forward, loop): the update's temporaries reuse the pages the heap keeps from the forward
    pass, and only what exceeds them is new."""
    return int(forward + max(forward * HEAP_KEPT, loop)) if host else int(forward + loop)


def writer_bytes() -> int:
    """The run file's write: DuckDB's buffer pool (``runs.write_memory.WRITER_MEMORY``) and half as much again (DuckDB
    holds somewhat more than its limit: measured +348 MB writing 625 MB of embeddings at a 256 MB limit), and the
    Arrow parts of one insert (``INSERT_BYTES``): 1.5·WRITER_MEMORY + INSERT_BYTES."""
    return WRITER_MEMORY * 3 // 2 + INSERT_BYTES


def publish_of(ctx, registry) -> dict[str, int]:
    """{measure: its ``publish_bytes(ctx)``} for every measure of ``registry`` the run asks for that declares its
    state (one that does not is left out of the plan, ``MemoryPlan.unknown``)."""
    return {
        cls.name: int(cls.publish_bytes(ctx))
        for cls in registry
        if cls.asked(ctx.cfg) and cls.planned_bytes(ctx) is not None
    }


def publish_sum(parts: dict[str, int], drop=()) -> int:
    """The publish phase beside the state from ``publish_of``'s parts: ``writer_bytes`` + Σ of the measures kept
    (not in ``drop``): every result is kept until the file is written, the geometry's beside the others."""
    return writer_bytes() + sum(b for n, b in parts.items() if n not in drop)


def publish_bytes(ctx, registry, drop=()) -> int:
    """``publish_sum`` of ``publish_of(ctx, registry)``."""
    return publish_sum(publish_of(ctx, registry), drop)


def rows_that_fit(ctx, shape, dtype, room: int, publish: int, host: bool, registry, drop=()) -> int:
    """The most sentences per batch (at the longest sentence's width) whose pass and update (the measures not in
    ``drop``) fit in ``room``."""
    enc = flat_encoding(ctx.plan.batches)
    width = int(enc.lengths.max()) if enc is not None and enc.lengths.size else largest_batch(ctx.plan.batches)[1]
    best = 0
    for rows in (512, 256, 128, 64, 32, 16, 8, 4, 2, 1):
        batch = (rows, width, rows * width)
        one = pass_bytes(shape, ctx.plan, ctx.num_layers, dtype, batch)
        if max(pass_work(one, loop_total(loop_parts(ctx, registry, batch), drop), host), publish) <= room:
            best = rows
            break
    return best


__all__ = [
    "rows_that_fit",
    "RUNTIME_BYTES",
    "DTYPE_BYTES",
    "GiB",
    "weights_bytes",
    "device_memory",
    "memory_in_use",
    "plan_bytes",
    "flat_encoding",
    "largest_batch",
    "pass_bytes",
    "publish_bytes",
    "publish_of",
    "publish_sum",
    "writer_bytes",
    "host_pass",
    "pass_work",
    "HEAP_KEPT",
]
