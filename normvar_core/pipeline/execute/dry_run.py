"""``normvar plan``: compute's steps up to its memory plan, on the model's config alone (no weights read).

The same checks as compute (the options, the ``--dataset``, the local Ray workers), the model built on the meta
device from its config (``model_shape.py``; what that build gives kept in the data directory,
``models.meta_facts``), the corpus read and tokenized as compute would (``run_plan.py``), then the run's memory plan
(``memory.run_budget``) and, with ``--devices 8x80``, the plan per device of the run device-mapped over those
devices (``memory/per_device.py``).
"""

from __future__ import annotations

from typing import Any

from normvar_core.device_options import parse_devices
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.corpus.read import load_sentences
from normvar_core.pipeline.execute.preflight import check_inputs
from normvar_core.pipeline.execute.ray_cluster import check_local_workers
from normvar_core.pipeline.memory.per_device import placed_model, plan_placed
from normvar_core.pipeline.memory.plan import MemoryPlan, run_budget, with_devices
from normvar_core.pipeline.memory.terms import GiB
from normvar_core.pipeline.model_shape import config_and_tokenizer, shape_from_config, shipped_shape
from normvar_core.pipeline.models.device_map import device_name
from normvar_core.pipeline.models.load import resolve_device, resolve_dtype, torch_dtype
from normvar_core.pipeline.models.meta_facts import facts_folder
from normvar_core.pipeline.models.shipped_shapes import STAND_IN
from normvar_core.pipeline.run_plan import make_plan, tokenized_cache


def plan_run(cfg, data_dir=None, devices: str | None = None) -> MemoryPlan:
    """``normvar plan``: the run's memory from the model's config (meta device, no weights) and the
    corpus tokenized as ``compute`` would; ``cfg.memory_gb`` or what the device reports free. ``devices``
    (``--devices 8x80``): the plan per device of the run device-mapped over them (``memory/per_device.py``)."""
    cfg = cfg.validate()
    limits = parse_devices(devices) if devices else None
    check_inputs(cfg, data_dir, devices_here=not limits)  # as compute: before the model's config is read
    check_local_workers(cfg)  # the refusal compute makes before it starts a local Ray
    if limits:  # planned for those devices, not this machine's
        cfg = cfg.replace(
            device="cuda" if any(isinstance(k, int) for k in limits) else "cpu", memory_gb=sum(limits.values()) / GiB
        )
    device = cfg.device if cfg.device != "auto" else resolve_device(cfg)
    if cfg.memory_gb is None:
        device = resolve_device(cfg)  # measuring needs the device itself
    torch_dtype(cfg, device)  # bf16/fp16 on CPU: the same one-line refusal as compute
    shipped = shipped_shape(cfg)
    name, config, tok = config_and_tokenizer(cfg, data_dir)
    cfg = cfg.replace(dtype=resolve_dtype(cfg.dtype, device, config))  # auto: the config's dtype on a GPU
    kept = facts_folder(data_dir)  # what the meta model gives, kept: a later plan of the model builds none
    shape = shape_from_config(config, name, trust_remote_code=bool(cfg.trust_remote_code), tokenizer=tok, cache=kept)
    corpus = load_sentences(cfg, data_dir)
    plan = make_plan(
        cfg,
        corpus,
        tok,
        num_hidden_states=shape.num_hidden_states,
        max_length=shape.max_length,
        device_type=device,
        cache=tokenized_cache(data_dir),
        spans=False,  # the plan writes no sample: their character spans are never read
    )
    ctx = RunContext(cfg=cfg, layers=plan.layers, dim=shape.dim, device=device, plan=plan, tokens=plan.tokens)
    mp = run_budget(cfg, ctx, shape=shape, device=device, dtype=cfg.dtype, loaded=False)
    if limits:  # the model built on the meta device and placed once (or its facts read back); the plans reuse them
        placed = placed_model(
            config, cfg.dtype, bool(cfg.trust_remote_code), cfg.device_map, limits, shape.num_hidden_states, cache=kept
        )
        names = {device_name(k): int(v) for k, v in limits.items()}
        place: dict[str, Any] = dict(shape=shape, model=placed, dmap=placed.device_map, limits=names)
        mp = with_devices(mp, plan_placed(ctx, **place, dtype=cfg.dtype))
        if cfg.batch_size is None:  # the automatic batches: the largest batch size whose pass fits each device
            mp = _batch_that_fits(mp, ctx, place, tok, cfg.dtype)
    if shipped is not None:
        mp.shape_note = (
            f"shape: the config of {name} that ships with normvar (not found locally; no weights); "
            f"types counted with the {STAND_IN} tokenizer as a stand-in for its own"
        )
    return mp


BATCH_SIZES = (1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1)
"""The batch sizes ``plan --devices`` tries, largest first, when the automatic batches do not fit a device."""


def _batch_that_fits(mp: MemoryPlan, ctx, place: dict, tokenizer, dtype: str) -> MemoryPlan:
    """``mp`` (the plan over the automatic batches) when every device fits; else the plan over the largest
    ``--batch-size`` of ``BATCH_SIZES`` (the same sentences in length order, cut every so many) with which every
    device fits with no measure dropped, said in ``batch_note``; ``mp`` with the note that none does otherwise."""
    import dataclasses

    from normvar_core.pipeline.batches import batch_sizes, batches_from
    from normvar_core.pipeline.memory.terms import flat_encoding

    enc = flat_encoding(ctx.plan.batches)
    auto = int(max(batch_sizes(ctx.plan.batches), default=0))
    if enc is None:
        return mp
    if mp.fits and not mp.dropped:
        mp.batch_note = f"automatic (a token budget): at most {auto} sentences a batch; every device fits"
        return mp
    for rows in (r for r in BATCH_SIZES if r < auto):
        plan = dataclasses.replace(ctx.plan, batches=batches_from(enc, tokenizer, batch_size=rows))
        sub = dataclasses.replace(ctx, plan=plan)
        sub = dataclasses.replace(sub, cfg=ctx.cfg.replace(batch_size=rows))
        per = plan_placed(sub, **place, dtype=dtype)
        if per["fits"] and not per["dropped"]:
            out = with_devices(mp, per)
            out.pass_bytes = max(r["pass_bytes"] for r in per["devices"])
            out.batch_note = (
                f"--batch-size {rows} chosen to fit each device (the automatic batches of up to {auto} sentences "
                f"do not); compute with --batch-size {rows}"
            )
            return out
    mp.batch_note = f"no --batch-size of {BATCH_SIZES[-1]} or more fits every device with every measure kept"
    return mp


__all__ = ["plan_run", "BATCH_SIZES"]
