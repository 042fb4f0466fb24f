"""The samples accumulator: the raw embeddings picked by the plan (``samples.plan_samples``) for
the PCA clouds (Fig. 1, App. A) and the token explorer, with the sentence and position each came
from. Memory: (L, P, d) float32 for P picks, filled batch by batch from the main pass.

Run-file table: ``samples`` (layer, token_id, token, i, vector, sentence_id, position); the text of
the sentences they point at goes to the run's ``sentences`` table (``sentence_ids``).
"""
from __future__ import annotations

import numpy as np
import torch

from normvar_core.pipeline.contracts import Accumulator, RunContext, StateBatch
from normvar_core.runs.tables import samples_tables

_KEY = np.int64(1 << 24)  # sentence_id * _KEY + position identifies a position in the corpus


def locate(plan, keys_of_plan: np.ndarray, batch: StateBatch) -> tuple[np.ndarray, np.ndarray]:
    """The plan's picks that lie in ``batch`` and their column in the batch's states:
    (pick indices, state indices). ``keys_of_plan`` = sentence * _KEY + offset of every pick."""
    picks = plan.by_batch.get(int(batch.index))
    e = np.zeros(0, np.int64)
    if picks is None or picks.size == 0 or batch.size == 0:
        return e, e
    keys = (torch.as_tensor(batch.sentence_ids).cpu().numpy().astype(np.int64) * _KEY
            + torch.as_tensor(batch.positions).cpu().numpy().astype(np.int64))
    order = np.argsort(keys, kind="stable")
    where = np.minimum(np.searchsorted(keys[order], keys_of_plan[picks]), keys.size - 1)
    hit = keys[order][where] == keys_of_plan[picks]
    return picks[hit], order[where[hit]]  # an out-of-memory half batch holds only some rows


def position_keys(plan) -> np.ndarray:
    return plan.sentence.astype(np.int64) * _KEY + plan.offset.astype(np.int64)


class SampleAccumulator(Accumulator):
    name = "samples"
    table_names = ("samples",)

    def __init__(self, ctx: RunContext):
        self.plan = ctx.plan.samples
        self.vectors = np.zeros((ctx.num_layers, self.plan.size, ctx.dim), dtype=np.float32)
        self.filled = np.zeros(self.plan.size, dtype=bool)
        self._keys = position_keys(self.plan)

    @classmethod
    def for_run(cls, ctx: RunContext) -> "SampleAccumulator | None":
        plan = getattr(ctx.plan, "samples", None)
        return cls(ctx) if plan is not None and plan.size else None

    @classmethod
    def planned_bytes(cls, ctx: RunContext) -> int:
        """4·L·P·d (float32 vectors of the P picked positions) + P (filled flags)."""
        plan = getattr(ctx.plan, "samples", None)
        P = int(plan.size) if plan is not None else 0
        return 4 * ctx.num_layers * P * ctx.dim + P

    def update(self, batch: StateBatch) -> None:
        picks, idx = locate(self.plan, self._keys, batch)
        if picks.size == 0:
            return
        X = batch.states[:, torch.as_tensor(idx, device=batch.states.device)]
        self.vectors[:, picks] = X.detach().to("cpu", torch.float32).numpy()
        self.filled[picks] = True

    def merge(self, other: "SampleAccumulator") -> "SampleAccumulator":
        self.vectors[:, other.filled] = other.vectors[:, other.filled]
        self.filled |= other.filled
        return self

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"vectors": self.vectors, "filled": self.filled}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        v = np.asarray(state["vectors"], np.float32)
        if v.shape != self.vectors.shape:
            raise ValueError("sample checkpoint does not match the plan")
        self.vectors[...] = v
        self.filled[...] = np.asarray(state["filled"], bool)

    def result(self) -> dict:
        if not self.filled.all():
            raise RuntimeError(f"{int((~self.filled).sum())} sampled positions were never filled")
        return {"vectors": self.vectors}

    def tables(self, result: dict, ctx: RunContext) -> dict:
        p = self.plan
        return samples_tables(
            ctx.layers, token_ids=p.token_ids, tokens=[ctx.tokens.get(int(t), "") for t in p.token_ids], i=p.i,
            vectors=result["vectors"], sentence_ids=p.sentence, positions=p.offset, sentences=None,
            char_start=p.char_start, char_end=p.char_end)

    def sentence_ids(self, result) -> set[int]:
        return {int(s) for s in np.unique(self.plan.sentence)}

    def run_meta(self, result) -> dict:
        return {"n_samples": self.plan.size, "n_sampled_types": int(np.unique(self.plan.token_ids).size)}


__all__ = ["SampleAccumulator", "locate", "position_keys"]
