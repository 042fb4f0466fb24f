"""The samples measure: the raw embeddings picked by the plan (``samples.plan_samples``) for
the PCA clouds (Fig. 1, App. A) and the token explorer, with the sentence and position each came
from. Memory: (L, P, d) float32 for P picks, filled batch by batch from the main pass.

Run-file table: ``samples`` (layer, token_id, token, i, vector, sentence_id, position); the text of
the sentences they point at goes to the run's ``sentences`` table (``sentence_ids``).
"""

from __future__ import annotations

import numpy as np
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures.base import Measure, Planned
from normvar_core.runs.schema import SAMPLES_TABLES
from normvar_core.runs.tables import samples_tables

_KEY = np.int64(1 << 24)  # sentence_id * _KEY + position identifies a position in the corpus


def locate(plan, keys_of_plan: np.ndarray, batch: StateBatch) -> tuple[np.ndarray, np.ndarray]:
    """The plan's picks that lie in ``batch`` and their column in the batch's states:
    (pick indices, state indices). ``keys_of_plan`` = sentence * _KEY + offset of every pick."""
    picks = plan.by_batch.get(int(batch.index))
    e = np.zeros(0, np.int64)
    if picks is None or picks.size == 0 or batch.size == 0:
        return e, e
    keys = torch.as_tensor(batch.sentence_ids).cpu().numpy().astype(np.int64) * _KEY + torch.as_tensor(
        batch.positions
    ).cpu().numpy().astype(np.int64)
    order = np.argsort(keys, kind="stable")
    where = np.minimum(np.searchsorted(keys[order], keys_of_plan[picks]), keys.size - 1)
    hit = keys[order][where] == keys_of_plan[picks]
    return picks[hit], order[where[hit]]  # an out-of-memory half batch holds only some rows


def position_keys(plan) -> np.ndarray:
    return plan.sentence.astype(np.int64) * _KEY + plan.offset.astype(np.int64)


def fill_planned(vectors: np.ndarray, filled: np.ndarray, plan, keys: np.ndarray, batch: StateBatch) -> None:
    """Copy the batch's states at the plan's picks into ``vectors`` (L, P, d) float32 and flag them
    in ``filled`` (the PCA samples and the geometry's TwoNN sample alike)."""
    picks, idx = locate(plan, keys, batch)
    if picks.size:
        X = batch.states
        vectors[:, picks] = X[:, torch.as_tensor(idx, device=X.device)].detach().to("cpu", torch.float32).numpy()
        filled[picks] = True


def most_picks(plan) -> int:
    """The most picks of sample plan ``plan`` in one batch (0 for no plan): the rows one update copies."""
    if plan is None or not plan.size:
        return 0
    return int(np.bincount(np.asarray(plan.batch, np.int64)).max())


class Fill:
    """The merge rule of planned picks (``_add_state("vectors", ..., merge=Fill("filled"))``, the flags
    registered with ``"or"``): the other's filled picks copied in, one layer block at a time."""

    def __init__(self, flags: str):
        self.flags = flags

    def merge(self, holder, name: str, reader) -> None:
        theirs = np.asarray(reader.get(self.flags), bool)
        if not theirs.any():
            return
        vectors = getattr(holder, name)
        for l, block in enumerate(reader.blocks(name)):
            vectors[l, theirs] = np.asarray(block)[theirs]


def planned_vectors(holder, ctx: RunContext, plan, *, vectors: str, flags: str) -> None:
    """Register an (L, P, d) float32 table of ``plan``'s picks and its filled flags on ``holder``."""
    P = plan.size if plan is not None else 0
    holder._add_state(vectors, np.zeros((ctx.num_layers, P, ctx.dim), np.float32), merge=Fill(flags))
    holder._add_state(flags, np.zeros(P, bool), merge="or", per_layer=False)


class SampleMeasure(Measure):
    """The PCA samples: on while ``--samples-per-token`` is not 0; never dropped."""

    name = "samples"
    title = "samples"
    table_names = SAMPLES_TABLES
    policy = "kept whenever asked for (--samples-per-token 0 leaves it out)"

    def __init__(self, ctx: RunContext):
        self.plan = ctx.plan.samples
        planned_vectors(self, ctx, self.plan, vectors="vectors", flags="filled")
        self._keys = position_keys(self.plan)

    @classmethod
    def asked(cls, cfg: RunConfig) -> bool:
        return cfg.samples_per_token != 0

    @classmethod
    def for_run(cls, ctx: RunContext) -> SampleMeasure | None:
        """Held when the plan picked positions (none when ``--samples-per-token 0`` or no type was chosen)."""
        return cls(ctx) if ctx.plan.samples.size else None

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """The float32 vectors (L, P, d) of the P picked positions and their filled flags: 4·L·P·d + P bytes."""
        P = int(ctx.plan.samples.size)
        return {"vectors": ((ctx.num_layers, P, ctx.dim), np.float32), "filled": ((P,), np.bool_)}

    @classmethod
    def update_bytes(cls, ctx: RunContext, n: int, rows: int) -> int:
        """The batch's picked rows gathered at every layer (float32) before they are stored: 4·L·m·d, m ≤ n the most
        picks in one batch."""
        return 4 * ctx.num_layers * min(n, most_picks(ctx.plan.samples)) * ctx.dim

    @classmethod
    def publish_bytes(cls, ctx: RunContext) -> int:
        """The table's parts are views of the state; each part adds its columns and token strings (about 64
        bytes a position): 64·P."""
        return 64 * int(ctx.plan.samples.size)

    def update(self, batch: StateBatch) -> None:
        fill_planned(self.vectors, self.filled, self.plan, self._keys, batch)

    def result(self) -> dict:
        if not self.filled.all():
            raise RuntimeError(f"{int((~self.filled).sum())} sampled positions were never filled")
        return {"vectors": self.vectors}

    def tables(self, result: dict, ctx: RunContext) -> dict:
        p = self.plan
        return samples_tables(
            ctx.layers,
            token_ids=p.token_ids,
            tokens=[ctx.tokens.get(int(t), "") for t in p.token_ids],
            i=p.i,
            vectors=result["vectors"],
            sentence_ids=p.sentence,
            positions=p.offset,
            sentences=None,
            char_start=p.char_start,
            char_end=p.char_end,
        )

    def sentence_ids(self, result) -> set[int]:
        return {int(s) for s in np.unique(self.plan.sentence)}

    def run_meta(self, result) -> dict:
        return {"n_samples": self.plan.size, "n_sampled_types": int(np.unique(self.plan.token_ids).size)}


__all__ = ["SampleMeasure", "locate", "position_keys", "fill_planned", "Fill", "planned_vectors"]
