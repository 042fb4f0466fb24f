"""The split-half measure: the corpus in two halves, for the intervals of the corpus-level
quantities and the geometry.

Every counted position goes to half A or B by a stable hash of its sentence id
(``half_of``: SplitMix64 of the id, lowest bit), so a sentence never straddles the halves and the split
is the same whatever the batches, their order or the shards. Per half it keeps exactly what the
main figures need, with the same code as the main measures:

* a ``TokenMoments`` (n_t, μ(X_t), S_t per layer and type; Yamagiwa & Shimodaira 2024 eqs. 1–6) — merged, the two
  halves ARE the run's moments (Chan's update is exact; ``tests/test_findings.py`` checks to 1e-12);
* n, μ and the scatter Σ(x − μ)(x − μ)ᵀ per layer (the geometry's pooled float64 covariance, seed
  004 §2.3), when the run has the geometry on;
* Σ‖x‖² over all positions and over position 0 (the outliers' share of Q(X)).

``result()`` merges the halves for the whole corpus and gives the ``halves_layer`` table — per layer
and half (all / a / b): Q, M, V, V_W, V_B over the band's types (counts of the whole run, so both
halves use the same types; eqs. 8–15), the ratios of Fig. 5/6, the anisotropy λ₁/Σλ, the position-0
share — and the ``intervals`` table (``stats.intervals``: split-half θ ± 1.96 |θ_A − θ_B| / 2, and
the bootstrap over types of the trade-off, 1,000 seeded resamples).

Memory (``planned_state``), with T types, L kept layers, d the width, e = 8 (float64 means) or 4
(``--mean-dtype float32``), G = 1 with the geometry on else 0:

    2 · [L·T·(d·e + 8) + 16·T + 8·L + 8  +  G·8·L·(d² + d)  +  16·L + 8]  bytes,

i.e. twice the moments' per-type state plus twice the geometry's covariance; ``result()`` holds a
third copy of the per-type state while it merges. MiniLM (L = 7, d = 384, T = 10k): 0.45 GB;
bert-base shape (L = 13, d = 768, T = 30k): 4.8 GB — switch it off with ``--no-halves``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import torch

from normvar_core.config import RunConfig
from normvar_core.constants import STUDY_BAND
from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures.base import Planned
from normvar_core.pipeline.measures.covariance import Covariance
from normvar_core.pipeline.measures.layerview import LayerMajor, LayerView
from normvar_core.pipeline.measures.state import Stateful
from normvar_core.pipeline.measures.token_moments import TokenMoments
from normvar_core.runs.schema import HALVES_TABLES
from normvar_core.stats.layer_geometry import splitmix64
from normvar_core.stats.tokenstats import in_band

HALF_SALT = 0x5EED_0F_4A1F


def half_of(sentence_ids) -> np.ndarray:
    """0 (half A) or 1 (half B) per sentence id: the lowest bit of SplitMix64(id ^ salt)."""
    ids = np.asarray(sentence_ids, dtype=np.int64).astype(np.uint64)
    return (splitmix64(ids ^ np.uint64(HALF_SALT)) & np.uint64(1)).astype(np.int64)


def half_rows(batch: StateBatch, device) -> list[torch.Tensor]:
    """The batch's rows in half A and in half B (``half_of`` their sentence ids), as index tensors on ``device``."""
    sid = batch.sentence_ids.cpu().numpy() if isinstance(batch.sentence_ids, torch.Tensor) else batch.sentence_ids
    half = half_of(sid)
    return [torch.as_tensor(np.flatnonzero(half == h), device=device) for h in (0, 1)]


def view_split(rows: list[torch.Tensor]):
    """The layer views' split into the two halves (``LayerView``'s (order, sizes)), None when a half is empty."""
    sizes = [int(r.numel()) for r in rows]
    return (torch.cat(rows), sizes) if 0 not in sizes else None


class Half(Stateful):
    """One half's registered state: its TokenMoments (nested, keys ``tm.*``), n, the per-layer mean and
    scatter (Chan; empty (L, 0, 0) without the geometry) and Σ‖x‖² overall and at position 0."""

    def __init__(self, ctx: RunContext, device: torch.device, with_geometry: bool):
        L, d = ctx.num_layers, int(ctx.dim)
        tm = TokenMoments(num_layers=L, dim=d, device=device, mean_dtype=ctx.cfg.mean_dtype, layer_index=ctx.layers)
        self._add_state("tm", tm.register(ctx.plan.token_ids))
        z: dict[str, Any] = dict(dtype=torch.float64, device=device)
        g = d if with_geometry else 0  # no geometry: no covariance kept, only the count
        self.cov = Covariance(self, (L, g), device=device)  # n, mean, scatter
        self._add_state("sq_all", torch.zeros(L, **z))
        self._add_state("sq_pos0", torch.zeros(L, **z))


