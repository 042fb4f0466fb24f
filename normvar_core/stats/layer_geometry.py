"""Layer geometry from exact streamed quantities (Razzhigaev et al. 2024 §2.3–2.4; Ethayarajh 2019; Facco et al.
2017). Pure numpy: the measures in ``pipeline/measures/geometry.py`` stream the inputs.

* Spectrum of the covariance Σ = (1/n) Σ (x − μ)(x − μ)ᵀ of every embedding of a layer, eigenvalues
  λ₁ ≥ … ≥ λ_d ≥ 0:
  anisotropy = λ₁ / Σλ (Razzhigaev et al.'s σ₁²/Σσᵢ² of the centred matrix, §2.3); participation ratio
  PR = (Σλ)² / Σλ²; n90 / n99 = components needed for 90 % / 99 % of the variance; trace Σλ = V(X).
* Mean cosine between two distinct embeddings, exact over all n(n−1) ordered pairs from
  s = Σ u, u = x / ‖x‖:   mean cos = (‖s‖² − n) / (n (n − 1)).
  Per token type the same formula over X_t is its self-similarity.
* TwoNN (Facco et al. 2017, Razzhigaev et al. 2024 §2.4): μᵢ = r₂ / r₁ (second / first nearest-neighbour
  distance); the largest 10 % of μ discarded; the slope of −log(1 − F_emp(μ)) on log μ through the
  origin, F_emp(μ_(i)) = i / N — the estimator of scikit-dimension's ``TwoNN`` (checked against it in
  the tests). Identical rows are reduced to one copy first (as DADApy's ``remove_identical_points``)
  and the removed copies counted: the estimator runs on distinct points, so no point takes a copy of a
  duplicated pair as its two neighbours (r₁ = r₂, μ = 1).
* The Gaussian-geometry comment's high-dimensional checks: the spread of the norm, std(‖x‖)/E‖x‖ (a Gaussian in R^d puts
  it near 1/√(2d)), exact from Σ‖x‖ and Σ‖x‖²; cosines of disjoint random pairs of the sample (near
  N(0, 1/d) for isotropic vectors).
* Spectral columns (``SPECTRAL_COLUMNS``: column -> f, today IsoScore's ``isoscore``): each adds ``f(eigenvalues)``
  to a layer's row here and to each half's row in ``stats.intervals.half_values``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normvar_core.constants import TWONN_BATCH as BATCH_SIZE  # Razzhigaev et al.: batches of at least 4,096 embeddings
from normvar_core.stats.isoscore import isoscore

TWONN_DISCARD = 0.1


@dataclass(frozen=True)
class Spectrum:
    """Summary of a covariance spectrum (eigenvalues descending)."""

    eigenvalues: np.ndarray
    trace: float
    anisotropy: float
    participation_ratio: float
    n90: int
    n99: int


def spectrum(cov: np.ndarray | None, eigenvalues: np.ndarray | None = None) -> Spectrum:
    """Eigen-summary of a symmetric PSD matrix (float64 eigh; tiny negative rounding clipped to 0), or of its
    ``eigenvalues`` (descending) when they were computed elsewhere (a device)."""
    lam = (
        np.linalg.eigvalsh(np.asarray(cov, dtype=np.float64))[::-1] if eigenvalues is None else np.asarray(eigenvalues)
    )
    lam = np.clip(lam, 0.0, None)
    total = float(lam.sum())
    if total <= 0:
        return Spectrum(lam, 0.0, float("nan"), float("nan"), 0, 0)
    cum = np.cumsum(lam) / total
    return Spectrum(
        eigenvalues=lam,
        trace=total,
        anisotropy=float(lam[0] / total),
        participation_ratio=float(total**2 / np.sum(lam**2)),
        n90=int(np.searchsorted(cum, 0.90 - 1e-12) + 1),
        n99=int(np.searchsorted(cum, 0.99 - 1e-12) + 1),
    )


SPECTRAL_COLUMNS = {"isoscore": isoscore}
"""The per-layer columns computed from a covariance's eigenvalues: column -> f(eigenvalues), in column order."""


def spectral_columns(eigenvalues) -> dict:
    """{column: f(eigenvalues)} for every column of ``SPECTRAL_COLUMNS`` (the eigenvalues clipped at 0, any
    order; ``None`` when the covariance is missing: every column NaN)."""
    if eigenvalues is None:
        return dict.fromkeys(SPECTRAL_COLUMNS, float("nan"))
    lam = np.clip(np.asarray(eigenvalues, dtype=np.float64), 0.0, None)
    return {col: float(f(lam)) for col, f in SPECTRAL_COLUMNS.items()}


