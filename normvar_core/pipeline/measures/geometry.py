"""The geometry measure (Razzhigaev et al. 2024 §2.3–2.4), per stored layer, over every counted embedding:

* the exact covariance: n, μ and the scatter C = Σ (x − μ)(x − μ)ᵀ in float64; each batch is
  centred on its own mean and pooled with Chan et al.'s update
  C = C_a + C_b + δδᵀ n_a n_b / n,  δ = μ_b − μ_a  — never Σxxᵀ − nμμᵀ from raw sums, which loses
  every digit at decoders' squared norms of 1e7–1e9;
* s = Σ x/‖x‖ for the exact mean cosine between distinct embeddings; Σ‖x‖ and Σ‖x‖² for the
  spread of the norm (the Gaussian-geometry comment);
* the states of a seeded uniform sample of K = min(n, ``id_sample``) positions (planned before the
  pass: ``samples.plan_uniform``, the positions with the smallest ``stats.layer_geometry.sample_keys``; the
  same sample whatever the batch split or the run's size), split into Razzhigaev et al.'s TwoNN batches of at
  least 4,096, and their two nearest neighbours within their batch and within each of its decimated subsets. With
  the neighbourhoods on (``searched_at_publish``) the rows are only stored during the pass and searched once after
  it (``sample_lists``: the 128-NN lists that the neighbourhoods read too); without them they are searched as the
  rows arrive (``twonn_stream.NeighbourState``), and at the end the cross-context search of the points with a
  same-sentence neighbour remains. TwoNN's fits and the batch anisotropy are taken at the end — on the host, or
  where the state is on a GPU run (``geometry_device``).

Tables: ``layer_geometry`` (one row per layer, ``stats.layer_geometry.layer_row``), ``layer_spectrum``
(layer, k, eigenvalue; k = 0 the largest) and ``pair_cosines`` (layer, cosine: disjoint random pairs
of the sample, the Gaussian-geometry comment's check against N(0, 1/d)). Memory (``planned_state``): per layer the
d² · 8 bytes of the scatter plus the sample's K · d · 4 (4.7 + 50 MB at d = 768, K = 16,384; 134 + 268 MB at d = 4096;
K · (d · 4 + 138) streamed, with ``--no-neighbourhoods``), on the states' device. A run whose layers do not fit in
the device's memory after the weights and the moments (``memory.plan_memory``) skips the geometry and says so in its
notes, with the layer subset that would fit (``drop_reason``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from normvar_core.config import RunConfig
from normvar_core.constants import ID_SAMPLE, NULL_KINDS, TWONN_BATCH
from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures import geometry_device, sample_lists
from normvar_core.pipeline.measures.base import Planned
from normvar_core.pipeline.measures.covariance import Covariance
from normvar_core.pipeline.measures.knn_device import canonical_rows
from normvar_core.pipeline.measures.layerview import LayerMajor, LayerView, layer_threads, per_layer
from normvar_core.pipeline.measures.sample_lists import first_copies
from normvar_core.pipeline.measures.samples import locate, most_picks, position_keys
from normvar_core.pipeline.measures.twonn_stream import CHUNK as STREAM_BLOCK
from normvar_core.pipeline.measures.twonn_stream import NeighbourState
from normvar_core.runs.schema import GEOMETRY_TABLES
from normvar_core.runs.tables import geometry_tables
from normvar_core.stats import layer_geometry as layer_geometry
from normvar_core.stats import twonn_context
from normvar_core.stats.axes import top_axes
from normvar_core.stats.null import null_params
from normvar_core.stats.null_geometry import null_layer_geometry


def _gb(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def _sample_size(ctx: RunContext) -> int:
    return int(ctx.plan.uniform.size) if ctx.plan.uniform is not None else 0


def null_sample_size(run) -> int:
    """The TwoNN sample size of a published run's Gaussian null: the run's own (``layer_geometry``), else the
    default ``ID_SAMPLE``."""
    return layer_geometry.recorded_sample(run.table("layer_geometry"))[0] or ID_SAMPLE


def topk_smallest(d2: np.ndarray, k: int) -> np.ndarray:
    """torch's multi-threaded top-k for the TwoNN neighbour search (numpy's argpartition is single-threaded)."""
    return torch.topk(torch.from_numpy(d2), k, dim=1, largest=False).indices.numpy()


def host_search(X32: np.ndarray, k: int) -> np.ndarray:
    """The TwoNN candidate search on the CPU: numpy's Gram products (measured 1.1–1.2x faster than
    torch's here) with torch's threaded top-k."""
    return layer_geometry.gram_candidates(X32, k, smallest=topk_smallest)


def _streamed(rows: np.ndarray, canon: np.ndarray, firsts: np.ndarray, dup: np.ndarray) -> np.ndarray:
    """The sample rows of the copies the stream kept (``dup`` False: one per distinct row), in the order of the
    distinct rows (``canon``, ``firsts``: ``first_copies`` of the batch's ``rows``)."""
    kept = np.flatnonzero(~dup[rows])
    streamed = np.empty(firsts.size, np.int64)
    streamed[canon[kept]] = kept
    return rows[streamed]


def _batch_context(X, rows, r, nn, dup, sentences, t: int, level=None, subsets=None) -> dict:
    """TwoNN's context measures of TwoNN batch t at one layer (``stats.twonn_context.batch_context``; ``X`` its rows
    ``rows`` of the sample, −0.0 as 0.0, as the stream's copies are matched), on one canonical copy of each distinct
    row: the copy of smallest sample index (so the result does not depend on which copy the stream kept, i.e. on the
    arrival or merge order). Each distinct row takes the streamed (r₁, r₂) and neighbours of the copy the stream
    kept, the neighbours named by their canonical copy; so do its decimated subsets' (``level``: each row's level,
    ``subsets``: {k: (r, nn)} of the layer, from the stream)."""
    canon, firsts = first_copies(X)  # each row -> its distinct row; distinct rows in sample order
    at = _streamed(rows, canon, firsts, dup)
    local = np.full(len(dup), -1, np.int64)
    local[rows] = np.arange(rows.size)

    def canonical(near):  # the stream's neighbour rows, named by their canonical copy
        return np.where(near >= 0, canon[np.maximum(local[np.maximum(near, 0)], 0)], -1)

    subs = (
        None if subsets is None else {k: (level[at] >= k, rk[at], canonical(nk[at])) for k, (rk, nk) in subsets.items()}
    )
    return twonn_context.batch_context(
        X[firsts], sentences[rows[firsts]], r[at], canonical(nn[at]), t, rows=int(rows.size), subsets=subs
    )


def _batch_context_device(X, rows, r, dup, sentences, t: int, level, subsets) -> dict:
    """``_batch_context`` where the sample is (``X``: the batch's rows, a tensor on its device): the same canonical
    copy of each distinct row (``knn_device.canonical_rows``), its streamed (r₁, r₂) and decimation levels, and the
    cross-context searches on the device (``geometry_device.masked_search``) instead of the host's shortcut."""
    canon, firsts = canonical_rows(X)
    at = _streamed(rows, canon, firsts, dup)
    sent = sentences[rows[firsts]]
    subs = {k: (level[at] >= k, rk[at], nk[at]) for k, (rk, nk) in subsets.items()}
    masked = geometry_device.masked_search(X[torch.as_tensor(firsts, device=X.device)], sent)
    return twonn_context.batch_context(firsts, sent, r[at], None, t, rows=int(rows.size), subsets=subs, masked=masked)  # type: ignore[arg-type]  # no per-row groups: masked by sentence


def searched_at_publish(cfg: RunConfig) -> bool:
    """With the neighbourhoods on, the TwoNN sample is searched once after the pass (``sample_lists``: the 128-NN
    lists both measures read) instead of during it (``twonn_stream``)."""
    return bool(cfg.neighbourhoods)


class GeometryMeasure(LayerMajor):
    """On with ``--geometry`` (the default; ``--no-geometry`` switches it, the outliers and IsoScore off);
    finalized in the background (spectra, TwoNN): publish writes the other measures' tables meanwhile."""

    name = "geometry"
    title = "spectra, TwoNN, the Razzhigaev et al. 2024 protocol's batches"
    table_names = GEOMETRY_TABLES
    finalize_in_background = True
    policy = "a run short of memory keeps its moments and names the layer subset that would fit"

    def __init__(self, ctx: RunContext):
        super().__init__(ctx)
        L, d = ctx.num_layers, ctx.dim
        self.dim = d
        self.uplan = ctx.plan.uniform
        self._pkeys = position_keys(self.uplan) if _sample_size(ctx) else np.zeros(0, np.int64)
        z: dict[str, Any] = dict(dtype=torch.float64, device=self.device)
        self.cov = Covariance(self, (L, d), device=self.device)  # n, mean, scatter
        self._add_state("sum_u", torch.zeros((L, d), **z))  # Σ x/‖x‖
        # per layer, on the states' device (no host sync per batch): embeddings with a non-zero norm
        # (the cosine's n), Σ‖x‖ and Σ‖x‖² (float64, summed per batch in float64)
        self._add_state("n_u", torch.zeros(L, dtype=torch.int64, device=self.device))
        self._add_state("norm_sum", torch.zeros(L, **z))
        self._add_state("sq_sum", torch.zeros(L, **z))
        self.lists_search = searched_at_publish(ctx.cfg)
        self.neighbours = NeighbourState(self, L, _sample_size(ctx), d, self.device, streamed=not self.lists_search)

    @classmethod
    def asked(cls, cfg: RunConfig) -> bool:
        return cfg.geometry

    @classmethod
    def may_drop(cls, cfg: RunConfig) -> bool:
        return True

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """Per layer the float64 scatter (d, d), mean and Σu (d), the cosine's n and Σ‖x‖, Σ‖x‖², then the
        TwoNN sample of K rows (``NeighbourState.planned``) and n:
        L·(8·d² + K·(4·d + 138) + 16·d + 24) + K + 8 bytes streamed, L·(8·d² + 4·K·d + 16·d + 24) + K + 8 searched
        after the pass."""
        L, d = ctx.num_layers, ctx.dim
        return {
            **Covariance.planned(L, d),
            "sum_u": ((L, d), np.float64),
            "n_u": ((L,), np.int64),
            "norm_sum": ((L,), np.float64),
            "sq_sum": ((L,), np.float64),
            **NeighbourState.planned(L, _sample_size(ctx), d, streamed=not searched_at_publish(ctx.cfg)),
        }

    @classmethod
    def update_bytes(cls, ctx: RunContext, n: int, rows: int) -> int:
        """The larger of Chan's pooling of a layer (the mean shift's outer product and the sum: 2·8·d²) and the
        TwoNN sample's arrival after the batch (``NeighbourState.arrive``): one layer's m picked rows and their
        float32 copy (8·m·d, m ≤ n the most picks in one batch) and their hashes (20·m·d), the gathered rows of the
        largest TwoNN batch K and their norms (4·L·K·(d + 1)) and the search's float32 blocks (3·4 bytes of at most
        min(``twonn_stream.CHUNK``, L·K²) elements); searched after the pass, the picked rows and their copy alone."""
        d, L = ctx.dim, ctx.num_layers
        pool = 2 * 8 * d * d
        U = ctx.plan.uniform
        if U is None or not U.size:
            return pool
        m, K = min(n, most_picks(U)), int(np.bincount(layer_geometry.twonn_batch_of(U.size, TWONN_BATCH)).max())
        if searched_at_publish(ctx.cfg):  # the rows only stored: one layer's picked rows and their float32 copy
            return max(pool, 8 * m * d)
        return max(pool, 28 * m * d + 4 * L * K * (d + 1) + 3 * 4 * min(STREAM_BLOCK, L * K * K))

    @classmethod
    def publish_bytes(cls, ctx: RunContext) -> int:
        """The result's work beside the state: the covariances' copy and what the result keeps (8·L·d² + 8·L·d
        + 4·L·K: eigenvalues, pair cosines), and per layer worked on at once (``layer_threads``: one per core on
        the CPU) the context search of the largest TwoNN batch, B rows (``layer_geometry.twonn_batch_of``: the
        last batch takes the rest, B = K − TWONN_BATCH·(⌊K / TWONN_BATCH⌋ − 1)) — its copies of the
        batch (float32 thrice, float64 once: 24·B·d) and its blocks (three min(CHUNK, B) × B float64 arrays) — which
        outweighs Razzhigaev et al.'s anisotropy of the batch (16·B·d + 24·d²) and the pair cosines (16·1,024·d)."""
        L, d, K = ctx.num_layers, ctx.dim, _sample_size(ctx)
        B = K - TWONN_BATCH * max(K // TWONN_BATCH - 1, 0)
        held = 8 * L * d * d + 8 * L * d + 4 * L * K
        if searched_at_publish(ctx.cfg) and K:
            return held + sample_lists.publish_bytes(L, K, d, B, ctx.device)
        work = max(24 * B * d + 24 * min(twonn_context.CHUNK, B) * B, 16 * B * d + 24 * d * d)
        threads = layer_threads(L, parallel=torch.device(ctx.device).type == "cpu")
        return int(held + threads * work)

    @classmethod
    def drop_reason(cls, ctx: RunContext, *, need: int, free: int, subset: list[int] | None) -> str:
        """Names the largest evenly spaced subset of the kept layers with which the whole run fits."""
        L, d, K = ctx.num_layers, ctx.dim, _sample_size(ctx)
        head = (
            f"layer geometry skipped: {L} layers at d = {d} need {_gb(need)} (a {d} x {d} float64 covariance "
            f"and a {K:,}-embedding sample per layer); {_gb(free)} left on the device after the weights and "
            f"the moments"
        )
        if not subset:
            return head + " — lower --id-sample, or a larger --memory-gb"
        return head + (
            f" — keep at most {len(subset)} layers (e.g. --layers {','.join(map(str, subset))}) or lower --id-sample"
        )

    # ------------------------------------------------------------------ streaming
    def update_layer(self, l: int, view: LayerView, batch: StateBatch) -> None:
        """Pool the batch's scatter about its own mean (Chan); Σ x/‖x‖ = x_cᵀ w + m Σ w, w = 1/‖x‖
        (0 for x = 0); Σ‖x‖, Σ‖x‖² — all from the layer view shared with the outliers."""
        self.cov.fold(l, view)
        sq = view.sq
        norms = sq.sqrt()
        nz = norms > 0
        w = torch.where(nz, 1.0 / norms.clamp_min(1e-300), torch.zeros_like(norms))
        self.sum_u[l] += view.weighted_sum(w)
        self.n_u[l] += nz.sum()
        self.norm_sum[l] += norms.sum()
        self.sq_sum[l] += sq.sum()

    def end_batch(self, batch: StateBatch) -> None:
        """The batch's sampled rows join their TwoNN batch's neighbour search."""
        if self.uplan is not None and self.uplan.size:
            picks, idx = locate(self.uplan, self._pkeys, batch)
            if picks.size:
                X = batch.states
                self.neighbours.arrive(picks, X, rows=idx)

    # ------------------------------------------------------------------ result
    device_finalize: bool | None = None
    """Finalize where the state is (``geometry_device``): None, on any device but the CPU; True: also on the CPU's
    torch (what the tests compare with the host path)."""

    def result(self) -> dict:
        on = self.device_finalize if self.device_finalize is not None else self.device.type != "cpu"
        su = self.sum_u.cpu().numpy()
        if not self.filled.all():
            raise RuntimeError(f"{int((~self.filled).sum())} positions of the TwoNN sample were never filled")
        # on the device the sample and the covariances stay there: only per-batch numbers come to the host
        cov = None if on else self.cov.covariance().cpu().numpy()
        sample = self.sample if on else self.sample.cpu().numpy()
        nb = self.neighbours

        sentences = np.asarray(self.uplan.sentence) if self.uplan is not None else np.zeros(0, np.int64)
        batches = [int(t) for t in np.unique(nb.tb)]
        tasks = [(li, t) for li in range(len(self.layers)) for t in batches]
        if self.lists_search:  # the neighbourhoods' overlap lists, kept until they are taken
            lists = np.full((len(self.layers), 2, nb.tb.size, sample_lists.LIST_DEPTH), -1, np.int32)
            base = nb.base_level.cpu().numpy()
        else:  # the stream's two nearest
            dup, nn, r = self.dup.cpu().numpy(), self.nn.cpu().numpy(), self.r.cpu().numpy()
            level = self.level.cpu().numpy()
            subsets = {k: (rk.cpu().numpy(), nk.cpu().numpy()) for k, rk, nk in nb.trackers()[1:]}

        def batch_part(i: int):  # one TwoNN batch of one layer (the sample is in key order: a random order)
            li, t = tasks[i]
            rows = np.flatnonzero(nb.tb == t)
            if on:  # the batch's rows gathered once, −0.0 as 0.0 (as the stream's copies are matched)
                X = sample[li][torch.as_tensor(rows, device=self.device)] + 0.0
                aniso = geometry_device.batch_anisotropy(X)
            else:
                X = sample[li][rows] + np.float32(0.0)
                aniso = layer_geometry.batch_anisotropy(X)
            if self.lists_search:
                found = sample_lists.search_batch(X, sentences[rows])
                curves = sample_lists.neighbourhood_part(found, rows, lists[li])
                rows_of = (  # a distinct row searched apart, on the host
                    (lambda j: X[torch.as_tensor(found.firsts[j], device=X.device)].cpu().numpy())
                    if on
                    else (lambda j: X[found.firsts[j]])
                )
                fit, ndup, context = sample_lists.twonn_part(found, sentences[rows], base[rows], t, rows_of)
                return (fit, ndup, aniso), context, curves
            r1, r2, ndup = nb.batch_distances(li, t)
            fit = layer_geometry.twonn_from_distances(r1, r2)[0] if r1.size >= 3 else float("nan")
            subs = {k: (rk[li], nk[li]) for k, (rk, nk) in subsets.items()}
            if on:
                context = _batch_context_device(X, rows, r[li], dup[li], sentences, t, level[li], subs)
            else:
                context = _batch_context(X, rows, r[li], nn[li], dup[li], sentences, t, level[li], subs)
            return (fit, ndup, aniso), context, None

        by_batch = per_layer(
            batch_part, len(tasks), parallel=not on, what="TwoNN batch"
        )  # batches, not layers: the cores stay even

        def one(li: int):
            mine = [by_batch[i] for i, (lj, _) in enumerate(tasks) if lj == li]
            eig = geometry_device.eigenvalues(self.cov.covariance(li)) if on else None
            row, eig = layer_geometry.layer_row(
                None if on else cov[li],  # type: ignore[index]  # cov is set when not on
                sample[li],
                n=self.n,
                sum_u_sq=float(su[li] @ su[li]),
                n_u=int(self.n_u[li]),
                norm_sum=float(self.norm_sum[li]),
                sq_sum=float(self.sq_sum[li]),
                est=layer_geometry.estimates_from([m[0] for m in mine]),
                eigenvalues=eig,
            )
            cols, curve = twonn_context.layer_context([m[1] for m in mine])
            layer = int(self.layers[li])
            cosines = geometry_device.pair_cosines(sample[li]) if on else layer_geometry.pair_cosines(sample[li])
            return ({"layer": layer, **row, **cols}, eig, cosines, [{"layer": layer, **c} for c in curve])

        out = per_layer(one, len(self.layers), parallel=not on)
        res: dict[str, Any] = {
            "rows": [o[0] for o in out],
            "spectra": [o[1] for o in out],
            "cosines": [o[2] for o in out],
            "decimation": [c for o in out for c in o[3]],
        }
        if self.lists_search:  # what the neighbourhoods read (``NeighbourhoodMeasure.take_results``)
            res["lists"] = {"lists": lists, "curves": [p[2] for p in by_batch], "tb": nb.tb, "sentences": sentences}
        return res

    def covariance_axes(self, l: int, k: int = 2) -> np.ndarray:
        """The top-``k`` eigenvectors (d, k) of layer row ``l``'s exact covariance S / n (``stats.axes.top_axes``):
        the Occurrences page's axes, read from the finished state (``uses_states``) while ``result()`` may run."""
        return top_axes(self.cov.covariance(l).cpu().numpy(), k)

    def tables(self, result: dict, ctx: RunContext) -> dict:
        return geometry_tables(
            self.layers, result["rows"], result["spectra"], result["cosines"], decimation=result["decimation"]
        )

    @classmethod
    def null_tables(cls, run, kind: str, stats, null, *, seed: int, search=None) -> dict:
        """The null's layer_geometry, layer_spectrum and pair_cosines (``stats.null_geometry``: the exact
        between-type scatter of the null's type means, O(L·T·d²), and a sample of the run's TwoNN size), per layer
        on its own stream ``default_rng([seed, NULL_KINDS.index(kind), 2, layer])``; {} when the run has no
        layer geometry."""
        if not run.has("layer_geometry"):
            return {}
        size = null_sample_size(run)
        rows, spectra, cosines = [], [], []
        for li, mu, s2 in null_params(kind, stats, run.layer_stats(), seed=seed):
            layer = int(stats.layer_index[li])
            rng = np.random.default_rng([seed, NULL_KINDS.index(kind), 2, layer])
            row, eig, cos = null_layer_geometry(
                mu, s2, null.mean[li], null.v[li] * null.n, null.n, size, rng, search=search
            )
            rows.append({"layer": layer, **row})
            spectra.append(eig)
            cosines.append(cos)
        return geometry_tables(stats.layer_index, rows, spectra, cosines)

    def run_meta(self, result) -> dict:
        return {
            "id_sample": int(self.filled.size),
            "id_batches": int(np.unique(self.neighbours.tb).size),
            "scatter_dtype": self.scatter_dtype,
        }


__all__ = ["GeometryMeasure", "host_search", "null_sample_size"]