class HalvesMeasure(LayerMajor):
    """On with ``--halves`` (the default); reuses the moments' result (``uses_results``)."""

    name = "halves"
    splits_view = True
    title = "halves"
    table_names = HALVES_TABLES
    uses_results = ("moments",)
    policy = "twice the per-type moments: a run short of memory keeps bootstrap intervals only"
    planned_exact = False  # a type that one half never sees holds no row there: the plan's T rows are the bound

    def __init__(self, ctx: RunContext):
        super().__init__(ctx)
        self.dim = int(ctx.dim)
        self.with_geometry = bool(ctx.cfg.geometry)
        self.seed = int(ctx.cfg.seed or 0)
        self._full = None  # the run's moments result, when publish hands it over (``take_results``)
        self._add_state("a", Half(ctx, self.device, self.with_geometry))
        self._add_state("b", Half(ctx, self.device, self.with_geometry))

    @property
    def halves(self) -> tuple[Half, Half]:
        return self.a, self.b

    # ------------------------------------------------------------------ contract
    @classmethod
    def asked(cls, cfg: RunConfig) -> bool:
        return cfg.halves

    @classmethod
    def may_drop(cls, cfg: RunConfig) -> bool:
        return True

    @classmethod
    def update_bytes(cls, ctx: RunContext, n: int, rows: int) -> int:
        """Each half's (n_h, μ_h, S_h) of a layer (``LayerView.parts``: two d × d) and Chan's pooling of one (its
        outer product): 3·8·d²."""
        return 3 * 8 * ctx.dim**2

    @classmethod
    def publish_bytes(cls, ctx: RunContext) -> int:
        """The result's covariances — half A's, half B's, the pooled scatter and its covariance, 4·8·L·d² with the
        geometry — and the means of the T_band types in the study's band (from the plan's counts, as ``result``
        picks them): each half's and the whole run's rows, 3·L·T_band·d·b_μ."""
        L, d = ctx.num_layers, ctx.dim
        band = int(np.count_nonzero(in_band(np.asarray(ctx.plan.counts), *STUDY_BAND)))  # intervals.band_types
        return int(32 * L * d * d * bool(ctx.cfg.geometry) + 3 * L * band * d * ctx.mean_bytes)

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """Per half (``Half``): the per-type moments of all T types (``TokenMoments.planned``), n, with the
        geometry the float64 mean (L, d) and scatter (L, d, d) (else (L, 0) and (L, 0, 0)), Σ‖x‖² and its
        position-0 part (L,) — the formula of the module docstring. An upper bound: a half holds the rows of
        the types it saw."""
        L, d = ctx.num_layers, ctx.dim
        g = d if ctx.cfg.geometry else 0
        tm = TokenMoments.planned(L, ctx.num_types, d, ctx.cfg.mean_dtype)
        out = {}
        for h in ("a", "b"):
            out.update({f"{h}.tm.{k}": v for k, v in tm.items()})
            out.update({f"{h}.{k}": v for k, v in Covariance.planned(L, g).items()})
            out.update({f"{h}.sq_all": ((L,), np.float64), f"{h}.sq_pos0": ((L,), np.float64)})
        return out

    @classmethod
    def drop_reason(cls, ctx: RunContext, *, need: int, free: int, subset: list[int] | None) -> str:
        return (
            f"split halves skipped: two copies of the per-type moments need {need / 2**30:.1f} GiB, "
            f"{free / 2**30:.1f} GiB left on the device — keep fewer --layers, use --mean-dtype float32, "
            "or --no-halves (the findings then have bootstrap intervals only)"
        )

    # ------------------------------------------------------------------ streaming
    def begin_batch(self, batch: StateBatch) -> None:
        """Each half's rows of the batch (by ``half_of`` its sentence ids) and its moments update on
        those rows of the batch's states, read in place (``TokenMoments.update(..., rows=)``); with the
        geometry and both halves present, the layer views split into the two halves (``view_split``)."""
        pos0 = torch.as_tensor(batch.positions).to(self.device) == 0
        self._rows = half_rows(batch, self.device)
        self._rows0 = []
        for h, idx in enumerate(self._rows):
            self.halves[h].cov.count(int(idx.numel()))  # added after the batch (the layer-major loop commits it)
            self._rows0.append(idx[pos0.index_select(0, idx)])
            if idx.numel():
                self.halves[h].tm.update(batch.states, batch.token_ids, rows=idx)
        self.view_split = view_split(self._rows) if self.with_geometry else None

    def update_layer(self, l: int, view: LayerView, batch: StateBatch) -> None:
        """Σ‖x‖² (all positions, position 0) per half from the shared ‖x_i‖², and, with the geometry,
        each half's mean and scatter (``LayerView.parts``: one Gram matrix per half, whose sum is the
        batch's scatter shared with the geometry) pooled by Chan."""
        sq = view.sq
        n_h = [int(r.numel()) for r in self._rows]
        for h in (0, 1):
            if n_h[h]:
                self.halves[h].sq_all[l] += sq.index_select(0, self._rows[h]).sum()
                self.halves[h].sq_pos0[l] += sq.index_select(0, self._rows0[h]).sum()
        if not self.with_geometry:
            return
        if 0 in n_h:  # the whole batch is one half: the batch's own mean and scatter
            parts = [(view.n, view.mean, view.scatter) if n_h[h] else (0, None, None) for h in (0, 1)]
        else:
            if view.sizes != n_h:
                raise RuntimeError("the layer view is not split into this batch's halves")
            parts = view.parts()  # type: ignore[assignment]  # the same rows, without a half left empty
        for h, (n, mean, scatter) in enumerate(parts):
            self.halves[h].cov.pool(l, n, mean, scatter)

    def end_batch(self, batch: StateBatch) -> None:
        self._rows = self._rows0 = self.view_split = None  # type: ignore[assignment]  # until the next batch

    # ------------------------------------------------------------------ result
    def take_results(self, results: dict) -> None:
        """The run's moments (= A + B merged, ``tests/test_bootstrap.py``): the "all" rows reuse them."""
        self._full = results.get("moments")

    def merged_moments(self) -> TokenMoments:
        """A + B as one TokenMoments (a copy: the halves are left as they are)."""
        full = TokenMoments.from_state_dict(self.a.tm.state_dict(), device=self.device)
        return full.merge(self.b.tm)  # type: ignore[return-value]  # merge returns its own class

    def _covariances(self) -> list:
        """The covariance per layer of half A, half B and the whole corpus (pooled), or Nones."""
        if not self.with_geometry:
            return [None, None, None]
        n, _, scatter = self.a.cov.pooled_with(self.b.cov)
        return [h.cov.covariance().cpu().numpy() for h in self.halves] + [(scatter / max(n, 1)).cpu().numpy()]

    def result(self) -> dict:
        from normvar_core.stats import intervals  # pandas: imported by the run that publishes, not by the plan

        full = self._full if self._full is not None else self.merged_moments().result()
        keep = full.token_ids[intervals.band_types(full.n, STUDY_BAND)]
        covs = self._covariances()
        sq_all = [h.sq_all.cpu().numpy() for h in self.halves]
        sq_pos0 = [h.sq_pos0.cpu().numpy() for h in self.halves]
        parts = []
        for tag, stats, cov, sa, s0 in (
            ("all", full, covs[2], sq_all[0] + sq_all[1], sq_pos0[0] + sq_pos0[1]),
            ("a", self.a.tm.result(keep), covs[0], sq_all[0], sq_pos0[0]),
            ("b", self.b.tm.result(keep), covs[1], sq_all[1], sq_pos0[1]),
        ):
            df = intervals.half_values(stats, keep, cov, sa, s0)
            df.insert(1, "half", tag)
            parts.append(df)
        import pandas as pd

        halves = pd.concat(parts, ignore_index=True)
        table = intervals.interval_table(full, STUDY_BAND, halves, seed=self.seed)

        def as_arrays(df):
            return {c: df[c].to_numpy() for c in df.columns}

        return {"halves_layer": as_arrays(halves), "intervals": as_arrays(table)}

    def tables(self, result: dict, ctx: RunContext) -> dict:
        out = {}
        for name, cols in result.items():
            out[name] = pa.table({c: (np.asarray(v, np.int32) if c == "layer" else v) for c, v in cols.items()})
        return out

    def run_meta(self, result) -> dict:
        return {
            "halves": {
                "sentences_hash": "splitmix64(sentence_id ^ 0x5EED0F4A1F) & 1",
                "embeddings": [int(self.a.n), int(self.b.n)],
            }
        }


__all__ = ["HalvesMeasure", "half_of"]
