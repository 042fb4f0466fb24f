"""TwoNN's context bias, measured and removed (numpy only).

In a TwoNN batch of 4,096 embeddings drawn from a small corpus, several come from one sentence, and at late
layers a token's nearest neighbour is often a token of its own sentence: r₁ shrinks, μ = r₂/r₁ grows and
the estimate d = −log(1 − F(μ)) / log μ (Facco et al. 2017, eq. 3–5; seed 004 §2.4) falls with the size
of the corpus. Three measures of it, from the same sample and the same batches as seed 004's estimate:

* the **same-sentence share**: the fraction of a batch's points whose nearest neighbour lies in their own
  sentence — a point counts when its nearest own-sentence distance is strictly below its nearest
  other-sentence distance (a tie counts as another sentence);
* the **cross-context estimate**: TwoNN with each point's r₁ and r₂ taken over the points of *other*
  sentences only (its own sentence's points masked);
* the **decimation curve** (Facco et al. 2017, §"scale"): both estimates on seeded random partitions of
  each batch into 2, 4 and 8 subsets (about 2,048, 1,024 and 512 points); an estimate stable in scale
  changes little along it.

Distances are exact: candidates come from a float32 Gram product ‖a‖² + ‖b‖² − 2 a·b with a rigorous bound
e = 2(d + 4) u (‖a‖² + ‖b‖²) on its rounding (u = 2⁻²⁴), and every pair whose lower bound d² − e can be among
a row's two nearest is re-ranked by its float64 distance ``pair_distance`` — the result equals a brute-force
float64 search over all allowed pairs, ties included.
"""
from __future__ import annotations

import numpy as np

from normvar_core.stats.layer_geometry import twonn_from_distances

CHUNK = 512                      # rows of one block (CHUNK x batch float64 arrays: 16 MiB at 4,096)
DECIMATION = (1, 2, 4, 8)        # subsets per batch: the batch itself, halves, quarters, eighths
DECIMATION_SEED = 0x7D0C1        # the partitions' seed (the same subsets on every run of one sample)
SAME_SENTENCE_WARN = 0.05        # above this share, the pages and the findings say that the corpus is small


def pair_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """‖a − b‖ in float64, row by row (one formula for the search and its brute-force check)."""
    return np.sqrt(np.square(np.asarray(a, np.float64) - np.asarray(b, np.float64)).sum(-1))


def _two_smallest(i: np.ndarray, dist: np.ndarray, m: int) -> np.ndarray:
    """(m, 2): the two smallest of ``dist`` for each row i (inf where a row has fewer)."""
    out = np.full((m, 2), np.inf)
    if i.size == 0:
        return out
    order = np.lexsort((dist, i))
    i, dist = i[order], dist[order]
    first = np.r_[True, i[1:] != i[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(i.size), 0))
    rank = np.arange(i.size) - start
    keep = rank < 2
    out[i[keep], rank[keep]] = dist[keep]
    return out


