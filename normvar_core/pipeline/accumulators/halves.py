"""The split-half accumulator: the corpus in two halves, for the intervals of the corpus-level
quantities and the geometry (issue 26).

Every counted position goes to half A or B by a stable hash of its sentence id
(``half_of``: SplitMix64 of the id, lowest bit), so a sentence never straddles the halves and the split
is the same whatever the batches, their order or the shards. Per half it keeps exactly what the
main figures need, with the same code as the main accumulators:

* a ``TokenMoments`` (n_t, μ(X_t), S_t per layer and type; seed 002 eqs. 1–6) — merged, the two
  halves ARE the run's moments (Chan's update is exact; ``tests/test_findings.py`` checks to 1e-12);
* n, μ and the scatter Σ(x − μ)(x − μ)ᵀ per layer (the geometry's pooled float64 covariance, seed
  004 §2.3), when the run has the geometry on;
* Σ‖x‖² over all positions and over position 0 (the outliers' share of Q(X)).

``result()`` merges the halves for the whole corpus and gives the ``halves_layer`` table — per layer
and half (all / a / b): Q, M, V, V_W, V_B over the band's types (counts of the whole run, so both
halves use the same types; eqs. 8–15), the ratios of Fig. 5/6, the anisotropy λ₁/Σλ, the position-0
share — and the ``intervals`` table (``stats.intervals``: split-half θ ± 1.96 |θ_A − θ_B| / 2, and
the bootstrap over types of the trade-off, 1,000 seeded resamples).

Memory (``halves_bytes``), with T types, L kept layers, d the width, e = 8 (float64 means) or 4
(``--mean-dtype float32``), G = 1 with the geometry on else 0:

    2 · [L·T·(d·e + 8) + 16·T + 8·L + 8  +  G·8·L·(d² + d)  +  16·L + 8]  bytes,

i.e. twice the moments' per-type state plus twice the geometry's covariance; ``result()`` holds a
third copy of the per-type state while it merges. MiniLM (L = 7, d = 384, T = 10k): 0.45 GB;
bert-base shape (L = 13, d = 768, T = 30k): 4.8 GB — switch it off with ``--no-halves``.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from normvar_core.constants import STUDY_BAND
from normvar_core.pipeline.accumulators.layerview import LayerMajor, LayerView, gram, resolve_scatter_dtype
from normvar_core.pipeline.accumulators.pooling import pool_into
from normvar_core.pipeline.contracts import Accumulator, RunContext, StateBatch
from normvar_core.pipeline.accumulators.token_moments import TokenMoments
from normvar_core.stats import intervals as I
from normvar_core.stats.geometry import splitmix64

HALF_SALT = 0x5EED_0F_4A1F


def half_of(sentence_ids) -> np.ndarray:
    """0 (half A) or 1 (half B) per sentence id: the lowest bit of SplitMix64(id ^ salt)."""
    ids = np.asarray(sentence_ids, dtype=np.int64).astype(np.uint64)
    return (splitmix64(ids ^ np.uint64(HALF_SALT)) & np.uint64(1)).astype(np.int64)


def halves_bytes(num_layers: int, num_types: int, dim: int, *, mean_bytes: int = 8, geometry: bool = True) -> int:
    """The formula of the module docstring: per half, a TokenMoments (L·T·d·e + 8·L·T + 16·T + 8·L + 8, as
    the moments accumulator), with the geometry a mean and a scatter per layer (8·L·(d² + d)), Σ‖x‖² and its
    position-0 part (16·L) and n (8)."""
    L, T, d = int(num_layers), int(num_types), int(dim)
    moments = L * T * d * mean_bytes + 8 * L * T + 16 * T + 8 * L + 8
    per_half = moments + (8 * L * (d * d + d) if geometry else 0) + 16 * L + 8
    return 2 * per_half


def _num_types(ctx: RunContext) -> int:
    ids = getattr(ctx.plan, "token_ids", None)
    return int(len(ids)) if ids is not None else 0


class HalvesAccumulator(LayerMajor, Accumulator):
    name = "halves"
    table_names = ("halves_layer", "intervals")
    planned_exact = False  # a type that one half never sees holds no row there: planned_bytes is the bound

    def __init__(self, ctx: RunContext):
        self.layers = list(ctx.layers)
        self.dim = int(ctx.dim)
        self.device = torch.device(ctx.device) if ctx.device is not None else torch.device("cpu")
        self.mean_dtype = getattr(ctx.cfg, "mean_dtype", "float64")
        self.with_geometry = bool(getattr(ctx.cfg, "geometry", True))
        self.scatter_dtype = resolve_scatter_dtype(getattr(ctx.cfg, "scatter_dtype", "float64"), self.device)
        self.seed = int(getattr(ctx.cfg, "seed", 0) or 0)
        ids = getattr(ctx.plan, "token_ids", None)
        self.moments = []
        for _ in range(2):
            tm = TokenMoments(num_layers=len(self.layers), dim=self.dim, device=self.device,
                              mean_dtype=self.mean_dtype, layer_index=self.layers)
            if ids is not None:
                tm.register(ids)
            self.moments.append(tm)
        L, d = len(self.layers), self.dim
        z = dict(dtype=torch.float64, device=self.device)
        self.n = [0, 0]
        g = d if self.with_geometry else 0  # no geometry: no covariance kept
        self.mean = [torch.zeros((L, g), **z) for _ in range(2)]
        self.scatter = [torch.zeros((L, g, g), **z) for _ in range(2)]
        self.sq_all = [torch.zeros(L, **z) for _ in range(2)]
        self.sq_pos0 = [torch.zeros(L, **z) for _ in range(2)]

    # ------------------------------------------------------------------ contract
    @classmethod
    def planned_bytes(cls, ctx: RunContext) -> int:
        """``halves_bytes`` for the run (0 when the run does not want the halves)."""
        if not getattr(ctx.cfg, "halves", True):
            return 0
        return halves_bytes(ctx.num_layers, _num_types(ctx), ctx.dim,
                            mean_bytes=4 if getattr(ctx.cfg, "mean_dtype", "float64") == "float32" else 8,
                            geometry=bool(getattr(ctx.cfg, "geometry", True)))

    @classmethod
    def for_run(cls, ctx: RunContext) -> "HalvesAccumulator | None":
        if not getattr(ctx.cfg, "halves", True) or cls.skip_reason(ctx):
            return None
        return cls(ctx)

    @classmethod
    def skip_reason(cls, ctx: RunContext) -> str | None:
        """Set when the memory plan (``pipeline/memory.py``, from the device's memory) found no room."""
        if not getattr(ctx.cfg, "halves", True):
            return None
        return ctx.dropped(cls.name)

    @classmethod
    def droppable(cls, ctx: RunContext) -> bool:
        return bool(getattr(ctx.cfg, "halves", True))

    @classmethod
    def drop_reason(cls, ctx: RunContext, *, need: int, free: int, subset: list[int] | None) -> str:
        return (f"split halves skipped: two copies of the per-type moments need {need / 2**30:.1f} GB, "
                f"{free / 2**30:.1f} GB left on the device — keep fewer --layers, use --mean-dtype float32, "
                "or --no-halves (the findings then have bootstrap intervals only)")

    # ------------------------------------------------------------------ streaming
    def begin_batch(self, batch: StateBatch) -> None:
        """Each half's rows of the batch (by ``half_of`` its sentence ids) and its moments update."""
        X = batch.states
        sid = batch.sentence_ids.cpu().numpy() if isinstance(batch.sentence_ids, torch.Tensor) else batch.sentence_ids
        half = half_of(sid)
        pos0 = torch.as_tensor(batch.positions).to(self.device) == 0
        self._rows, self._rows0 = [], []
        for h in (0, 1):
            idx = torch.as_tensor(np.flatnonzero(half == h), device=self.device)
            self._rows.append(idx)
            self._rows0.append(idx[pos0.index_select(0, idx)])
            if idx.numel():
                tidx = idx.to(X.device)
                self.moments[h].update(X.index_select(1, tidx), batch.token_ids.index_select(0, tidx.to(batch.token_ids.device)))

    def update_layer(self, l: int, view: LayerView, batch: StateBatch) -> None:
        """Σ‖x‖² (all positions, position 0) per half from the shared ‖x_i‖², and, with the geometry,
        each half's mean and scatter pooled by Chan. One Gram matrix, of the smaller half: the other
        half's scatter is the batch's (shared with the geometry) minus it and the between-halves term,
        S_b = S − S_a − (n_a n_b / n)(μ_a − μ_b)(μ_a − μ_b)ᵀ."""
        sq = view.sq
        n_h = [int(r.numel()) for r in self._rows]
        for h in (0, 1):
            if n_h[h]:
                self.sq_all[h][l] += sq.index_select(0, self._rows[h]).sum()
                self.sq_pos0[h][l] += sq.index_select(0, self._rows0[h]).sum()
        if not self.with_geometry:
            return
        if 0 in n_h:  # the whole batch is one half: the batch's own mean and scatter
            h = 0 if n_h[0] else 1
            pool_into(self.mean[h][l], self.scatter[h][l], self.n[h], view.mean, view.scatter, view.n, outer=True)
            return
        xc = view.centred                      # deviations from c (the batch mean, in the scatter dtype)
        c = view.mean.to(xc.dtype).to(torch.float64)
        total = xc.sum(0, dtype=torch.float64)
        s = 0 if n_h[0] <= n_h[1] else 1       # the smaller half gets the Gram matrix
        o = 1 - s
        xs = xc.index_select(0, self._rows[s])
        d_s = xs.sum(0, dtype=torch.float64) / n_h[s]
        d_o = (total - d_s * n_h[s]) / n_h[o]
        S_s = gram(xs).to(torch.float64) - torch.outer(d_s, d_s) * n_h[s]
        diff = d_s - d_o
        S_o = view.scatter - S_s - torch.outer(diff, diff) * (n_h[s] * n_h[o] / view.n)
        for h, S, d in ((s, S_s, d_s), (o, S_o, d_o)):
            pool_into(self.mean[h][l], self.scatter[h][l], self.n[h], c + d, S, n_h[h], outer=True)

    def end_batch(self, batch: StateBatch) -> None:
        for h in (0, 1):
            self.n[h] += int(self._rows[h].numel())
        self._rows = self._rows0 = None

    def merge(self, other: "HalvesAccumulator") -> "HalvesAccumulator":
        for h in (0, 1):
            self.moments[h].merge(other.moments[h])
            if other.n[h]:
                for l in range(len(self.layers) if self.with_geometry else 0):
                    pool_into(self.mean[h][l], self.scatter[h][l], self.n[h], other.mean[h][l].to(self.device),
                              other.scatter[h][l].to(self.device), other.n[h], outer=True)
                self.n[h] += other.n[h]
                self.sq_all[h] += other.sq_all[h].to(self.device)
                self.sq_pos0[h] += other.sq_pos0[h].to(self.device)
        return self

    def state_dict(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for h, tag in ((0, "a"), (1, "b")):
            out.update({f"{tag}.tm.{k}": v for k, v in self.moments[h].state_dict().items()})
            out[f"{tag}.n"] = np.array([self.n[h]], np.int64)
            out[f"{tag}.mean"] = self.mean[h].cpu().numpy()
            out[f"{tag}.scatter"] = self.scatter[h].cpu().numpy()
            out[f"{tag}.sq_all"] = self.sq_all[h].cpu().numpy()
            out[f"{tag}.sq_pos0"] = self.sq_pos0[h].cpu().numpy()
        return out

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        def t(a):
            return torch.from_numpy(np.array(a, np.float64)).to(self.device)

        for h, tag in ((0, "a"), (1, "b")):
            pre = f"{tag}.tm."
            self.moments[h] = TokenMoments.from_state_dict({k[len(pre):]: v for k, v in state.items()
                                                            if k.startswith(pre)}, device=self.device)
            self.n[h] = int(np.asarray(state[f"{tag}.n"])[0])
            self.mean[h], self.scatter[h] = t(state[f"{tag}.mean"]), t(state[f"{tag}.scatter"])
            self.sq_all[h], self.sq_pos0[h] = t(state[f"{tag}.sq_all"]), t(state[f"{tag}.sq_pos0"])

    # ------------------------------------------------------------------ result
    def merged_moments(self) -> TokenMoments:
        """A + B as one TokenMoments (a copy: the halves are left as they are)."""
        full = TokenMoments.from_state_dict(self.moments[0].state_dict(), device=self.device)
        return full.merge(self.moments[1])

    def _covariances(self) -> list:
        """The covariance per layer of half A, half B and the whole corpus (pooled), or Nones."""
        if not self.with_geometry:
            return [None, None, None]
        mean, scatter, n = self.mean[0].clone(), self.scatter[0].clone(), self.n[0]
        for l in range(len(self.layers)):
            pool_into(mean[l], scatter[l], n, self.mean[1][l], self.scatter[1][l], self.n[1], outer=True)
        covs = [(s / max(k, 1)).cpu().numpy() for s, k in ((self.scatter[0], self.n[0]), (self.scatter[1], self.n[1]))]
        return covs + [(scatter / max(n + self.n[1], 1)).cpu().numpy()]

    def result(self) -> dict:
        full = self.merged_moments().result()
        keep = full.token_ids[I.band_types(full.n, STUDY_BAND)]
        covs = self._covariances()
        sq_all = [self.sq_all[0].cpu().numpy(), self.sq_all[1].cpu().numpy()]
        sq_pos0 = [self.sq_pos0[0].cpu().numpy(), self.sq_pos0[1].cpu().numpy()]
        parts = []
        for tag, stats, cov, sa, s0 in (("all", full, covs[2], sq_all[0] + sq_all[1], sq_pos0[0] + sq_pos0[1]),
                                        ("a", self.moments[0].result(), covs[0], sq_all[0], sq_pos0[0]),
                                        ("b", self.moments[1].result(), covs[1], sq_all[1], sq_pos0[1])):
            df = I.half_values(stats, keep, cov, sa, s0)
            df.insert(1, "half", tag)
            parts.append(df)
        import pandas as pd

        halves = pd.concat(parts, ignore_index=True)
        table = I.interval_table(full, STUDY_BAND, halves, seed=self.seed)
        as_arrays = lambda df: {c: df[c].to_numpy() for c in df.columns}  # noqa: E731 - arrays only
        return {"halves_layer": as_arrays(halves), "intervals": as_arrays(table)}

    def tables(self, result: dict, ctx: RunContext) -> dict:
        out = {}
        for name, cols in result.items():
            out[name] = pa.table({c: (np.asarray(v, np.int32) if c == "layer" else v) for c, v in cols.items()})
        return out

    def run_meta(self, result) -> dict:
        return {"halves": {"sentences_hash": "splitmix64(sentence_id ^ 0x5EED0F4A1F) & 1",
                           "embeddings": [int(self.n[0]), int(self.n[1])]}}


__all__ = ["HalvesAccumulator", "half_of", "halves_bytes"]
