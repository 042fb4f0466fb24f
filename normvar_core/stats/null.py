"""Gaussian null models of a run (the Gaussian-geometry comment): what plain high-dimensional Gaussians would give for
the
same token types, counts n_t, layers and dimension d.

Kinds, per layer l (Q(X), M(X), V(X) and μ(X_t), V(X_t) of the real run):

* ``isotropic``: every embedding ~ N(0, s²I), s² = Q(X)/d — the same overall radius;
* ``offset``: N(c, s²I), c one random direction with ‖c‖² = M(X), s² = V(X)/d — the same Q(X), M(X);
* ``matched``: type t ~ N(μ(X_t), V(X_t)/d · I) — each type keeps its real mean and variance, but its
  spread is isotropic noise.

Sufficient statistics make a null cost O(L·T·d) instead of O(L·N·d): for n draws of N(μ, s²I) in
R^d the sample mean is exactly N(μ, s²/n · I) and the sum of squared deviations
S = Σ‖x − x̄‖² is exactly s² · χ²(d(n − 1)), independent of the mean. So per type
μ̂_t = μ_t + (s/√n_t) z,  S_t = s² χ²_{d(n_t−1)},  M = ‖μ̂_t‖², V = S_t/n_t, Q = M + V (eqs. 1, 3–6).
"""

from __future__ import annotations

import numpy as np

from normvar_core.constants import NULL_KINDS
from normvar_core.stats.tokenstats import TokenStats


def draw_type_moments(mu: np.ndarray, s2: np.ndarray | float, n: np.ndarray, rng: np.random.Generator):
    """(mean (T, d), S (T,)) of n_t draws of N(mu_t, s2_t I) per type, from the sufficient statistics;
    the mean in float32 when ``mu`` is float32 (a run stores its means in float32), else float64."""
    T, d = np.shape(mu)
    n = np.asarray(n, dtype=np.float64)
    s2 = np.broadcast_to(np.asarray(s2, dtype=np.float64), (T,))
    dtype = np.float32 if np.asarray(mu).dtype == np.float32 else np.float64
    mean = rng.standard_normal((T, d), dtype=dtype)
    mean *= np.sqrt(s2 / n).astype(dtype)[:, None]
    mean += np.asarray(mu, dtype=dtype)
    dof = d * (n - 1)
    S = np.where(dof > 0, s2 * rng.chisquare(np.maximum(dof, 1)), 0.0)
    return mean, S


def null_params(kind: str, stats: TokenStats, layer_totals, *, seed: int = 0):
    """Per layer (li, mu (T, d) float32 — a broadcast view for the shared-mean kinds —, s2 (T,)): the
    null model's mean and variance per dimension of every type. The offset's direction is seeded per
    layer, so the moments and the geometry sample of a null see the same model."""
    if kind not in NULL_KINDS:
        raise ValueError(f"unknown null kind {kind!r}; use one of {NULL_KINDS}")
    T, d = stats.num_types, stats.dim
    tot = layer_totals.set_index("layer")
    for li, layer in enumerate(stats.layer_index):
        row = tot.loc[int(layer)]
        if kind == "isotropic":
            mu, s2 = np.zeros((1, d), np.float32), np.full(T, float(row["q"]) / d)
        elif kind == "offset":
            c = np.random.default_rng([seed, NULL_KINDS.index(kind), 1, int(layer)]).standard_normal(d)
            c *= np.sqrt(float(row["m"])) / np.linalg.norm(c)
            mu, s2 = c.astype(np.float32)[None, :], np.full(T, float(row["v"]) / d)
        else:
            mu, s2 = stats.mean[li].astype(np.float32, copy=False), stats.v[li] / d
        yield li, np.broadcast_to(mu, (T, d)), s2


def null_stats(kind: str, stats: TokenStats, layer_totals, *, seed: int = 0) -> TokenStats:
    """A TokenStats of the same token ids, counts and layers as ``stats`` drawn from the Gaussian null
    ``kind``. ``layer_totals``: DataFrame with q, m, v per layer (the run's layer_stats, all types).
    The within-type sums of squares S_t are kept as ``v · n`` (V = S_t / n_t)."""
    rng = np.random.default_rng([seed, NULL_KINDS.index(kind) if kind in NULL_KINDS else 0])
    L, T, d = stats.num_layers, stats.num_types, stats.dim
    mean = np.empty((L, T, d), dtype=np.float32)
    m = np.empty((L, T))
    v = np.empty((L, T))
    for li, mu, s2 in null_params(kind, stats, layer_totals, seed=seed):
        mt, S = draw_type_moments(mu, s2, stats.n, rng)
        m[li] = np.einsum("td,td->t", mt, mt, dtype=np.float64)
        v[li] = S / stats.n
        mean[li] = mt
    return TokenStats(
        token_ids=stats.token_ids.copy(),
        n=stats.n.copy(),
        mean=mean,
        q=m + v,
        m=m,
        v=v,
        layer_index=stats.layer_index.copy(),
    )


__all__ = ["draw_type_moments", "null_params", "null_stats"]