def mean_cosine(sum_u_sq: float | np.ndarray, n: float | np.ndarray):
    """(‖Σu‖² − n) / (n (n − 1)): the mean cosine over all ordered pairs of distinct embeddings."""
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (np.asarray(sum_u_sq, dtype=np.float64) - n) / (n * (n - 1))
    return np.where(n >= 2, out, np.nan)


def batch_anisotropy(X: np.ndarray) -> float:
    """σ₁² / Σσᵢ² of the centred matrix of one batch (Razzhigaev et al.'s estimate): the squared singular
    values of X_c are the eigenvalues of X_cᵀ X_c (one d x d eigh instead of an m x d SVD)."""
    X = np.asarray(X, dtype=np.float64)
    Xc = X - X.mean(0)
    lam = np.clip(np.linalg.eigvalsh(Xc.T @ Xc), 0.0, None)
    return float(lam[-1] / lam.sum()) if lam.sum() > 0 else float("nan")


def norm_spread(norm_sum: float, sq_sum: float, n: float) -> tuple[float, float]:
    """(E‖x‖, std(‖x‖) / E‖x‖) from Σ‖x‖ and Σ‖x‖² over n embeddings (std with 1/n, as Q is a mean)."""
    if n <= 0 or norm_sum <= 0:
        return float("nan"), float("nan")
    mean = norm_sum / n
    var = max(sq_sum / n - mean * mean, 0.0)
    return float(mean), float(np.sqrt(var) / mean)


def pair_cosines(X: np.ndarray, chunk: int = 1024) -> np.ndarray:
    """Cosines of the disjoint pairs (x₀, x₁), (x₂, x₃), … of the rows of X (a random order: random
    pairs); pairs with a zero vector are dropped. ``chunk`` pairs at a time in float64 (2·chunk·d·8 bytes
    of work, whatever the sample's size: the memory plan's ``publish_bytes`` of the geometry)."""
    m = X.shape[0] // 2
    out = []
    for s in range(0, m, chunk):
        e = min(m, s + chunk)
        a = np.asarray(X[2 * s : 2 * e : 2], dtype=np.float64)
        b = np.asarray(X[2 * s + 1 : 2 * e : 2], dtype=np.float64)
        na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
        ok = (na > 0) & (nb > 0)
        out.append(np.einsum("ij,ij->i", a[ok], b[ok]) / (na[ok] * nb[ok]))
    return np.concatenate(out) if out else np.zeros(0)


def layer_row(
    cov: np.ndarray | None,
    sample: np.ndarray,
    *,
    n: int,
    sum_u_sq: float,
    n_u: int,
    norm_sum: float,
    sq_sum: float,
    search=None,
    est: dict | None = None,
    eigenvalues: np.ndarray | None = None,
) -> tuple[dict, np.ndarray]:
    """One ``layer_geometry`` row (without the layer) and the eigenvalues, from a layer's covariance,
    its random-order sample, Σu (as ‖Σu‖²) over n_u non-zero embeddings and Σ‖x‖, Σ‖x‖² over n.
    One definition for the measure over a model's states and for the Gaussian null;
    ``est``: Razzhigaev et al.'s batch estimates when already made (the measure's streamed neighbours,
    ``estimates_from``), else ``batched_estimates`` with ``search(X32, k)``, the TwoNN candidate search;
    ``eigenvalues``: the covariance's, computed where it is (``cov`` then unused)."""
    sp = spectrum(cov, eigenvalues)
    if est is None:
        est = batched_estimates(sample, search=search) if len(sample) >= 3 else {}
    norm_mean, norm_cv = norm_spread(norm_sum, sq_sum, n)
    row = {
        "n": int(n),
        "anisotropy": sp.anisotropy,
        "anisotropy_batch_mean": est.get("anisotropy_batch_mean", np.nan),
        "anisotropy_batch_std": est.get("anisotropy_batch_std", np.nan),
        "participation_ratio": sp.participation_ratio,
        "n90": sp.n90,
        "n99": sp.n99,
        "trace": sp.trace,
        "mean_cosine": float(mean_cosine(sum_u_sq, n_u)),
        "twonn_id": est.get("twonn_id", np.nan),
        "twonn_id_std": est.get("twonn_id_std", np.nan),
        "twonn_duplicates": int(est.get("twonn_duplicates", 0)),
        "twonn_batches": int(est.get("twonn_batches", 0)),
        "id_sample": int(len(sample)),
        "norm_mean": norm_mean,
        "norm_cv": norm_cv,
        **spectral_columns(sp.eigenvalues),
    }
    return row, sp.eigenvalues


