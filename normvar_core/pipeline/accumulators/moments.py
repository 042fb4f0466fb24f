"""The moments accumulator: exact n_t, mu(X_t), Q/M/V per (layer, token type) (the study's §3–4,
eqs. 1–6) — ``TokenMoments`` behind the accumulator contract.

Run-file tables: ``token_stats``, ``token_means``, ``layer_stats`` (eqs. 8–11 over all types) and
``frequency_hist`` (Fig. 10).
"""
from __future__ import annotations

from typing import ClassVar

from normvar_core.pipeline.contracts import Accumulator, RunContext, StateBatch
from normvar_core.pipeline.accumulators.token_moments import TokenMoments
from normvar_core.runs import tables as T
from normvar_core.stats.tokenstats import TokenStats


class MomentsAccumulator(Accumulator):
    name = "moments"
    table_names = T.MOMENTS_TABLES
    backend: ClassVar[str] = "auto"
    """``TokenMoments``' update path: "auto" (the numba kernel on CPU, torch ``index_add_`` on other
    devices), or "torch" on any device (the GPU path, which tests run on CPU against the kernel)."""

    def __init__(self, ctx: RunContext):
        tm = TokenMoments(num_layers=ctx.num_layers, dim=ctx.dim, device=ctx.device, mean_dtype=ctx.cfg.mean_dtype,
                          layer_index=ctx.layers, backend=self.backend)
        tm.register(ctx.plan.token_ids)  # the types are known: size the tables once (rows too, on torch)
        self._add_state("acc", tm)  # nested: keys acc.ids, acc.n, acc.mean, acc.s, ... (Chan's merge, layer by layer)

    @classmethod
    def for_run(cls, ctx: RunContext) -> "MomentsAccumulator":
        return cls(ctx)

    @classmethod
    def planned_bytes(cls, ctx: RunContext) -> int:
        """L·T·d·b_μ (the means; b_μ = 8, or 4 with mean_dtype float32) + 8·L·T (S_t) + 16·T (ids, n_t)
        + 8·L + 8 (layer index, |X|)."""
        L, d, T = ctx.num_layers, ctx.dim, ctx.num_types
        return L * T * d * ctx.mean_bytes + 8 * L * T + 16 * T + 8 * L + 8

    @property
    def n_embeddings(self) -> int:
        return int(self.acc.n_embeddings)

    def update(self, batch: StateBatch) -> None:
        self.acc.update(batch.states, batch.token_ids)

    def result(self) -> TokenStats:
        return self.acc.result()

    def tables(self, result: TokenStats, ctx: RunContext) -> dict:
        tokens = [ctx.tokens.get(int(t), "") for t in result.token_ids]
        return T.moments_tables(result, tokens)


__all__ = ["MomentsAccumulator"]
