"""Neighbourhoods of the sampled positions: the intrinsic dimension across scales (GRIDE) and the
neighbourhood overlap between layers, on Razzhigaev et al.'s sample and batches.

The geometry measure keeps, per kept layer, the float32 states of the same sampled positions (its ``sample``,
L x K x d, in a seeded random order) split into TwoNN batches of at least 4,096 (``NeighbourState.tb``). After the
pass it searches, per layer and batch, each position's 128 nearest other positions of its batch, exactly, once
over all positions and once over the positions of *other* sentences (its own sentence masked, as
``twonn_id_cross``) — and where the batch holds copies, both again over its distinct positions — and reads its
TwoNN from the same lists (``sample_lists``). This measure reads the lists from the geometry's result
(``uses_results``):

* ``layer_gride`` — GRIDE (``stats.gride``, Denti et al. 2022) at n1 = 1, 2, 4, …, 64, n2 = 2·n1, on the
  distinct positions of each batch (copies dropped, as TwoNN), unmasked and masked: per (layer, n1, masked)
  the mean over batches of the maximum-likelihood dimension, its likelihood error and the batches' spread;
* ``layer_overlap`` — the neighbourhood overlap χ_k (``stats.overlap``, Valeriani et al. 2023) at k = 10 of each
  kept layer with the next kept layer and with the last, unmasked and masked, with the chance value k/n that
  the Gaussian null (every layer's sample drawn independently) has; ``overlap_curve`` the same over k.

Its own state is only the count of embeddings fed (the sample is the geometry's). Without the geometry (a run
with ``--no-geometry``, or a state read alone) its tables are empty.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from normvar_core.config import RunConfig
from normvar_core.constants import NULL_KINDS, TWONN_BATCH
from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures.base import Measure, Planned
from normvar_core.pipeline.measures.geometry import null_sample_size
from normvar_core.stats import gride, overlap
from normvar_core.stats.layer_geometry import twonn_batch_of
from normvar_core.stats.null import null_params
from normvar_core.stats.null_geometry import null_sample

GRIDE_COLUMNS = (
    "layer",
    "n1",
    "n2",
    "masked",
    "gride_id",
    "gride_id_err",
    "gride_id_std",
    "scale",
    "points",
    "batches",
)
OVERLAP_COLUMNS = (
    "layer",
    "overlap_next",
    "overlap_next_masked",
    "overlap_last",
    "overlap_last_masked",
    "chance",
    "chance_masked",
    "overlap_next_std",
    "overlap_last_std",
)
CURVE_COLUMNS = ("layer", "to_layer", "pair", "masked", "k", "overlap", "overlap_std", "chance")


def _sample_size(ctx: RunContext) -> int:
    return int(ctx.plan.uniform.size) if ctx.plan.uniform is not None else 0


def _empty(columns) -> pa.Table:
    return pa.table({c: pa.array([], pa.float64()) for c in columns})


class NeighbourhoodMeasure(Measure):
    """On by default with the geometry (``--no-neighbourhoods`` or ``--no-geometry`` turns it off); its result reads
    the geometry's sampled states."""

    name = "neighbourhoods"
    title = "GRIDE and neighbourhood overlap"
    table_names = ("layer_gride", "layer_overlap", "overlap_curve")
    uses_results = ("geometry",)
    requires = ("geometry",)
    policy = "no state of its own (the geometry's sample, searched at publish by the geometry): kept with it"

    def __init__(self, ctx: RunContext):
        self.layers = list(ctx.layers)
        self.ctx = ctx
        self.searched: dict | None = None  # the geometry's search (``take_results``)
        self._add_state("n", 0)  # embeddings fed (the sample itself is the geometry's state)

    @classmethod
    def asked(cls, cfg: RunConfig) -> bool:
        return cfg.geometry and cfg.neighbourhoods

    @classmethod
    def may_drop(cls, cfg: RunConfig) -> bool:
        return cls.asked(cfg)  # asked for, a run short of memory may still leave it out, as the geometry

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        return {"n": ((1,), np.int64)}

    @classmethod
    def publish_bytes(cls, ctx: RunContext) -> int:
        """What its result holds beside the state (the search and its lists are the geometry's: ``sample_lists``):
        each layer's candidate counts (16·L·K bytes), the curve's rows (4·L·len(KS) of them, about 1 KiB each) and,
        one layer pair at a time, the overlap of the largest TwoNN batch of B rows (``overlap.shared``: both lists'
        copies, the ranks and their masks, within 2 KiB a row)."""
        L, K = ctx.num_layers, _sample_size(ctx)
        B = K - TWONN_BATCH * max(K // TWONN_BATCH - 1, 0)
        return int(16 * L * K + 4096 * L * len(overlap.KS) + 2048 * B) if K else 0

    def update(self, batch: StateBatch) -> None:
        self.n += batch.size  # type: ignore[attr-defined]  # a registered state

    def take_results(self, results: dict) -> None:
        self.searched = (results.get("geometry") or {}).get("lists")

    # ------------------------------------------------------------------ result
    def _assembled(self, li: int, tb: np.ndarray, sentences: np.ndarray, lists: np.ndarray, curves: list) -> dict:
        """Layer li from its lists and its batches' curves (in ``np.unique(tb)`` order): its GRIDE rows (unmasked,
        masked), the lists, and each position's candidates (unmasked, masked)."""
        candidates = np.zeros((2, tb.size), np.int64)
        for t in np.unique(tb):
            rows = np.flatnonzero(tb == t)
            candidates[0, rows] = rows.size - 1
            _, inv, count = np.unique(sentences[rows], return_inverse=True, return_counts=True)
            candidates[1, rows] = rows.size - count[inv.reshape(-1)]  # the positions of other sentences
        layer = int(self.layers[li])
        rows = [  # type: ignore[assignment]  # the table rows from here on
            {"layer": layer, **r} for v in (0, 1) for r in gride.layer_rows([c[v] for c in curves], masked=bool(v))
        ]
        return {"gride": rows, "lists": lists, "candidates": candidates}

    def result(self) -> dict:
        """Every layer's GRIDE rows and overlap lists from the geometry's search (``sample_lists``), then the
        overlaps."""
        s = self.searched
        if s is None:
            return {"gride": [], "overlap": [], "curve": []}
        tb, sentences, lists, curves = s["tb"], s["sentences"], s["lists"], s["curves"]
        n = np.unique(tb).size
        L = len(self.layers)
        per = [self._assembled(li, tb, sentences, lists[li], curves[li * n : (li + 1) * n]) for li in range(L)]
        return {"gride": [r for p in per for r in p["gride"]], **overlap_rows(self.layers, per, tb)}

    def tables(self, result: dict, ctx: RunContext) -> dict:
        def table(rows, columns):
            return pa.table({c: [r[c] for r in rows] for c in columns}) if rows else _empty(columns)

        return {
            "layer_gride": table(result["gride"], GRIDE_COLUMNS),
            "layer_overlap": table(result["overlap"], OVERLAP_COLUMNS),
            "overlap_curve": table(result["curve"], CURVE_COLUMNS),
        }

    @classmethod
    def null_tables(cls, run, kind: str, stats, null, *, seed: int, search=None) -> dict:
        """The null's ``layer_gride``: GRIDE (``gride.sample_rows``) on a sample of the run's TwoNN size drawn from
        each null layer (``stats.null_geometry.null_sample``) on its own stream
        ``default_rng([seed, NULL_KINDS.index(kind), 3, layer])``, independent of the geometry's draw; {} when the
        run has no GRIDE or no layer geometry. No overlap: the null's layers are drawn independently, its overlap
        is the chance value k/n that ``layer_overlap`` records."""
        if not (run.has("layer_gride") and run.has("layer_geometry")):
            return {}
        size = null_sample_size(run)
        rows = []
        for li, mu, s2 in null_params(kind, stats, run.layer_stats(), seed=seed):
            layer = int(stats.layer_index[li])
            X = null_sample(mu, s2, null.n, size, np.random.default_rng([seed, NULL_KINDS.index(kind), 3, layer]))
            rows += [{"layer": layer, **r} for r in gride.sample_rows(X, twonn_batch_of(size))]
        return {"layer_gride": pa.table({c: [r[c] for r in rows] for c in rows[0]})} if rows else {}


def overlap_rows(layers: list[int], per: list[dict], tb: np.ndarray) -> dict:
    """{"overlap": one row per layer at k = 10, "curve": rows per (layer, pair, masked, k)} from each layer's
    lists: χ_k with the next kept layer (none for the last) and with the last, the mean over the batches of the
    mean over their positions, ± the batches' std; ``chance`` the mean k / n (``overlap.chance``)."""
    last = len(layers) - 1
    batches = [np.flatnonzero(tb == t) for t in np.unique(tb)]
    curve = []
    for li in range(len(layers)):
        for pair, lj in (("next", li + 1), ("last", last)):
            if lj > last:
                continue
            for v in (0, 1):
                a, b = per[li]["lists"][v], per[lj]["lists"][v]
                share = np.stack([overlap.shared(a[r], b[r]).mean(1) for r in batches])  # (batches, len(KS))
                ks = np.asarray(overlap.KS, np.float64)
                chi = share / ks
                ch = overlap.chance(per[li]["candidates"][v])
                for j, k in enumerate(overlap.KS):
                    curve.append(
                        {
                            "layer": int(layers[li]),
                            "to_layer": int(layers[lj]),
                            "pair": pair,
                            "masked": bool(v),
                            "k": int(k),
                            "overlap": float(chi[:, j].mean()),
                            "overlap_std": float(chi[:, j].std()),
                            "chance": float(ch[j]),
                        }
                    )
    rows = []
    for layer in layers:
        at = {(c["pair"], c["masked"]): c for c in curve if c["layer"] == layer and c["k"] == overlap.K_DEFAULT}
        nan = {"overlap": float("nan"), "overlap_std": float("nan"), "chance": float("nan")}
        nxt, nxm = at.get(("next", False), nan), at.get(("next", True), nan)
        lst, lsm = at[("last", False)], at[("last", True)]
        rows.append(
            {
                "layer": int(layer),
                "overlap_next": nxt["overlap"],
                "overlap_next_masked": nxm["overlap"],
                "overlap_last": lst["overlap"],
                "overlap_last_masked": lsm["overlap"],
                "chance": lst["chance"],
                "chance_masked": lsm["chance"],
                "overlap_next_std": nxt["overlap_std"],
                "overlap_last_std": lst["overlap_std"],
            }
        )
    return {"overlap": rows, "curve": curve}


__all__ = ["NeighbourhoodMeasure", "overlap_rows"]