def smallest_numpy(d2: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the k smallest entries of each row (any order)."""
    return np.argpartition(d2, k - 1, axis=1)[:, :k]


def gram_candidates(X32: np.ndarray, k: int, chunk: int = 1024, smallest=smallest_numpy) -> np.ndarray:
    """(m, k) indices of each row's k nearest other rows by float32 squared distance
    ‖a‖² + ‖b‖² − 2 a·b (the Gram trick), ``chunk`` rows at a time."""
    sq = np.einsum("ij,ij->i", X32, X32)
    m = X32.shape[0]
    out = np.empty((m, k), np.int64)
    for a in range(0, m, chunk):
        b = min(m, a + chunk)
        d2 = sq[a:b, None] + sq[None, :] - 2.0 * (X32[a:b] @ X32.T)
        d2[np.arange(b - a), np.arange(a, b)] = np.inf
        out[a:b] = smallest(d2, k)
    return out


def nearest_two(X: np.ndarray, chunk: int = 1024, search=None) -> tuple[np.ndarray, np.ndarray]:
    """Exact distances (r₁, r₂) of every row to its two nearest other rows. Candidates come from a
    float32 Gram-matrix search (top 4: ``search(X32, k)``, default ``gram_candidates``), then the
    candidates' distances are recomputed in float64, so duplicates give r₁ = 0 exactly (the Gram
    trick alone leaves rounding noise)."""
    X64 = np.asarray(X, dtype=np.float64)
    X32 = X64.astype(np.float32)
    m = X64.shape[0]
    k = min(4, m - 1)
    cand = search(X32, k) if search is not None else gram_candidates(X32, k, chunk)
    r1 = np.empty(m)
    r2 = np.empty(m)
    for a in range(0, m, chunk):
        b = min(m, a + chunk)
        diff = X64[cand[a:b]] - X64[a:b, None, :]
        dist = np.sqrt(np.einsum("ikd,ikd->ik", diff, diff))
        dist.sort(axis=1)
        r1[a:b], r2[a:b] = dist[:, 0], dist[:, 1]
    return r1, r2


def twonn_from_distances(r1: np.ndarray, r2: np.ndarray, discard: float = TWONN_DISCARD) -> tuple[float, int]:
    """(TwoNN dimension, number of duplicate points dropped) from nearest-neighbour distances."""
    r1 = np.asarray(r1, dtype=np.float64)
    r2 = np.asarray(r2, dtype=np.float64)
    ok = r1 > 0
    dup = int((~ok).sum())
    mu = r2[ok] / r1[ok]
    N = mu.size
    n_keep = int(N * (1 - discard))
    if n_keep < 2:
        return float("nan"), dup
    mu = np.sort(mu)[:n_keep]
    x = np.log(mu)
    y = -np.log(1.0 - np.arange(1, n_keep + 1) / N)
    return float(np.dot(x, y) / np.dot(x, x)), dup


def distinct_rows(X: np.ndarray) -> tuple[np.ndarray, int]:
    """(one copy of each distinct row of X, in their first order; how many identical copies were
    removed) — DADApy's ``remove_identical_points``. Rows compare by value (0.0 == −0.0)."""
    X = np.asarray(X)
    if X.shape[0] < 2:
        return X, 0
    _, first = np.unique(X, axis=0, return_index=True)
    first.sort()
    return X[first], int(X.shape[0] - first.size)


def twonn(X: np.ndarray, discard: float = TWONN_DISCARD, search=None) -> tuple[float, int]:
    """TwoNN intrinsic dimension of the distinct rows of X, and the number of identical copies
    removed before it (``distinct_rows``)."""
    X, dup = distinct_rows(X)
    if X.shape[0] < 3:
        return float("nan"), dup
    d, _ = twonn_from_distances(*nearest_two(X, search=search), discard=discard)
    return d, dup


