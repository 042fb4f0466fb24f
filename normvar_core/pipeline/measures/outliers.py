"""Outlier dimensions and massive activations, per stored layer (decoders carry activations
100–1000× the median on the first position and a few dimensions: SmolLM2's first-token norm ≈ 2.3e4,
Gemma's <bos> ≈ 8.3e4, against 1e2–1e3 elsewhere).

Streamed exactly: per dimension j the mean and variance of h_j (Chan's pooled update) and max |h_j|;
Σ‖x‖² over all embeddings and over those at position 0 (the share of Q(X) = E‖x‖² carried by the
first position); the ``TOP_K`` largest |h| of distinct (token, position, dimension) keys — each key once,
at its largest |h|, with the sentence that carries it (a context-free state such as layer 0's [CLS]
repeats in every sentence and would otherwise fill the list) — merge = the top distinct keys of the
union, ties broken by (sentence, position, dim). Per batch only the entries with |h| >= tau can enter,
tau = the smallest |value| of the layer's kept TOP_K (``_threshold``): one pass over the states collects
them with max |h_j| (a numba kernel on the CPU), instead of a top-k of every row.

Tables: ``dim_stats(layer, dim, mean, var, max_abs)`` and
``top_activations(layer, rank, value, dim, token_id, token, sentence_id, position)``; the shares go
to ``layer_outliers(layer, q, q_share_pos0, q_share_top1dim, q_share_top5dim, max_abs, max_over_median)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures.base import Planned
from normvar_core.pipeline.measures.covariance import Covariance
from normvar_core.pipeline.measures.layerview import LayerMajor, LayerView
from normvar_core.pipeline.measures.state import Custom
from normvar_core.runs.schema import OUTLIERS_TABLES

TOP_K = 20
SAMPLE_ROWS = 256  # rows of largest ‖x‖² whose top sets the first batch's threshold (``_threshold``)


class OutlierMeasure(LayerMajor):
    """On with the layer geometry (``--no-geometry`` switches both off); small, never dropped."""

    name = "outliers"
    title = "outliers"
    table_names = OUTLIERS_TABLES
    policy = "small (24·L·d bytes): kept whenever the geometry is asked for"
    use_threshold = True  # False: every batch through the row-wise top-k candidates (``_row_top``)

    def __init__(self, ctx: RunContext):
        super().__init__(ctx)
        L, d = ctx.num_layers, ctx.dim
        self.dim = d
        z: dict[str, Any] = dict(dtype=torch.float64, device=self.device)
        # n, the per-dimension mean and m2 = Σ (h_j − mean_j)²
        self.cov = Covariance(self, (L, d), scatter="m2", outer=False, device=self.device)
        self._add_state("max_abs", torch.zeros((L, d), **z), merge="max")
        self._add_state("sq_all", torch.zeros(L, **z))  # Σ ‖x‖²
        self._add_state("sq_pos0", torch.zeros(L, **z))  # Σ ‖x‖² over position 0
        # top activations: value (signed), dim, token, sentence, position per layer (TOP_K once the first batch is in)
        self._add_state(
            "top", np.zeros((L, 0, 5), np.float64), merge=Custom(OutlierMeasure.merge_top), fixed_shape=False
        )

    @classmethod
    def asked(cls, cfg: RunConfig) -> bool:
        return cfg.geometry

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """Per dimension the float64 mean, M2 and max |h| (L, d), Σ‖x‖² overall and at position 0 (L,), the
        top activations (L, TOP_K, 5) and n: 24·L·d + 16·L + 40·L·K + 8 bytes, K = TOP_K (``_distinct`` pads
        the list to TOP_K rows whatever the run's size)."""
        L, d = ctx.num_layers, ctx.dim
        return {
            **Covariance.planned(L, d, scatter="m2", outer=False),
            "max_abs": ((L, d), np.float64),
            "sq_all": ((L,), np.float64),
            "sq_pos0": ((L,), np.float64),
            "top": ((L, TOP_K, 5), np.float64),
        }

    @classmethod
    def update_bytes(cls, ctx: RunContext, n: int, rows: int) -> int:
        """|x| of a layer and the candidates' masks beside it: 8·n·d."""
        return 8 * n * ctx.dim

    def begin_batch(self, batch: StateBatch) -> None:
        self._pos0 = torch.as_tensor(batch.positions, device=self.device) == 0
        self._keys = np.stack(
            [torch.as_tensor(v).cpu().numpy() for v in (batch.token_ids, batch.sentence_ids, batch.positions)], axis=1
        ).astype(np.float64)
        self._tops: list = []

    def update_layer(self, l: int, view: LayerView, batch: StateBatch) -> None:
        """Per-dimension mean and Σ(h_j − m_j)² (diag of the shared batch scatter, pooled by Chan),
        max |h_j|, Σ‖x‖² overall and at position 0, and the top |h| so far — one shared layer view."""
        self.cov.fold(l, view)
        sq = view.sq
        self.sq_all[l] += sq.sum()
        self.sq_pos0[l] += sq[self._pos0].sum()
        tau = self._threshold(l, view)
        rows, dims = self._row_top(self._fold_max(l, view.x.abs())) if tau is None else self._at_least(l, view.x, tau)
        cand = self._table(view.x, rows, dims)  # fold into the kept top: the TOP_K distinct keys of the union
        self._tops.append(self._distinct(self._contenders(np.concatenate([self.top[l], cand]))))

    def end_batch(self, batch: StateBatch) -> None:
        self.top = np.stack(self._tops)
        self._pos0 = self._keys = self._tops = None  # type: ignore[assignment]  # until the next batch

    def _threshold(self, l: int, view: LayerView) -> float | None:
        """tau such that TOP_K distinct keys reach |value| >= tau (None: no such tau known; or the
        threshold is off). An entry with |h| < tau is beaten by all of them and cannot enter (a kept key
        keeps its larger value); entries with |h| = tau can (ties by sentence, position, dim). tau = min
        |value| of layer l's kept top once it holds TOP_K finite rows; before that (the first batch) the
        same of the top of the kept rows and the ``SAMPLE_ROWS`` rows of x of largest ‖x‖²."""
        if not self.use_threshold:
            return None
        top = self.top[l]
        if len(top) < TOP_K or not np.isfinite(top[:, 0]).all():
            rows = torch.topk(view.sq, min(SAMPLE_ROWS, view.n)).indices.to(view.x.device)
            sub, dims = self._row_top(view.x[rows].abs())
            top = self._distinct(np.concatenate([top, self._table(view.x, rows[sub], dims)]))
        return float(np.abs(top[:, 0]).min()) if np.isfinite(top[:, 0]).all() else None

    def _at_least(self, l: int, x: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(row, dim) of the entries with |h| >= tau, and max |h_j| folded into max_abs: on the CPU one
        numba pass over x in place (``kernels.abs_at_least_kernel``), elsewhere through |x|."""
        if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64):
            a = x.abs()
            self._fold_max(l, a)
            idx = (a >= tau).nonzero()
            return idx[:, 0], idx[:, 1]
        from normvar_core.stats.kernels import abs_at_least_kernel  # numba, on the CPU path only

        xn, max_abs = x.contiguous().numpy(), self.max_abs[l].numpy()
        out = np.empty(max(x.shape[0], 1024), np.int64)
        count = abs_at_least_kernel(xn, tau, max_abs, out)
        if count > len(out):
            out = np.empty(count, np.int64)
            abs_at_least_kernel(xn, tau, max_abs, out)
        flat = torch.from_numpy(out[:count])
        return flat // x.shape[1], flat % x.shape[1]

    def _fold_max(self, l: int, a: torch.Tensor) -> torch.Tensor:
        self.max_abs[l] = torch.maximum(self.max_abs[l], a.max(0).values.to(torch.float64))  # NaN propagates
        return a

    def _row_top(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(row, dim) of each row's entries of a = |x| >= the row's k-th largest finite one (k = min(TOP_K,
        d); ties at it included). A key whose largest entry is not among them is beaten strictly by k
        other dimensions of the same (token, position), i.e. by k other keys: it cannot be in the TOP_K."""
        kth = torch.topk(torch.nan_to_num(a, nan=-1.0, posinf=-1.0), min(TOP_K, self.dim), dim=1).values[:, -1:]
        idx = (a >= kth).nonzero()
        return idx[:, 0], idx[:, 1]

    def _table(self, x: torch.Tensor, rows: torch.Tensor, dims: torch.Tensor) -> np.ndarray:
        """Rows (value, dim, token, sentence, position) of the entries (row, dim) of x, in float64."""
        vals = x[rows, dims].to(torch.float64).cpu().numpy()
        return np.concatenate(
            [vals[:, None], dims.cpu().numpy()[:, None].astype(np.float64), self._keys[rows.cpu().numpy()]], axis=1
        )

    @staticmethod
    def _contenders(t: np.ndarray) -> np.ndarray:
        """The rows of ``t`` that can decide ``_distinct(t)``: those with |value| >= tau, tau = the TOP_K-th
        largest of the keys' maxima max_{rows of key} |value|. At least TOP_K keys reach tau, so a key whose
        maximum is below it is not among the TOP_K, and every key that is keeps its largest rows (all of its
        rows at its maximum, for the tie rule): ``_distinct`` of the contenders = ``_distinct(t)``, after one
        sort of int64 key codes instead of a lexsort and a row-wise unique of every candidate."""
        v = np.abs(t[:, 0])
        ok = np.isfinite(v)
        keys = t[ok][:, [2, 4, 1]].astype(np.int64)  # (token, position, dim), all >= 0
        span = keys.max(0) + 1 if len(keys) else np.ones(3, np.int64)
        if len(keys) <= TOP_K or keys.min() < 0 or float(span[0]) * float(span[1]) * float(span[2]) >= 2.0**62:
            return t
        code = (keys[:, 0] * span[1] + keys[:, 1]) * span[2] + keys[:, 2]
        order = np.argsort(code, kind="stable")
        code, vv = code[order], v[ok][order]
        starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
        key_max = np.maximum.reduceat(vv, starts)
        if len(key_max) <= TOP_K:
            return t
        tau = np.partition(key_max, len(key_max) - TOP_K)[len(key_max) - TOP_K]
        return t[ok & (v >= tau)]

    @staticmethod
    def _distinct(t: np.ndarray) -> np.ndarray:
        """The TOP_K rows of largest |value| with distinct (token, position, dim) keys, each key at its
        largest |value| (ties by (sentence, position, dim)); padded with rows of NaN to TOP_K."""
        t = t[np.isfinite(t[:, 0])]
        order = np.lexsort((t[:, 1], t[:, 4], t[:, 3], -np.abs(t[:, 0])))
        t = t[order]
        _, first = np.unique(t[:, [2, 4, 1]], axis=0, return_index=True)
        t = t[np.sort(first)][:TOP_K]
        if len(t) < TOP_K:
            t = np.concatenate([t, np.full((TOP_K - len(t), 5), np.nan)])
        return t

    def _keep(self, top: np.ndarray) -> None:
        self.top = np.stack([self._distinct(t) for t in top])

    def merge_top(self, reader) -> None:
        """The top distinct keys of the union (the ``Custom`` rule of the registered ``top``)."""
        if int(reader.get("n").reshape(-1)[0]):
            self._keep(np.concatenate([self.top, np.stack(list(reader.blocks("top")))], axis=1))

    def result(self) -> dict:
        mean, var = self.mean.cpu().numpy(), self.cov.covariance().cpu().numpy()
        max_abs = self.max_abs.cpu().numpy()
        e2 = var + mean**2  # E[h_j²]; Σ_j E[h_j²] = Q(X)
        q = e2.sum(1)
        srt = -np.sort(-e2, axis=1)
        med = np.median(max_abs, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            layer = {
                "layer": np.asarray(self.layers, np.int32),
                "q": q,
                "q_share_pos0": (self.sq_pos0 / self.sq_all).cpu().numpy(),
                "q_share_top1dim": srt[:, 0] / q,
                "q_share_top5dim": srt[:, :5].sum(1) / q,
                "max_abs": max_abs.max(1),
                "max_over_median": max_abs.max(1) / med,
            }
        return {"mean": mean, "var": var, "max_abs": max_abs, "layer": layer, "top": self.top}

    def tables(self, result: dict, ctx: RunContext) -> dict:
        L, d = len(self.layers), self.dim
        top = result["top"]
        k = top.shape[1]
        keep = np.isfinite(top[:, :, 0]).reshape(-1)  # fewer distinct keys than TOP_K: NaN rows
        top = np.nan_to_num(top, nan=-1.0)
        tok_ids = top[:, :, 2].astype(np.int64).reshape(-1)
        dim_stats = pa.table(
            {
                "layer": np.repeat(np.asarray(self.layers, np.int32), d),
                "dim": np.tile(np.arange(d, dtype=np.int32), L),
                "mean": result["mean"].reshape(-1),
                "var": result["var"].reshape(-1),
                "max_abs": result["max_abs"].reshape(-1),
            }
        )
        top_t = pa.table(
            {
                "layer": np.repeat(np.asarray(self.layers, np.int32), k),
                "rank": np.tile(np.arange(k, dtype=np.int32), L),
                "value": top[:, :, 0].reshape(-1),
                "dim": top[:, :, 1].astype(np.int32).reshape(-1),
                "token_id": tok_ids,
                "token": [ctx.tokens.get(int(t), "") for t in tok_ids],
                "sentence_id": top[:, :, 3].astype(np.int64).reshape(-1),
                "position": top[:, :, 4].astype(np.int32).reshape(-1),
            }
        ).filter(pa.array(keep))
        return {"dim_stats": dim_stats, "top_activations": top_t, "layer_outliers": pa.table(result["layer"])}

    def sentence_ids(self, result) -> set[int]:
        return {int(s) for s in np.unique(result["top"][:, :, 3]) if np.isfinite(s) and s >= 0}


__all__ = ["OutlierMeasure", "TOP_K"]
