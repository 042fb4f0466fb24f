"""Uncertainty of the layer-level figures, pure numpy.

* **Bootstrap over token types** (the trade-off's C.V. of Q(X_t), slope and R², Yamagiwa & Shimodaira 2024 Fig. 2, 4):
  the types in the band are the sampling units; a resample draws T rows of the per-type table
  (q, m, v) with replacement. Vectorised: a resample is a vector of counts w (T,) drawn once for all
  layers, so every statistic is a weighted sum — W (B, T) @ [x, y, x², xy, y²] per layer — and
  1,000 resamples cost a few matrix products. Percentile intervals (the 2.5 % and 97.5 % quantiles
  of the B replicates), seeded (``numpy.random.default_rng(seed)``).

  With weights w_i (Σw = T):  x̄ = Σw x / T, Sxx = Σw x² − T x̄², Sxy = Σw xy − T x̄ ȳ,
  slope = Sxy / Sxx, R² = Sxy² / (Sxx Syy), C.V.(Q) = sqrt(Σw q² / T − q̄²) / q̄ (population std, fn. 8).

* **Split-half intervals** for the corpus-level quantities and the geometry: the corpus is split in two
  halves A, B by a hash of the sentence id; θ_A and θ_B are independent estimates from half the data,
  so Var(θ_A − θ_B) = 2 Var_half ≈ 4 Var(θ) and SE(θ) ≈ |θ_A − θ_B| / 2. The interval is
  θ ± t |θ_A − θ_B| / 2 with t = ``T1_95`` = 12.706, Student's 97.5 % quantile on one degree of freedom: one
  difference is one degree of freedom, and (θ − E θ) / (|θ_A − θ_B| / 2) is then Student's t₁ for normal halves,
  so this interval covers E θ 95 % of the time (the normal quantile 1.96 would cover 2/π · atan(1.96) ≈ 70 %).
  Wide, honestly: one split is little information about the spread. The coverage test checks the
  coverage on synthetic runs with a known truth.

* **Intervals over B batches** (seed 004's TwoNN, the neighbourhood overlap): the batches are independent draws,
  so mean ± t_{B−1} s / √B with s the sample standard deviation (ddof 1; the tables store the population one,
  s = std · √(B / (B − 1)), ``batch_interval``).
"""

from __future__ import annotations

import numpy as np

RESAMPLES = 1000
LEVEL = 0.95
Z95 = 1.959963984540054
T1_95 = 12.706204736174696
"""Student's t 97.5 % quantile on one degree of freedom (tan(0.475 π)): the split-half intervals' multiplier."""
DEGENERATE = 1e-12  # a spread below this share of the sum of squares is rounding: the resample is degenerate
_CHUNK_CELLS = 4_000_000  # resamples x types per chunk: bounds W's memory (32 MB of float64)


def resample_counts(T: int, B: int, rng: np.random.Generator) -> np.ndarray:
    """(B, T) float64 counts: row b says how often each of the T rows is drawn in resample b."""
    idx = rng.integers(0, T, size=(B, T))
    flat = (idx + (np.arange(B)[:, None] * T)).ravel()
    return np.bincount(flat, minlength=B * T).reshape(B, T).astype(np.float64)


def _weighted_tradeoff(W: np.ndarray, q: np.ndarray, m: np.ndarray, v: np.ndarray) -> dict:
    """C.V. of q, OLS slope of v on m and R², per resample (rows of W) and layer (rows of q, m, v)."""
    T = W.shape[1]
    out = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        sq, sq2 = W @ q.T, W @ (q * q).T  # (B, L)
        qbar = sq / T
        out["cv_q"] = np.sqrt(np.maximum(sq2 / T - qbar * qbar, 0.0)) / qbar
        sx, sy, sxx2, syy2 = W @ m.T, W @ v.T, W @ (m * m).T, W @ (v * v).T
        sxx, syy = sxx2 - sx * sx / T, syy2 - sy * sy / T
        sxy = W @ (m * v).T - sx * sy / T
        # a resample that drew (nearly) one value of m (or of v) again and again has no line through it: its
        # slope and R² are undefined (NaN, left out of the quantiles), not the ratio of two rounding errors
        flat_m, flat_v = sxx <= DEGENERATE * sxx2, syy <= DEGENERATE * syy2
        out["slope"] = np.where(flat_m, np.nan, sxy / sxx)
        out["r2"] = np.where(flat_m | flat_v, np.nan, sxy * sxy / (sxx * syy))
    return out


