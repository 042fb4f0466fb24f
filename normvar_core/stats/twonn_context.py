"""TwoNN's context bias, measured and removed (numpy only).

In a TwoNN batch of 4,096 embeddings drawn from a small corpus, several come from one sentence, and at late
layers a token's nearest neighbour is often a token of its own sentence: r₁ shrinks, μ = r₂/r₁ grows and
the estimate d = −log(1 − F(μ)) / log μ (Facco et al. 2017, eq. 3–5; Razzhigaev et al. 2024 §2.4) falls with the size
of the corpus. Three measures of it, from the same sample and the same batches as Razzhigaev et al.'s estimate:

* the **same-sentence share**: the fraction of a batch's points whose nearest neighbour lies in their own
  sentence — a point counts when its nearest own-sentence distance is strictly below its nearest
  other-sentence distance (a tie counts as another sentence);
* the **cross-context estimate**: TwoNN with each point's r₁ and r₂ taken over the points of *other*
  sentences only (its own sentence's points masked);
* the **decimation curve** (Facco et al. 2017, the check that an estimate is stable in scale): both estimates
  on seeded random subsets of each batch of 1/2, 1/4 and 1/8 of its points (2,048, 1,024 and 512 of a
  batch of 4,096; nested, drawn before the pass: ``subset_levels``; a subset is decimated first, then its
  identical points dropped, as TwoNN drops them), mean ± std over the batches; an estimate stable in scale
  changes little along it. The stream (``pipeline.measures.twonn_stream``) finds each subset's two nearest
  in the batch's own Gram blocks during the pass.

Distances are exact: candidates come from a float32 Gram product ‖a‖² + ‖b‖² − 2 a·b with a rigorous bound
e = 2(d + 4) u (‖a‖² + ‖b‖²) on its rounding (u = 2⁻²⁴), and every pair whose lower bound d² − e can be among
a row's two nearest is re-ranked by its float64 distance ``pair_distance`` — the result equals a brute-force
float64 search over all allowed pairs, ties included.
"""

from __future__ import annotations

import numpy as np

from normvar_core.stats.layer_geometry import twonn_from_distances

CHUNK = 512  # rows of one block (CHUNK x batch float64 arrays: 16 MiB at 4,096)
DECIMATION = (1, 2, 4, 8)  # subsets per batch: the batch itself, halves, quarters, eighths
DECIMATION_SEED = 0x7D0C1  # the subsets' seed (the same subsets on every run of one sample)
SAME_SENTENCE_WARN = 0.05  # above this share, the pages and the findings say that the corpus is small


def pair_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """‖a − b‖ in float64, row by row (one formula for the search and its brute-force check)."""
    return np.sqrt(np.square(np.asarray(a, np.float64) - np.asarray(b, np.float64)).sum(-1))


PAIRS = 4096  # pairs whose float64 squares are held at a time (``row_distance``: 8·PAIRS·d bytes)


