"""The geometry accumulator (seed 004 §2.3–2.4), per stored layer, over every counted embedding:

* the exact covariance: n, μ and the scatter C = Σ (x − μ)(x − μ)ᵀ in float64; each batch is
  centred on its own mean and pooled with Chan et al.'s update
  C = C_a + C_b + δδᵀ n_a n_b / n,  δ = μ_b − μ_a  — never Σxxᵀ − nμμᵀ from raw sums, which loses
  every digit at decoders' squared norms of 1e7–1e9;
* s = Σ x/‖x‖ for the exact mean cosine between distinct embeddings;
* a seeded uniform reservoir of ``id_sample`` embeddings (the positions with the smallest
  ``stats.geometry.sample_keys``; the same sample whatever the batch split) for TwoNN and seed
  004's batch anisotropy.

Tables: ``layer_geometry`` (one row per layer) and ``layer_spectrum`` (layer, k, eigenvalue; k = 0
the largest). Memory: d² · 8 bytes per layer plus the reservoir (L · K · d float32); runs with
d > GEOMETRY_MAX_DIM skip the covariance and say so in the run notes.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from normvar_core.pipeline.contracts import Accumulator, RunContext, StateBatch
from normvar_core.stats import geometry as G

GEOMETRY_MAX_DIM = 4096


class GeometryAccumulator(Accumulator):
    name = "geometry"
    table_names = ("layer_geometry", "layer_spectrum")

    def __init__(self, ctx: RunContext, k: int):
        L, d = ctx.num_layers, ctx.dim
        self.layers = list(ctx.layers)
        self.dim = d
        self.k = int(k)
        self.seed = int(getattr(ctx.cfg, "seed", 0))
        self.device = torch.device(ctx.device) if ctx.device is not None else torch.device("cpu")
        self.n = 0
        self.mean = torch.zeros((L, d), dtype=torch.float64, device=self.device)
        self.scatter = torch.zeros((L, d, d), dtype=torch.float64, device=self.device)
        self.sum_u = torch.zeros((L, d), dtype=torch.float64, device=self.device)
        self.n_u = np.zeros(L, np.int64)  # per layer: embeddings with a non-zero norm (the cosine's n)
        self.keys = np.zeros(0, np.uint64)
        self.sample = np.zeros((L, 0, d), np.float32)

    @classmethod
    def for_run(cls, ctx: RunContext) -> "GeometryAccumulator | None":
        cfg = ctx.cfg
        if not getattr(cfg, "geometry", True) or ctx.dim > GEOMETRY_MAX_DIM:
            return None
        return cls(ctx, getattr(cfg, "id_sample", 16384))

    # ------------------------------------------------------------------ streaming
    def update(self, batch: StateBatch) -> None:
        X = batch.states
        N = X.shape[1]
        if N == 0:
            return
        X = X.to(self.device)
        for l in range(X.shape[0]):  # one layer at a time bounds the float64 copy to N x d
            x = X[l].to(torch.float64)
            mb = x.mean(0)
            xc = x - mb
            self._pool(l, N, mb, xc.T @ xc)
            norms = x.norm(dim=1)
            nz = norms > 0
            self.sum_u[l] += (x[nz] / norms[nz, None]).sum(0)
            self.n_u[l] += int(nz.sum())
        self.n += N
        self._reservoir(batch, X)

    def _pool(self, l: int, nb: int, mb: torch.Tensor, cb: torch.Tensor) -> None:
        na = self.n
        if na == 0:
            self.mean[l] = mb
            self.scatter[l] = cb
            return
        n = na + nb
        delta = mb - self.mean[l]
        self.mean[l] += delta * (nb / n)
        self.scatter[l] += cb + torch.outer(delta, delta) * (na * nb / n)

    def _reservoir(self, batch: StateBatch, X: torch.Tensor) -> None:
        keys = G.sample_keys(self.seed, torch.as_tensor(batch.sentence_ids).cpu().numpy(),
                             torch.as_tensor(batch.positions).cpu().numpy())
        if self.keys.size >= self.k:
            cand = np.flatnonzero(keys < self.keys.max())
        else:
            cand = np.arange(keys.size)
        if cand.size == 0:
            return
        vec = X[:, torch.as_tensor(cand, device=X.device)].detach().to("cpu", torch.float32).numpy()
        self._keep(np.concatenate([self.keys, keys[cand]]), np.concatenate([self.sample, vec], axis=1))

    def _keep(self, keys: np.ndarray, vec: np.ndarray) -> None:
        order = np.argsort(keys, kind="stable")[: self.k]
        self.keys, self.sample = keys[order], vec[:, order]

    # ------------------------------------------------------------------ merge and state
    def merge(self, other: "GeometryAccumulator") -> "GeometryAccumulator":
        if other.n:
            for l in range(len(self.layers)):
                self._pool_other(l, other)
            self.n += other.n
            self.sum_u += other.sum_u.to(self.device)
            self.n_u += other.n_u
        self._keep(np.concatenate([self.keys, other.keys]), np.concatenate([self.sample, other.sample], axis=1))
        return self

    def _pool_other(self, l: int, other: "GeometryAccumulator") -> None:
        na, nb = self.n, other.n
        mb, cb = other.mean[l].to(self.device), other.scatter[l].to(self.device)
        if na == 0:
            self.mean[l], self.scatter[l] = mb, cb.clone()
            return
        n = na + nb
        delta = mb - self.mean[l]
        self.mean[l] += delta * (nb / n)
        self.scatter[l] += cb + torch.outer(delta, delta) * (na * nb / n)

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"n": np.array([self.n], np.int64), "n_u": self.n_u.copy(), "mean": self.mean.cpu().numpy(),
                "scatter": self.scatter.cpu().numpy(), "sum_u": self.sum_u.cpu().numpy(),
                "keys": self.keys.copy(), "sample": self.sample.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.n = int(np.asarray(state["n"])[0])
        self.n_u = np.asarray(state["n_u"], np.int64).copy()
        self.mean = torch.from_numpy(np.array(state["mean"], np.float64)).to(self.device)
        self.scatter = torch.from_numpy(np.array(state["scatter"], np.float64)).to(self.device)
        self.sum_u = torch.from_numpy(np.array(state["sum_u"], np.float64)).to(self.device)
        self.keys = np.asarray(state["keys"], np.uint64).copy()
        self.sample = np.asarray(state["sample"], np.float32).copy()

    # ------------------------------------------------------------------ result
    def result(self) -> dict:
        rows, spectra = [], []
        cov = (self.scatter / max(self.n, 1)).cpu().numpy()
        su = self.sum_u.cpu().numpy()
        order = np.argsort(self.keys, kind="stable")   # the keys are random: a shuffled sample
        for li, layer in enumerate(self.layers):
            sp = G.spectrum(cov[li])
            est = G.batched_estimates(self.sample[li][order]) if self.keys.size >= 3 else {}
            rows.append({"layer": int(layer), "n": int(self.n), "anisotropy": sp.anisotropy,
                         "anisotropy_batch_mean": est.get("anisotropy_batch_mean", np.nan),
                         "anisotropy_batch_std": est.get("anisotropy_batch_std", np.nan),
                         "participation_ratio": sp.participation_ratio, "n90": sp.n90, "n99": sp.n99,
                         "trace": sp.trace, "mean_cosine": float(G.mean_cosine(float(su[li] @ su[li]), self.n_u[li])),
                         "twonn_id": est.get("twonn_id", np.nan), "twonn_id_std": est.get("twonn_id_std", np.nan),
                         "twonn_duplicates": int(est.get("twonn_duplicates", 0)),
                         "twonn_batches": int(est.get("twonn_batches", 0)), "id_sample": int(self.keys.size)})
            spectra.append(sp.eigenvalues)
        return {"rows": rows, "spectra": spectra}

    def tables(self, result: dict, ctx: RunContext) -> dict:
        rows = result["rows"]
        geo = pa.table({k: [r[k] for r in rows] for k in rows[0]}) if rows else pa.table({"layer": pa.array([], pa.int32())})
        d = self.dim
        spec = pa.table({
            "layer": np.repeat(np.asarray(self.layers, np.int32), d),
            "k": np.tile(np.arange(d, dtype=np.int32), len(self.layers)),
            "eigenvalue": np.concatenate(result["spectra"]) if result["spectra"] else np.zeros(0)})
        return {"layer_geometry": geo, "layer_spectrum": spec}

    def run_meta(self, result) -> dict:
        return {"id_sample": int(self.keys.size)}


__all__ = ["GeometryAccumulator", "GEOMETRY_MAX_DIM"]
