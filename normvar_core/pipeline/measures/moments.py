"""The moments measure: exact n_t, mu(X_t), Q/M/V per (layer, token type) (the study's §3–4,
eqs. 1–6) — ``TokenMoments`` behind the measure contract.

Run-file tables: ``token_stats``, ``token_means``, ``layer_stats`` (eqs. 8–11 over all types),
``frequency_hist`` (Fig. 10) and, in a word run, ``word_units`` (App. J).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures.base import Measure, Planned
from normvar_core.pipeline.measures.token_moments import TokenMoments
from normvar_core.runs.schema import MOMENTS_TABLES
from normvar_core.runs.tables import moments_tables, word_units_table
from normvar_core.stats.tokenstats import TokenStats


class MomentsMeasure(Measure):
    """Always on: every run holds the moments, and the other measures build on their counts (its tables check
    them against the plan's, ``check_counts``)."""

    name = "moments"
    title = "moments"
    table_names = MOMENTS_TABLES
    policy = "the study's core: never dropped (--mean-dtype float32 halves its means)"
    backend: ClassVar[str] = "auto"
    """``TokenMoments``' update path: "auto" (the numba kernel on CPU, torch ``index_add_`` on other
    devices), or "torch" on any device (the GPU path, which tests run on CPU against the kernel)."""

    def __init__(self, ctx: RunContext):
        tm = TokenMoments(
            num_layers=ctx.num_layers,
            dim=ctx.dim,
            device=ctx.device,
            mean_dtype=ctx.cfg.mean_dtype,
            layer_index=ctx.layers,
            backend=self.backend,
        )
        tm.register(ctx.plan.token_ids)  # the types are known: size the tables once (rows too, on torch)
        self._add_state(
            "acc", tm
        )  # nested: keys measure.ids, measure.n, measure.mean, measure.s, ... (Chan's merge, layer by layer)

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """The registered per-type moments of the T types (``TokenMoments.planned``):
        L·T·d·b_μ + 8·L·T + 16·T + 8·L + 8 bytes (b_μ = 8, or 4 with --mean-dtype float32)."""
        tm = TokenMoments.planned(ctx.num_layers, ctx.num_types, ctx.dim, ctx.cfg.mean_dtype)
        return {f"acc.{k}": v for k, v in tm.items()}

    @classmethod
    def publish_bytes(cls, ctx: RunContext) -> int:
        """The result copies the means once: L·T·d·b_μ."""
        return ctx.num_layers * ctx.num_types * ctx.dim * ctx.mean_bytes

    @property
    def n_embeddings(self) -> int:
        return int(self.acc.n_embeddings)

    def update(self, batch: StateBatch) -> None:
        self.acc.update(batch.states, batch.token_ids)

    def result(self) -> TokenStats:
        return self.acc.result()

    def tables_written(self, ctx: RunContext) -> tuple[str, ...]:
        """``word_units`` only in a word run (App. J)."""
        return tuple(t for t in self.table_names if t != "word_units" or ctx.plan.word_tokens is not None)

    def tables(self, result: TokenStats, ctx: RunContext) -> dict:
        """The moments' tables, after checking the accumulated counts against the plan's (``check_counts``);
        a word run (App. J) adds ``word_units``, |T_w| of every word type."""
        check_counts(ctx.plan, result)
        tokens = [ctx.tokens.get(int(t), "") for t in result.token_ids]
        out = dict(moments_tables(result, tokens))
        if ctx.plan.word_tokens is not None:
            out["word_units"] = word_units_table(result.token_ids, ctx.plan.word_tokens)
        return out

    @classmethod
    def null_tables(cls, run, kind: str, stats, null, *, seed: int, search=None) -> dict:
        """The null's own moments (``null``, drawn given the run's n_t): token_stats, token_means, layer_stats and
        frequency_hist, with the run's token strings (``word_units`` is not drawn)."""
        return dict(moments_tables(null, run.tokens()["token"].tolist()))


def check_counts(plan, stats: TokenStats) -> None:
    """The counts planned from tokenization must equal the accumulated ones (same positions)."""
    if not (np.array_equal(plan.token_ids, stats.token_ids) and np.array_equal(plan.counts, stats.n)):
        raise RuntimeError(
            "token counts from tokenization differ from the accumulated statistics; "
            "the counted positions and the state source disagree"
        )


__all__ = ["MomentsMeasure", "check_counts"]