def row_distance(X32: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``pair_distance(X32[p], X32[q])`` (the same float64 squares, summed by numpy) without the float64 gathers,
    ``PAIRS`` pairs at a time (its memory bounded whatever the number of pairs)."""
    from normvar_core.stats.twonn_kernels import row_pair_squares  # numba: not imported by the pages' readers

    p, q = np.ascontiguousarray(p, np.int64), np.ascontiguousarray(q, np.int64)
    out = np.empty(p.size)
    sq = np.empty((min(p.size, PAIRS), X32.shape[1]))
    for a in range(0, p.size, PAIRS):
        part = sq[: min(PAIRS, p.size - a)]
        row_pair_squares(X32, p[a : a + part.shape[0]], q[a : a + part.shape[0]], part)
        out[a : a + part.shape[0]] = np.sqrt(part.sum(-1))
    return out


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


def context_neighbours(
    X: np.ndarray,
    groups: np.ndarray | None = None,
    rows: np.ndarray | None = None,
    chunk: int = CHUNK,
    own_group: bool = True,
    every: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact distances of the rows ``rows`` of X (float32 values; default all): to their two nearest other rows
    of X, (m, 2) (Razzhigaev et al.'s search); to their two nearest rows of *other* groups, (m, 2); to their nearest
    other
    row of their own group, (m,) — inf where there is none. ``groups`` None: no masking (the second equals the
    first, the third is inf); ``own_group`` False: the third is not searched (inf); ``every`` False (with
    ``groups``): the first is not searched (inf).

    The squared distances d² = ‖a‖² + ‖b‖² − 2 a·b are float32 Gram distances, their error at most
    e = (2d + 24) u (‖a‖² + ‖b‖²) (the dot product's 2(d + 4) u and the float32 sums' few more; u = 2⁻²⁴), and
    at most e_row = (2d + 24) u (‖a‖² + max ‖b‖²) for a row a. So the true k-th smallest is at most the k-th
    smallest d² plus e_row, and every pair with d² ≤ that + e_row is re-ranked by its float64 distance."""
    X32 = np.ascontiguousarray(X, np.float32)
    X64 = X32.astype(np.float64)
    m, d = X32.shape
    rows = np.arange(m) if rows is None else np.asarray(rows, np.int64)
    n = rows.size
    sq64 = np.einsum("ij,ij->i", X64, X64)
    sq = sq64.astype(np.float32)
    c = (2 * d + 24) * 2.0**-24 * 1.02
    inf = np.float32(np.inf)
    out_all, out_cross, own = np.full((n, 2), np.inf), np.full((n, 2), np.inf), np.full(n, np.inf)
    g = None if groups is None else np.asarray(groups)

    from normvar_core.stats.twonn_kernels import context_candidates  # numba: not imported by the pages' readers

    masked = g is not None
    gk = np.unique(g, return_inverse=True)[1].reshape(-1).astype(np.int64) if masked else np.zeros(m, np.int64)  # type: ignore[call-overload]  # g is set when masked

    def exact(at, pairs, count):  # (row in block, exact float64 distance) of a search's candidate pairs
        i, j = pairs[0, :count], pairs[1, :count]
        return i, (row_distance(X32, at[i], j) if count else np.zeros(0))

    for a in range(0, n, chunk):
        at = rows[a : a + chunk]
        blk = np.arange(at.size)
        d2 = X32[at] @ X32.T
        d2 *= -2
        d2 += sq[at, None]
        d2 += sq[None, :]
        d2[blk, at] = inf
        slack2 = 2 * (c * (sq64[at] + sq64.max())).astype(np.float32)
        pairs, counts = context_candidates(d2, at, gk, slack2, masked, own_group, every or not masked)
        out_all[a : a + at.size] = _two_smallest(*exact(at, pairs[0], counts[0]), at.size)  # type: ignore[call-arg]  # exact() returns two arrays
        if not masked:
            continue
        if own_group:
            i, dist = exact(at, pairs[1], counts[1])
            if i.size:
                np.minimum.at(own, a + i, dist)
        out_cross[a : a + at.size] = _two_smallest(*exact(at, pairs[2], counts[2]), at.size)  # type: ignore[call-arg]  # exact() returns two arrays
    return out_all, (out_all if g is None else out_cross), own


def twonn_of(r: np.ndarray) -> float:
    """Razzhigaev et al.'s TwoNN fit (``layer_geometry.twonn_from_distances``) on the rows with two neighbours; NaN
    below 3 such rows."""
    ok = np.isfinite(r[:, 1])
    return twonn_from_distances(r[ok, 0], r[ok, 1])[0] if ok.sum() >= 3 else float("nan")


def subset_levels(tb: np.ndarray) -> np.ndarray:
    """(K,) int8: for each sample row, the largest k of ``DECIMATION`` whose decimated subset of its TwoNN batch
    holds it. A batch's m rows are put in a seeded random order (seed: the batch's number); its first m // k rows
    are the subset of k, so the subsets are nested (the eighth inside the quarter inside the half) and fixed
    before the pass.

    >>> subset_levels(np.zeros(8, int)).tolist()
    [1, 2, 1, 1, 1, 8, 4, 2]
    """
    tb = np.asarray(tb)
    out = np.ones(tb.size, np.int8)
    for t in np.unique(tb):
        rows = np.flatnonzero(tb == t)
        order = rows[np.random.default_rng([DECIMATION_SEED, int(t)]).permutation(rows.size)]
        for k in DECIMATION[1:]:
            out[order[: rows.size // k]] = k
    return out


def _cross_context(
    X: np.ndarray, sentences: np.ndarray, r: np.ndarray, nn: np.ndarray, *, own_group: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(r₁, r₂) of each row of X over the rows of other sentences, and (``own_group``) its nearest distance in its
    own sentence where that is its nearest neighbour overall (else inf), from its two nearest (r, their rows nn, -1
    where none). A row whose two nearest both lie in other sentences has them as its cross-context pair (the masked
    set holds them and is a subset of all; its own sentence's points are no nearer): only the other rows are
    searched again, over other sentences alone. The own-sentence distance is all the same-sentence share needs: a
    row's nearest neighbour is in its own sentence (own < cross r₁) only when its nearest overall, nn₁, is there
    (then own = r₁); when nn₁ is in another sentence, cross r₁ = r₁ ≤ own."""
    m = len(X)
    nn = np.asarray(nn, np.int64)
    other = (nn >= 0).all(1)
    other[other] = (sentences[nn[other]] != sentences[other, None]).all(1)  # type: ignore[index]  # a boolean array
    cross = np.full((m, 2), np.inf)
    own = np.full(m, np.inf)
    X32 = np.ascontiguousarray(X, np.float32)
    idx = np.flatnonzero(other)
    if idx.size:
        cross[idx] = np.sort(row_distance(X32, np.repeat(idx, 2), nn[idx].reshape(-1)).reshape(-1, 2), axis=1)
    redo = np.flatnonzero(~other)
    if redo.size:
        cross[redo] = context_neighbours(X, sentences, rows=redo, own_group=False, every=False)[1]
    if own_group:
        near = nn[:, 0]
        mine = np.flatnonzero((near >= 0) & (sentences[np.maximum(near, 0)] == sentences))
        own[mine] = row_distance(X32, mine, near[mine])
    return cross, own


def batch_context(
    X: np.ndarray,
    sentences: np.ndarray,
    seed_r: np.ndarray,
    seed_nn: np.ndarray,
    batch: int,
    rows: int | None = None,
    subsets: dict | None = None,
    masked=None,
) -> dict:
    """One TwoNN batch's context measures, from its kept rows X (copies dropped), their sentences, and Razzhigaev et
    al.'s
    (r₁, r₂) of those rows with their neighbours ``seed_nn`` (row indices into X, -1 where none): the
    same-sentence share, the cross-context estimate, and for each decimation k the estimates on its subset,
    ``{k: (seed estimate, cross estimate, size)}`` (k = 1: the batch, the seed's estimate from ``seed_r``; the size
    is the batch's ``rows`` — its points before copies were dropped — over k).

    ``subsets``: {k: (inside (m,) bool, r (m, 2), nn (m, 2))} — the rows of X that the subset of k holds and their
    two nearest within it, as the stream found them (``twonn_stream``); only the cross-context pairs of the rows
    with a neighbour in their own sentence are searched here. None: each subset is drawn here over X's rows
    (``subset_levels``) and searched in full (``context_neighbours``).

    ``masked``: the caller's search where X is (a device), ``masked(idx)`` -> (every, cross): the two nearest of the
    rows X[idx] among themselves, over all and over other sentences; the batch (idx all) and each subset are then
    searched by it, and a point's nearest neighbour is in its own sentence when every[0] < cross[0] (the nearest
    over all is then not over other sentences)."""
    rows = len(X) if rows is None else int(rows)
    m = len(X)
    sentences = np.asarray(sentences)
    if masked is not None:
        every, cross = masked(np.arange(m))
        curve = {1: (twonn_of(seed_r), twonn_of(cross), rows)}
        for k in DECIMATION[1:]:
            inside, r_all, _ = subsets[k]  # type: ignore[index]  # subsets are given with k
            idx = np.flatnonzero(inside)
            curve[k] = (twonn_of(np.asarray(r_all)[idx]), twonn_of(masked(idx)[1]), rows // k)
        share = float(np.mean(every[:, 0] < cross[:, 0])) if m else float("nan")
        return {"share": share, "cross": twonn_of(cross), "curve": curve}
    share = float("nan")
    cross = np.full((m, 2), np.inf)
    if m:
        cross, own = _cross_context(X, sentences, seed_r, seed_nn, own_group=True)
        share = float(np.mean(own < cross[:, 0]))
    curve = {1: (twonn_of(seed_r), twonn_of(cross), rows)}
    for k in DECIMATION[1:]:
        if subsets is None:
            idx = np.flatnonzero(subset_levels(np.full(m, int(batch))) >= k)
            r_k, cross_k, _ = context_neighbours(X[idx], sentences[idx], own_group=False)
        else:
            inside, r_all, nn_all = subsets[k]
            idx = np.flatnonzero(inside)
            at = np.full(m, -1, np.int64)
            at[idx] = np.arange(idx.size)
            near = np.asarray(nn_all, np.int64)[idx]
            r_k = np.asarray(r_all)[idx]
            cross_k = (
                _cross_context(
                    X[idx], sentences[idx], r_k, np.where(near >= 0, at[np.maximum(near, 0)], -1), own_group=False
                )[0]
                if idx.size
                else np.zeros((0, 2))
            )
        curve[k] = (twonn_of(r_k), twonn_of(cross_k), rows // k)
    return {"share": share, "cross": twonn_of(cross), "curve": curve}


def _mean_std(v) -> tuple[float, float]:
    v = np.asarray(v, np.float64)
    v = v[np.isfinite(v)]
    return (float(v.mean()), float(v.std())) if v.size else (float("nan"), float("nan"))


def layer_context(parts: list[dict]) -> tuple[dict, list[dict]]:
    """A layer's context columns (mean over batches: ``same_sentence_nn``; ``twonn_id_cross`` ± std over
    batches) and its decimation rows (size, subsets = k, twonn_id, twonn_id_std, twonn_id_cross,
    twonn_id_cross_std: mean ± std over the batches' subsets)."""
    share = _mean_std([p["share"] for p in parts])[0]
    cm, cs = _mean_std([p["cross"] for p in parts])
    rows = []
    for k in DECIMATION:
        seeds = [p["curve"][k][0] for p in parts]
        cross = [p["curve"][k][1] for p in parts]
        size = min(p["curve"][k][2] for p in parts) if parts else 0
        (im, isd), (xm, xsd) = _mean_std(seeds), _mean_std(cross)
        rows.append(
            {
                "size": int(size),
                "subsets": int(k),
                "twonn_id": im,
                "twonn_id_std": isd,
                "twonn_id_cross": xm,
                "twonn_id_cross_std": xsd,
            }
        )
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
    said = (
        f"At layer {int(row['layer'])}, {share:.0%} of the sampled tokens have their nearest neighbour in their "
        f"own sentence: the corpus is small, so the Razzhigaev et al. 2024 protocol's TwoNN ({row['twonn_id']:.1f}) "
        "is biased low by context; "
    )
    cross = row.get("twonn_id_cross")
    if cross is None or not np.isfinite(cross):  # a run file written before the cross-context estimate: not measured
        return said + (
            "the cross-context estimate (neighbours from other sentences only) was not measured in this "
            "run: recompute it to have it."
        )
    return said + (
        f"the cross-context estimate, neighbours from other sentences only, is {cross:.1f}. The "
        "protocol's published numbers (enwik8, 100 MB) correspond to the cross-context one."
    )


def shares_differ(tables: dict) -> str | None:
    """{run: its ``layer_geometry``} -> a sentence when two runs' largest same-sentence shares differ by more
    than ``SAME_SENTENCE_WARN`` (5 points): their Razzhigaev et al. TwoNN then differ by context as well as by model."""
    have = {
        n: float(g["same_sentence_nn"].max())
        for n, g in tables.items()
        if g is not None and "same_sentence_nn" in g and g["same_sentence_nn"].notna().any()
    }
    if len(have) < 2 or max(have.values()) - min(have.values()) <= SAME_SENTENCE_WARN:
        return None
    each = "; ".join(f"{n}: {v:.0%}" for n, v in have.items())
    return (
        f"The runs' shares of nearest neighbours in the same sentence differ ({each}, the largest over layers): "
        f"their protocol TwoNN (Razzhigaev et al. 2024) differ by corpus size as well as by model — compare the "
        f"cross-context estimates."
    )


__all__ = [
    "shares_differ",
    "context_neighbours",
    "pair_distance",
    "batch_context",
    "layer_context",
    "twonn_of",
    "context_sentence",
    "DECIMATION",
    "SAME_SENTENCE_WARN",
    "subset_levels",
]
