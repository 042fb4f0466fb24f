"""The Ray driver's side of ``prepare``: the model as the actors hold it, without a weight in the driver.

On a node that runs Falcon-40B replicas the driver must not hold a 40B model of its own. So ``prepare``
(``remote=ActorModel(...)``) takes from the driver only what the plan needs — the tokenizer and the
model's config (``model_shape.config_and_tokenizer``: no weights read) — and from the first actor, which
has loaded the model, what needs the weights:

* ``describe``: its ``ModelInfo`` (hidden states, width, max length, norm placement, weights hash, device
  map) and ``ModelShape`` (parameters counted on the loaded model, as a local run counts them);
* ``source``: the App. I tables of the plan's layers and the memory figure a local run plans against,
  measured in that actor (``DescribedSource`` stands for the driver's ``TransformerSource``);
* ``memory_plan``: with a device map, the per-device plan of that actor's placed replica (``Shard.devices``);
* ``prime``: the measures' early pass results (the occurrences' axes), computed once by that actor
  (``Shard.early``) and sent by the driver to every actor with the plan (``RayPool.run``), so every partial
  starts from the same results — those a local run records, from the same batches and the same thread count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from normvar_core.pipeline.measures import early_measures
from normvar_core.pipeline.memory.plan import run_budget, with_devices
from normvar_core.pipeline.model_shape import ModelShape, config_and_tokenizer
from normvar_core.pipeline.models.load import ModelInfo
from normvar_core.pipeline.sources import kept_places, source_info, state_device


@dataclass
class DescribedModel:
    """The driver's ``LoadedModel`` stand-in: the tokenizer read here and the first actor's description."""

    tokenizer: Any
    info: Any  # models.ModelInfo (the first actor's)
    shape: Any  # model_shape.ModelShape of the loaded model
    model: Any = None  # never the weights: they load in the actors only

    @property
    def device(self):
        return torch.device(self.info.device)


class DescribedSource:
    """The driver's ``TransformerSource`` stand-in: what ``publish`` reads (``info``) and the context needs (the
    kept layers' places and state device); it yields no batch (the actors run them)."""

    def __init__(self, loaded: DescribedModel, layers: list[int], tables: dict):
        self.loaded, self.layers = loaded, list(layers)
        self.info = source_info(loaded.info, tables)
        self.places = kept_places(loaded.info, self.layers)
        self.measured: int | None = None  # the first actor's memory figure (``Shard.tables``)

    @property
    def device(self):
        return self.loaded.device

    @property
    def state_device(self):
        return state_device(self.places, self.loaded.info.device)

    @property
    def tokenizer(self):
        return self.loaded.tokenizer


class ActorModel:
    """``prepare``'s ``remote``: the corpus read and tokenized by the pool's actors, the model described by its
    first actor (module docstring)."""

    def __init__(self, pool, cfg, root):
        self.pool, self.cfg, self.root = pool, cfg, root
        self.encode = pool.encode

    @property
    def first(self):
        return self.pool.actors[0]

    def read_corpus(self):
        return self.pool.read_corpus(self.cfg, self.root)

    def describe(self) -> DescribedModel:
        """The first actor's ModelInfo and ModelShape; the tokenizer read here (config + tokenizer files only)."""
        got = self.pool.get(self.first.describe.remote(), "describing the model")
        _, _, tokenizer = config_and_tokenizer(self.cfg, self.root)  # after the actors' load: a GGUF's cache is there
        return DescribedModel(tokenizer, ModelInfo(**got["info"]), ModelShape(**got["shape"]))

    def source(self, loaded: DescribedModel, layers: list[int]) -> DescribedSource:
        got = self.pool.get(self.first.tables.remote([int(x) for x in layers]), "the norm tables")
        src = DescribedSource(loaded, layers, got["tables"])
        src.measured = int(got["measured"])
        return src

    def memory_plan(self, cfg, ctx, loaded: DescribedModel, source: DescribedSource, resumed) -> Any:
        """``run_budget`` against the first actor's memory figure; with a device map (its replica's), the
        per-device plan of that replica decides the drops, as in one process."""
        mp = run_budget(
            cfg, ctx, shape=loaded.shape, device=loaded.device.type, dtype=cfg.dtype, measured=source.measured
        )
        if loaded.info.device_map and resumed is None:
            ctx.memory = mp
            per = self.pool.get(self.first.devices.remote(self.pool.boxed(ctx.plan, ctx)), "the per-device memory plan")
            mp = with_devices(mp, per)
        return mp

    def prime(self, ctx, source) -> None:
        """The measures' early pass results from the first actor (none asked when the run keeps no such measure)."""
        if early_measures(ctx):
            ctx.early = dict(self.pool.get(self.first.early.remote(self.pool.boxed(ctx.plan, ctx)), "the early passes"))


__all__ = ["ActorModel", "DescribedModel", "DescribedSource"]