def bootstrap_tradeoff(
    q: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
    center: bool = True,
) -> dict:
    """Percentile intervals of C.V.(Q), slope and R² per layer from ``resamples`` bootstrap
    resamples of the T types (columns of q, m, v: arrays (L, T)). Returns
    {stat: (low (L,), high (L,))} plus ``"replicates"``: {stat: (B, L)}. ``center`` shifts each
    layer's q, m, v by their means first (the statistics are shift-invariant; centring keeps the
    weighted sums of squares free of cancellation)."""
    q, m, v = (np.atleast_2d(np.asarray(a, dtype=np.float64)) for a in (q, m, v))
    L, T = q.shape
    if T < 3:
        nan = np.full(L, np.nan)
        return {k: (nan, nan.copy()) for k in ("cv_q", "slope", "r2")} | {"replicates": {}}
    if center:  # the C.V. needs the raw scale of q: keep its mean as the offset of the centred copy
        mm, vm = m.mean(1, keepdims=True), v.mean(1, keepdims=True)
        m, v = m - mm, v - vm
    rng = np.random.default_rng(seed)
    chunk = max(1, min(resamples, _CHUNK_CELLS // T))
    reps: dict[str, list] = {"cv_q": [], "slope": [], "r2": []}
    for a in range(0, resamples, chunk):
        W = resample_counts(T, min(chunk, resamples - a), rng)
        for k, val in _weighted_tradeoff(W, q, m, v).items():
            reps[k].append(val)
    alpha = (1.0 - level) / 2.0
    out: dict = {"replicates": {}}
    for k, parts in reps.items():
        R = np.concatenate(parts, axis=0)
        out["replicates"][k] = R
        # a layer where the statistic is undefined in every resample (layer 0 of a run whose types each have one
        # input embedding: V(X_t) = 0, no R²) has no interval: NaN, without asking numpy for an all-NaN quantile
        lo, hi = np.full(L, np.nan), np.full(L, np.nan)
        some = ~np.isnan(R).all(axis=0)
        if some.any():
            lo[some], hi[some] = np.nanquantile(R[:, some], [alpha, 1.0 - alpha], axis=0)
        out[k] = (lo, hi)
    return out


def t_quantile(df: float, level: float = LEVEL) -> float:
    """Student's t quantile (1 + level) / 2 on ``df`` degrees of freedom (``scipy.stats.t``)."""
    from scipy.stats import t

    return float(t.ppf((1.0 + level) / 2.0, df))


def batch_interval(mean: float, std: float, batches: int, *, level: float = LEVEL) -> tuple[float, float] | None:
    """mean ± t_{B−1} s / √B over B ≥ 2 independent batches, s = ``std`` · √(B / (B − 1)) from the population
    standard deviation ``std`` the tables store: (low, high), or None with fewer than 2 batches or no spread."""
    B = int(batches)
    if B < 2 or not np.isfinite(std) or not std > 0 or not np.isfinite(mean):
        return None
    half = t_quantile(B - 1, level) * float(std) / np.sqrt(B - 1)
    return float(mean) - half, float(mean) + half


def split_half_interval(full, half_a, half_b, z: float = T1_95, bounds: tuple[float, float] = (-np.inf, np.inf)):
    """θ ± t₁ |θ_A − θ_B| / 2 (elementwise; module docstring): (low, high), each end clipped to ``bounds``, the
    range the quantity can take (a share or IsoScore: [0, 1]): the normal approximation knows no range, so near
    a bound the symmetric interval would reach values the quantity never has (an IsoScore below 0)."""
    full, half_a, half_b = (np.asarray(x, dtype=np.float64) for x in (full, half_a, half_b))
    half_width = z * np.abs(half_a - half_b) / 2.0
    return np.clip(full - half_width, *bounds), np.clip(full + half_width, *bounds)


__all__ = [
    "RESAMPLES",
    "LEVEL",
    "Z95",
    "T1_95",
    "t_quantile",
    "batch_interval",
    "resample_counts",
    "bootstrap_tradeoff",
    "split_half_interval",
]