def context_neighbours(X: np.ndarray, groups: np.ndarray | None = None, chunk: int = CHUNK
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact distances of each row of X (float32 values): to its two nearest other rows, (m, 2) (seed 004's
    search); to its two nearest rows of *other* groups, (m, 2); to its nearest other row of its own group,
    (m,) — inf where there is none. ``groups`` None: no masking (the second equals the first, the third is inf).

    The block's squared distances are float32 Gram distances; their error is bounded by
    e = (2d + 24) u (‖a‖² + ‖b‖²) (the dot product's 2(d + 4) u and the float32 sums' few more), so every pair
    whose lower bound d² − e is at most a row's second smallest upper bound d² + e is re-ranked exactly."""
    X32 = np.ascontiguousarray(X, np.float32)
    X64 = X32.astype(np.float64)
    m, d = X32.shape
    sq = np.einsum("ij,ij->i", X64, X64).astype(np.float32)
    c = np.float32((2 * d + 24) * 2.0 ** -24 * 1.02)
    inf = np.float32(np.inf)
    out_all, out_cross, own = np.full((m, 2), np.inf), np.full((m, 2), np.inf), np.full(m, np.inf)
    g = None if groups is None else np.asarray(groups)

    def nearest(lo, hi, a, k):  # the exact k nearest allowed (finite lo) of the block's rows
        t = (np.partition(hi, k - 1, axis=1)[:, k - 1] if hi.shape[1] >= k else hi.max(axis=1))
        i, j = np.nonzero((lo <= t[:, None]) & np.isfinite(lo))
        return i, (pair_distance(X64[a + i], X64[j]) if i.size else np.zeros(0))

    for a in range(0, m, chunk):
        b = min(m, a + chunk)
        rows = np.arange(b - a)
        d2 = X32[a:b] @ X32.T
        d2 *= -2
        d2 += sq[a:b, None]
        d2 += sq[None, :]
        e = (sq[a:b, None] + sq[None, :]) * c
        lo, hi = d2 - e, d2 + e
        lo[rows, rows + a] = inf
        hi[rows, rows + a] = inf
        i, dist = nearest(lo, hi, a, 2)
        out_all[a:b] = _two_smallest(i, dist, b - a)
        if g is None:
            continue
        same = g[a:b, None] == g[None, :]
        same[rows, rows + a] = False
        i, dist = nearest(np.where(same, lo, inf), np.where(same, hi, inf), a, 1)
        if i.size:
            np.minimum.at(own, a + i, dist)
        lo[same] = inf
        hi[same] = inf
        i, dist = nearest(lo, hi, a, 2)
        out_cross[a:b] = _two_smallest(i, dist, b - a)
    return out_all, (out_all if g is None else out_cross), own


def twonn_of(r: np.ndarray) -> float:
    """Seed 004's TwoNN fit (``layer_geometry.twonn_from_distances``) on the rows with two neighbours; NaN
    below 3 such rows."""
    ok = np.isfinite(r[:, 1])
    return twonn_from_distances(r[ok, 0], r[ok, 1])[0] if ok.sum() >= 3 else float("nan")


def partition(m: int, k: int, batch: int) -> np.ndarray:
    """A seeded random split of a batch's m rows into k subsets of near-equal size: each row's subset."""
    order = np.random.default_rng([DECIMATION_SEED, int(batch), int(k)]).permutation(m)
    out = np.empty(m, np.int64)
    out[order] = np.arange(m) * k // max(m, 1)
    return out


def batch_context(X: np.ndarray, sentences: np.ndarray, seed_r: np.ndarray, batch: int,
                  rows: int | None = None) -> dict:
    """One TwoNN batch's context measures, from its kept rows X (copies dropped), their sentences and seed
    004's (r₁, r₂) of those rows: the same-sentence share, and for each decimation k the TwoNN estimates of
    its subsets ``{k: ([seed estimates], [cross estimates], subset size)}`` (k = 1: the batch, the seed's
    estimate from ``seed_r``; the size is the batch's ``rows`` — its points before copies were dropped — over k)."""
    rows = len(X) if rows is None else int(rows)
    _, cross, own = context_neighbours(X, sentences)
    share = float(np.mean(own < cross[:, 0])) if len(X) else float("nan")
    curve = {1: ([twonn_of(seed_r)], [twonn_of(cross)], rows)}
    for k in DECIMATION[1:]:
        part = partition(len(X), k, batch)
        seeds, crosses = [], []
        for s in range(k):
            idx = np.flatnonzero(part == s)
            r_all, r_cross, _ = context_neighbours(X[idx], sentences[idx])
            seeds.append(twonn_of(r_all))
            crosses.append(twonn_of(r_cross))
        curve[k] = (seeds, crosses, rows // k)
    return {"share": share, "cross": twonn_of(cross), "curve": curve}


def _mean_std(v) -> tuple[float, float]:
    v = np.asarray(v, np.float64)
    v = v[np.isfinite(v)]
    return (float(v.mean()), float(v.std())) if v.size else (float("nan"), float("nan"))


def layer_context(parts: list[dict]) -> tuple[dict, list[dict]]:
    """A layer's context columns (mean over batches: ``same_sentence_nn``; ``twonn_id_cross`` ± std over
    batches) and its decimation rows (size, subsets, twonn_id, twonn_id_std, twonn_id_cross,
    twonn_id_cross_std: mean ± std over every subset of every batch)."""
    share = _mean_std([p["share"] for p in parts])[0]
    cm, cs = _mean_std([p["cross"] for p in parts])
    rows = []
    for k in DECIMATION:
        seeds = [x for p in parts for x in p["curve"][k][0]]
        cross = [x for p in parts for x in p["curve"][k][1]]
        size = min(p["curve"][k][2] for p in parts) if parts else 0
        (im, isd), (xm, xsd) = _mean_std(seeds), _mean_std(cross)
        rows.append({"size": int(size), "subsets": int(k), "twonn_id": im, "twonn_id_std": isd,
                     "twonn_id_cross": xm, "twonn_id_cross_std": xsd})
    return {"same_sentence_nn": share, "twonn_id_cross": cm, "twonn_id_cross_std": cs}, rows


def context_sentence(g) -> str | None:
    """A sentence for the pages and findings when some layer's same-sentence share exceeds
    ``SAME_SENTENCE_WARN`` (``g``: a run's ``layer_geometry``), else None."""
    if g is None or "same_sentence_nn" not in g or not g["same_sentence_nn"].notna().any():
        return None
    row = g.loc[g["same_sentence_nn"].idxmax()]
    share = float(row["same_sentence_nn"])
    if share <= SAME_SENTENCE_WARN:
        return None
    return (f"At layer {int(row['layer'])}, {share:.0%} of the sampled tokens have their nearest neighbour in their "
            f"own sentence: the corpus is small, so seed 004's TwoNN ({row['twonn_id']:.1f}) is biased low by "
            f"context; the cross-context estimate, neighbours from other sentences only, is "
            f"{row['twonn_id_cross']:.1f}. Seed 004's numbers (enwik8, 100 MB) correspond to the cross-context one.")


def shares_differ(tables: dict) -> str | None:
    """{run: its ``layer_geometry``} -> a sentence when two runs' largest same-sentence shares differ by more
    than ``SAME_SENTENCE_WARN`` (5 points): their seed 004 TwoNN then differ by context as well as by model."""
    have = {n: float(g["same_sentence_nn"].max()) for n, g in tables.items()
            if g is not None and "same_sentence_nn" in g and g["same_sentence_nn"].notna().any()}
    if len(have) < 2 or max(have.values()) - min(have.values()) <= SAME_SENTENCE_WARN:
        return None
    each = "; ".join(f"{n}: {v:.0%}" for n, v in have.items())
    return (f"The runs' shares of nearest neighbours in the same sentence differ ({each}, the largest over layers): "
            f"their seed 004 TwoNN differ by corpus size as well as by model — compare the cross-context estimates.")


__all__ = ["shares_differ", "context_neighbours", "pair_distance", "batch_context", "layer_context", "partition", "twonn_of",
           "context_sentence", "DECIMATION", "SAME_SENTENCE_WARN"]
