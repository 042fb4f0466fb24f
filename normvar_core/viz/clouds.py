"""PCA of sampled raw embeddings for the token clouds (the study's Fig. 1, App. A).

PCA is fitted on the selected tokens' sampled embeddings together; the origin 0 in R^d is projected
with the same transform, and every 2-D point is translated so that the projected origin sits at (0, 0)
("After the transformation, we translated all 2D points so that the transformed origin coincided with
the new origin", App. A). The distance of a cloud from (0, 0) then shows how far its embeddings lie
from the origin along the two principal directions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from normvar_core.stats import analyses

CLOUD_FALLBACK = 12
"""How many sampled types a cloud draws when App. A's selection has none with stored samples."""


def cloud_tokens(run) -> list[int]:
    """The token types a cloud draws by default, for the Token clouds page and the deck alike: App. A's selection
    (``analyses.select_tokens``: types with 10 ≤ n_t ≤ 10⁵ and ≥ 3 characters, drawn over 10 frequency bins) among
    the types with stored samples, in its order; else the first ``CLOUD_FALLBACK`` sampled types; [] without
    samples. ``run``: a ``runs.reader.Run``."""
    if not run.has("samples"):
        return []
    sampled = run.sampled_tokens()
    have = set(sampled["token_id"].astype(int))
    chosen = analyses.select_tokens(run.stats(), run.tokens()["token"].astype(str).tolist())
    return [int(t) for t in chosen if int(t) in have] or sampled["token_id"].astype(int).head(CLOUD_FALLBACK).tolist()


@dataclass(frozen=True)
class Cloud:
    coords: pd.DataFrame
    """One row per sampled embedding: token_id, token, n, pc1, pc2 (origin at (0, 0))."""
    explained: tuple[float, float]
    """Fraction of the pooled samples' variance on PC1 and PC2."""
    origin_before: tuple[float, float]
    """Where the origin projected before the translation (the mean's offset)."""


def pca_cloud(
    samples: pd.DataFrame, n: pd.Series | dict | None = None, sentences: dict[int, str] | None = None
) -> Cloud:
    """``samples``: DataFrame[token_id, token, vector] (a Run's ``samples(layer, ids)``); ``n``: n_t by
    token_id for the colouring (defaults to the sample count). Deterministic (sign fixed so that
    each component's largest-|loading| coordinate is positive). With ``sentences`` ({sentence_id:
    text}) each point also gets ``context``: its sentence around the token, the token in bold."""
    if samples is None or len(samples) == 0:
        empty = pd.DataFrame(columns=["token_id", "token", "n", "pc1", "pc2"])
        return Cloud(empty, (float("nan"), float("nan")), (0.0, 0.0))
    X = np.stack([np.asarray(v, dtype=np.float64).ravel() for v in samples["vector"]])
    mean = X.mean(axis=0)
    Xc = X - mean
    # SVD of the centred data: rows of vt are the principal directions
    _, s, vt = np.linalg.svd(Xc, full_matrices=False)
    comps = vt[:2] if vt.shape[0] >= 2 else np.vstack([vt, np.zeros((2 - vt.shape[0], vt.shape[1]))])
    for k in range(comps.shape[0]):
        j = int(np.argmax(np.abs(comps[k])))
        if comps[k, j] < 0:
            comps[k] = -comps[k]
    total = float((s**2).sum())
    explained = tuple(float(s[k] ** 2 / total) if total > 0 and k < s.size else float("nan") for k in range(2))
    proj = Xc @ comps.T
    origin = (np.zeros_like(mean) - mean) @ comps.T  # the transformed origin
    proj = proj - origin
    ids = samples["token_id"].to_numpy()
    if n is None:
        counts = samples["token_id"].value_counts()
        nt = counts.reindex(ids).to_numpy()
    else:
        lookup = n if isinstance(n, dict) else n.to_dict()
        nt = np.array([lookup.get(int(i), np.nan) for i in ids])
    coords = pd.DataFrame(
        {
            "token_id": ids,
            "token": samples["token"].astype(str).to_numpy(),
            "n": nt,
            "pc1": proj[:, 0],
            "pc2": proj[:, 1],
        }
    )
    if "i" in samples:
        coords["i"] = samples["i"].to_numpy()
    if sentences and "sentence_id" in samples:
        from normvar_core.stats.contexts import highlight

        coords["sentence_id"] = samples["sentence_id"].to_numpy()
        coords["context"] = [
            highlight(sentences.get(int(s), ""), int(a), int(b), mark=("<b>", "</b>"), window=14)
            for s, a, b in zip(samples["sentence_id"], samples["char_start"], samples["char_end"])
        ]
    return Cloud(coords, (explained[0], explained[1]), (float(origin[0]), float(origin[1])))