def twonn_batch_of(m: int, batch: int = BATCH_SIZE) -> np.ndarray:
    """The TwoNN batch of each row of a shuffled sample of m rows: consecutive batches of ``batch`` rows,
    the rest joining the last one (one batch below ``batch``): Razzhigaev et al.'s batches of at least 4,096."""
    return np.minimum(np.arange(m) // batch, max(1, m // batch) - 1)


def batched_estimates(X: np.ndarray, batch: int = BATCH_SIZE, search=None) -> dict:
    """Razzhigaev et al.'s protocol on a shuffled sample: split into batches of ``batch`` rows (the rest
    joins the last batch: ``twonn_batch_of``), per batch TwoNN and the anisotropy; mean ± std over batches."""
    tb = twonn_batch_of(X.shape[0], batch)
    parts = []
    for t in np.unique(tb):
        Xb = X[tb == t]
        if len(Xb) >= 3:
            parts.append((*twonn(Xb, search=search), batch_anisotropy(Xb)))
    return estimates_from(parts)


def estimates_from(parts: list) -> dict:
    """Mean ± std over batches of [(TwoNN, copies dropped, anisotropy), ...] (non-finite values left out)."""
    ids = [p[0] for p in parts]
    dups = sum(int(p[1]) for p in parts)
    ans = [p[2] for p in parts]

    def ms(v):
        v = np.asarray(v, dtype=np.float64)
        v = v[np.isfinite(v)]
        return (float(v.mean()), float(v.std())) if v.size else (float("nan"), float("nan"))

    (id_mean, id_std), (an_mean, an_std) = ms(ids), ms(ans)
    return {
        "twonn_id": id_mean,
        "twonn_id_std": id_std,
        "twonn_duplicates": dups,
        "twonn_batches": len(ids),
        "anisotropy_batch_mean": an_mean,
        "anisotropy_batch_std": an_std,
    }


def recorded_sample(g) -> tuple[int, int]:
    """(embeddings, batches) of a run's TwoNN sample as its ``layer_geometry`` rows record them (the largest
    over layers; (0, 0) without them; older run files without ``twonn_batches`` give their batches as 0)."""
    if g is None or not len(g) or "id_sample" not in g:
        return 0, 0
    nb = int(g["twonn_batches"].max()) if "twonn_batches" in g else 0
    return int(g["id_sample"].max()), nb


def sample_text(g) -> str:
    """'TwoNN on 16,384 embeddings per layer in 4 batches of at least 4,096' — the sample and the batch count
    read from the run, never from the option; each batch holds at least min(sample, ``TWONN_BATCH``) (the rest
    joins the last batch, ``twonn_batch_of``)."""
    k, nb = recorded_sample(g)
    if not k:
        return "no TwoNN sample"
    return f"TwoNN on {k:,} embeddings per layer" + (
        f" in {nb} batch{'es' if nb != 1 else ''} of at least {min(k, BATCH_SIZE):,}" if nb else ""
    )


def samples_differ(samples: dict) -> str | None:
    """{run: (embeddings, batches)} -> a sentence when runs with a TwoNN sample used different ones (TwoNN
    depends on the sample size: their intrinsic dimensions are then not comparable), else None."""
    have = {n: kb for n, kb in samples.items() if kb[0]}
    if len(set(have.values())) < 2:
        return None
    each = "; ".join(
        f"{n}: {k:,} embeddings" + (f" in {nb} batch{'es' if nb != 1 else ''}" if nb else "")
        for n, (k, nb) in have.items()
    )
    return (
        f"The runs' TwoNN samples differ ({each}): TwoNN depends on the sample size, so their intrinsic "
        f"dimensions differ by that as well as by the model (recompute with the same --id-sample)."
    )


def splitmix64(x: np.ndarray) -> np.ndarray:
    """A 64-bit mixing hash (SplitMix64's finaliser), vectorised; uint64 in, uint64 out."""
    z = np.asarray(x, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def sample_keys(seed: int, sentence_ids: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """A seeded random key per corpus position: the reservoir keeps the smallest keys, so the sample
    is uniform and the same whatever the batches, their order or the shards (merge = union)."""
    s = np.asarray(sentence_ids, dtype=np.uint64) << np.uint64(20)
    with np.errstate(over="ignore"):
        base = splitmix64(np.uint64(seed) * np.uint64(0x632BE59BD9B4E019) + np.uint64(1))  # type: ignore[arg-type]  # a numpy uint64 scalar, as an array
        return splitmix64(s ^ np.asarray(positions, dtype=np.uint64) ^ base)


__all__ = [
    "Spectrum",
    "spectrum",
    "SPECTRAL_COLUMNS",
    "spectral_columns",
    "mean_cosine",
    "batch_anisotropy",
    "nearest_two",
    "twonn_from_distances",
    "twonn",
    "distinct_rows",
    "batched_estimates",
    "estimates_from",
    "twonn_batch_of",
    "recorded_sample",
    "sample_text",
    "samples_differ",
    "sample_keys",
    "splitmix64",
    "BATCH_SIZE",
    "TWONN_DISCARD",
]
