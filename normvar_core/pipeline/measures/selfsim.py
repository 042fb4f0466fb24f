"""Self-similarity of every token type (Ethayarajh 2019), exact: with u = x/‖x‖ and s_t = Σ_{x∈X_t} u,
the mean cosine between distinct occurrences of t is (‖s_t‖² − n_t) / (n_t (n_t − 1)).

Streams s_t per (layer, type) in float64: an L × T × d table, the size of the means. In ``auto``
(RunConfig ``self_similarity``: auto / on / off) it is kept when it fits in the device's memory after
everything else the run holds (``memory.plan_memory``, after the layer geometry); the reason it is
off is recorded in the run notes. Table:
``token_selfsim(layer, token_id, n, self_similarity)`` (NaN for types seen once).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures.base import Measure, Planned
from normvar_core.pipeline.measures.layerview import resolve_scatter_dtype
from normvar_core.runs.schema import SELFSIM_TABLES
from normvar_core.stats.layer_geometry import mean_cosine


class SelfSimilarityMeasure(Measure):
    """``--self-similarity`` auto / on / off: asked unless off, droppable in auto."""

    name = "selfsim"
    title = "self-similarity"
    table_names = SELFSIM_TABLES
    policy = "in auto, an L x T x d table kept only when it fits after everything else the run holds"
    fix = "--self-similarity off drops the L x T x d self-similarity table"
    backend = "auto"
    """"auto": the numba kernel on the CPU, torch ``index_add_`` elsewhere; "torch" on any device (the
    GPU path, which tests run on the CPU against the kernel)."""

    def __init__(self, ctx: RunContext):
        self.layers = list(ctx.layers)
        self.device = ctx.torch_device
        self.token_ids = torch.as_tensor(np.asarray(ctx.plan.token_ids, np.int64), device=self.device)
        T = self.token_ids.numel()
        self._add_state("sum_u", torch.zeros((len(self.layers), T, ctx.dim), dtype=torch.float64, device=self.device))
        self._add_state("n", torch.zeros(T, dtype=torch.int64, device=self.device), per_layer=False)
        self.scatter_dtype = resolve_scatter_dtype(ctx.cfg.scatter_dtype, self.device)

    @classmethod
    def asked(cls, cfg: RunConfig) -> bool:
        return cfg.self_similarity != "off"

    @classmethod
    def may_drop(cls, cfg: RunConfig) -> bool:
        return cfg.self_similarity == "auto"

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """Σu per layer and type (L, T, d) float64 and n_t (T,): 8·L·T·d + 8·T bytes."""
        T = ctx.num_types
        return {"sum_u": ((ctx.num_layers, T, ctx.dim), np.float64), "n": ((T,), np.int64)}

    @classmethod
    def drop_reason(cls, ctx: RunContext, *, need: int, free: int, subset: list[int] | None) -> str:
        fix = f", or fewer layers (e.g. --layers {','.join(map(str, subset))})" if subset else ""
        return (
            f"self-similarity skipped: its {ctx.num_layers} x {ctx.num_types:,} x {ctx.dim} table "
            f"needs {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB left on the device after the rest of the run — "
            f"--self-similarity on to keep it anyway{fix}"
        )

    def update(self, batch: StateBatch) -> None:
        """s_t += Σ x/‖x‖ over the batch's occurrences of t: on the CPU one fused numba pass
        (``stats.kernels.unit_sum_kernel``, float64); elsewhere torch ``index_add_`` per layer, in the
        run's scatter dtype per batch (float32: summed per batch, then added to the float64 table)."""
        if batch.size == 0:
            return
        X = batch.states.to(self.device)
        if self.device.type == "cpu" and self.backend == "auto":
            from normvar_core.stats.kernels import type_groups, unit_sum_kernel  # numba, on the CPU path only

            ids = np.asarray(torch.as_tensor(batch.token_ids).numpy(), np.int64)
            order, starts, uniq, bounds = type_groups(ids)
            rows = np.searchsorted(self.token_ids.numpy(), uniq)
            if X.dtype in (torch.float16, torch.bfloat16):
                X = X.float()
            unit_sum_kernel(X.contiguous().numpy(), order, starts, rows, self.sum_u.numpy(), bounds)
            self.n.numpy()[rows] += np.diff(starts)
            return
        ids = torch.as_tensor(batch.token_ids, device=self.device)  # type: ignore[assignment]  # the ids as a tensor
        rows = torch.searchsorted(self.token_ids, ids)  # type: ignore[call-overload]
        self.n.index_add_(0, rows, torch.ones_like(rows))
        dt = torch.float64 if self.scatter_dtype == "float64" else torch.float32
        for l in range(X.shape[0]):
            x = X[l].to(dt)
            norms = torch.linalg.vector_norm(x, dim=1, keepdim=True, dtype=torch.float64).to(dt)
            u = torch.where(norms > 0, x / norms.clamp_min(torch.finfo(dt).tiny), torch.zeros_like(x))
            if dt == torch.float64:
                self.sum_u[l].index_add_(0, rows, u)
            else:  # the batch's sums in float32, accumulated across batches in float64
                part = torch.zeros((self.sum_u.shape[1], self.sum_u.shape[2]), dtype=dt, device=self.device)
                self.sum_u[l] += part.index_add_(0, rows, u).to(torch.float64)

    def result(self) -> dict:
        s = self.sum_u.cpu().numpy()
        n = self.n.cpu().numpy()
        return {"n": n, "self_similarity": mean_cosine(np.einsum("ltd,ltd->lt", s, s), n[None, :])}

    def tables(self, result: dict, ctx: RunContext) -> dict:
        L, T = result["self_similarity"].shape
        return {
            "token_selfsim": pa.table(
                {
                    "layer": np.repeat(np.asarray(self.layers, np.int32), T),
                    "token_id": np.tile(self.token_ids.cpu().numpy(), L),
                    "n": np.tile(result["n"].astype(np.int64), L),
                    "self_similarity": result["self_similarity"].reshape(-1),
                }
            )
        }


__all__ = ["SelfSimilarityMeasure"]