TSNE_SEED = 0
"""The t-SNE map's seed: the same run and layer always give the same map."""


TSNE_PCA_DIMS = 50
"""The t-SNE input: the embeddings' first 50 principal components (the usual reduction before t-SNE:
the neighbours are found in 50 dimensions, and exactly, up to ``TSNE_EXACT_MAX`` points)."""
TSNE_EXACT_MAX = 20_000
TSNE_ITERATIONS = (100, 100)
"""Early-exaggeration and then plain iterations. openTSNE's default 550 (250 + 300) gave the same
trustworthiness (0.995 at k = 10, 2,000 points) on an 11,176-embedding MiniLM layer as 200 (KL
divergence 0.81 against 1.11: the clusters are a little less spread apart)."""


def _tsne_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def tsne_map(samples: pd.DataFrame, seed: int = TSNE_SEED, perplexity: float = 30.0) -> pd.DataFrame:
    """A non-linear 2-D map of every sampled embedding of a layer (``Run.samples(layer)``, all stored
    types): computed once per run and layer and shared by every token selection, so a token's cloud
    keeps its place when others are added. openTSNE on the embeddings' first ``TSNE_PCA_DIMS``
    principal components: exact nearest neighbours (annoy above ``TSNE_EXACT_MAX`` points), PCA
    initialisation, the FFT gradient, ``TSNE_ITERATIONS`` (100 + 100) iterations, ``seed``: about 6 s of
    one core for 11k embeddings. Returns DataFrame[token_id, i, tsne1, tsne2]; the
    perplexity is capped at (m − 1) / 3 for m samples. Unlike PCA, distances between far clouds and the
    origin carry no meaning here."""
    from openTSNE import TSNE

    if samples is None or len(samples) == 0:
        return pd.DataFrame(columns=["token_id", "i", "tsne1", "tsne2"])
    X = np.stack([np.asarray(v, dtype=np.float64).ravel() for v in samples["vector"]])
    m = X.shape[0]
    if m < 4:
        Y = np.zeros((m, 2))
    else:
        Xc = X - X.mean(axis=0)
        _, _, vt = np.linalg.svd(Xc, full_matrices=False)
        Z = Xc @ vt[:TSNE_PCA_DIMS].T
        perp = max(1.0, min(float(perplexity), (m - 1) / 3.0))
        early, plain = TSNE_ITERATIONS
        Y = np.asarray(
            TSNE(
                n_components=2,
                perplexity=perp,
                random_state=int(seed),
                n_jobs=_tsne_jobs(),
                early_exaggeration_iter=early,
                n_iter=plain,
                negative_gradient_method="fft",
                neighbors="exact" if m <= TSNE_EXACT_MAX else "annoy",
                initialization="pca",
                metric="euclidean",
                verbose=False,
            ).fit(Z)
        )
    return pd.DataFrame(
        {"token_id": samples["token_id"].to_numpy(), "i": samples["i"].to_numpy(), "tsne1": Y[:, 0], "tsne2": Y[:, 1]}
    )


def with_tsne(coords: pd.DataFrame, tmap: pd.DataFrame) -> pd.DataFrame:
    """``coords`` (a Cloud's) with the t-SNE columns of their samples (joined on token_id, i)."""
    return coords.merge(tmap, on=["token_id", "i"], how="inner")
