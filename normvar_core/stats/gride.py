"""GRIDE, the generalized ratios intrinsic dimension estimator (Denti, Doimo, Laio and Mira, Sci. Rep. 12, 20005,
2022), at the scales n1 = 1, 2, 4, …, 64 with n2 = 2·n1 (DADApy's ``compute_id_gride``). Pure numpy.

For a point i with distances r_{i,1} ≤ r_{i,2} ≤ … to its nearest neighbours, μ_i = r_{i,n2} / r_{i,n1}. Under a
locally constant density in dimension d, μ_i has the density (Denti et al. 2022, the distribution of μ_{i,n1,n2} that
GRIDE maximises)

    f(μ) = d (μ^d − 1)^(n2 − n1 − 1) / (μ^((n2 − 1) d + 1) B(n2 − n1, n1)),   μ > 1,

so the log-likelihood of N ratios is

    ℓ(d) = N log d + (n2 − n1 − 1) Σ log(μ_i^d − 1) − ((n2 − 1) d + 1) Σ log μ_i − N log B(n2 − n1, n1),

concave in d (ℓ'' = −N/d² − (n2 − n1 − 1) Σ (log μ_i)² μ_i^d / (μ_i^d − 1)² < 0). The estimate d̂ is its maximum,
the root of ℓ'(d) = N/d + (n2 − n1 − 1) Σ log μ_i / (1 − μ_i^(−d)) − (n2 − 1) Σ log μ_i (closed form N / Σ log μ_i
at n1 = 1, n2 = 2: TwoNN's maximum likelihood, without its discarded tail); its error is the curvature's,
σ = (−ℓ''(d̂))^(−1/2). Larger n1 reads the dimension at a coarser scale (the mean r_{n2} is recorded as it).
"""

from __future__ import annotations

import numpy as np

SCALES = (1, 2, 4, 8, 16, 32, 64)  # n1; n2 = 2·n1, so the search keeps 128 neighbours
NEIGHBOURS = 2 * SCALES[-1]
_LO, _HI = 1e-6, 1e4  # the bracket of d̂


def _dll(d: float, logmu: np.ndarray, n1: int, n2: int) -> tuple[float, float]:
    """(ℓ'(d), ℓ''(d)) for log μ (all > 0)."""
    N = logmu.size
    a = n2 - n1 - 1
    e = np.exp(-d * logmu)  # μ^(−d) in (0, 1)
    one = -np.expm1(-d * logmu)  # 1 − μ^(−d), without cancellation
    g = N / d + a * float(np.sum(logmu / one)) - (n2 - 1) * float(np.sum(logmu))
    h = -N / d**2 - a * float(np.sum(logmu**2 * e / one**2))
    return g, h


def gride_mle(mu: np.ndarray, n1: int, n2: int) -> tuple[float, float]:
    """(d̂, σ) of the ratios ``mu`` (those > 1 and finite; NaN, NaN below 2 of them): ℓ'(d) = 0 by Newton's steps
    kept inside a bisection bracket (ℓ' decreases), to a relative 1e-12."""
    mu = np.asarray(mu, np.float64)
    logmu = np.log(mu[np.isfinite(mu) & (mu > 1)])
    N = logmu.size
    if N < 2:
        return float("nan"), float("nan")
    if n2 - n1 == 1:
        d = N / float(np.sum(logmu))
        return d, d / np.sqrt(N)  # ℓ'' = −N/d²
    lo, hi = _LO, _HI
    d = N / float(np.sum(logmu)) / (n2 - 1)  # a start inside the bracket
    d = min(max(d, lo * 10), hi / 10)
    for _ in range(200):
        g, h = _dll(d, logmu, n1, n2)
        if g > 0:
            lo = d
        else:
            hi = d
        step = d - g / h
        nxt = step if lo < step < hi else 0.5 * (lo + hi)
        if abs(nxt - d) <= 1e-12 * d:
            d = nxt
            break
        d = nxt
    h = _dll(d, logmu, n1, n2)[1]
    return float(d), float(1.0 / np.sqrt(-h))


def batch_curve(r: np.ndarray, scales=SCALES) -> list[tuple[int, float, float, float, int]]:
    """[(n1, d̂, σ, mean r_{n2}, points), …] of one batch from its rows' sorted neighbour distances r (m, ≥ 2·n1):
    row i's μ = r[i, 2·n1 − 1] / r[i, n1 − 1], over the rows where both are finite and r_{n1} > 0."""
    out = []
    for n1 in scales:
        n2 = 2 * n1
        if r.shape[1] < n2:
            break
        a, b = r[:, n1 - 1], r[:, n2 - 1]
        ok = np.isfinite(b) & (a > 0)
        d, s = gride_mle(b[ok] / a[ok], n1, n2)
        out.append((n1, d, s, float(b[ok].mean()) if ok.any() else float("nan"), int(ok.sum())))
    return out


def layer_rows(curves: list[list[tuple]], masked: bool) -> list[dict]:
    """A layer's rows of ``layer_gride`` from its batches' ``batch_curve``s: per n1 the mean over batches of d̂
    (``gride_id``), the likelihood's error of that mean √(Σσ_b²) / B (``gride_id_err``), the spread of the
    batches' estimates (``gride_id_std``, as ``twonn_id_std``), the scale (mean r_{n2}) and the points."""
    rows = []
    for n1 in sorted({c[0] for curve in curves for c in curve}):
        got = [c for curve in curves for c in curve if c[0] == n1 and np.isfinite(c[1])]
        if not got:
            continue
        d = np.array([c[1] for c in got])
        s = np.array([c[2] for c in got])
        rows.append(
            {
                "n1": int(n1),
                "n2": int(2 * n1),
                "masked": bool(masked),
                "gride_id": float(d.mean()),
                "gride_id_err": float(np.sqrt(np.sum(s**2)) / d.size),
                "gride_id_std": float(d.std()),
                "scale": float(np.mean([c[3] for c in got])),
                "points": int(sum(c[4] for c in got)),
                "batches": int(d.size),
            }
        )
    return rows


def sample_rows(X: np.ndarray, tb: np.ndarray) -> list[dict]:
    """``layer_rows`` of a sample X (K, d) split into TwoNN batches ``tb``, every point its own context (a Gaussian
    null's independent draws): the masked rows equal the unmasked ones. Copies are dropped per batch, as TwoNN."""
    from normvar_core.stats.knn import nearest_k

    curves = []
    for t in np.unique(tb):
        Xb = np.asarray(X[tb == t], np.float32) + np.float32(0.0)
        _, first = np.unique(Xb, axis=0, return_index=True)
        (r, _), _ = nearest_k(Xb[np.sort(first)], NEIGHBOURS)
        curves.append(batch_curve(r))
    return layer_rows(curves, masked=False) + layer_rows(curves, masked=True)


__all__ = ["SCALES", "NEIGHBOURS", "gride_mle", "batch_curve", "layer_rows", "sample_rows"]
