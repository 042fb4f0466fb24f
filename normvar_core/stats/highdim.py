"""The Gaussian-geometry comment's high-dimensional checks, per layer, from a run's tables (the same for a model's run
and
for its Gaussian nulls, so they can be read side by side):

* the spread of the norm, std(‖x‖) / E‖x‖ — for x ~ N(μ, s²I) in R^d with ‖μ‖ ≪ s√d it is ≈ 1/√(2d)
  (‖x‖² = s² χ²_d has mean s²d and std s²√(2d); the square root halves the relative width);
* what a random offset does: for x = c + s z, a common offset c raises the mean cosine between two
  embeddings to ≈ ‖c‖² / (‖c‖² + s²d) = M(X)/Q(X) — so a mean cosine equal to M(X)/Q(X) is what one
  shared direction explains, anything above it is structure beyond it;
* the ratio M(X_t)/V(X_t): for n_t Gaussian draws around the origin E M = s²d/n_t and
  E V = s²d (n_t − 1)/n_t, so n_t · M/V ≈ n_t/(n_t − 1) ≈ 1; the study's real embeddings sit orders of
  magnitude above (a large norm of the mean, the "unexpected" part of the Gaussian-geometry comment).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from normvar_core.stats.tokenstats import TokenStats


def norm_spread_reference(dim: int) -> float:
    """1/√(2d): the relative width of ‖x‖ for an isotropic Gaussian in R^d."""
    return float(1.0 / np.sqrt(2.0 * dim))


def mv_ratio(stats: TokenStats, n_min: float, n_max: float) -> pd.DataFrame:
    """Per layer the median over the types in the band of n_t · M(X_t)/V(X_t) (≈ 1 for Gaussians)."""
    keep = stats.band(n_min, n_max)
    rows = []
    for li, layer in enumerate(stats.layer_index):
        m, v, n = stats.m[li, keep], stats.v[li, keep], stats.n[keep].astype(np.float64)
        ok = v > 0
        r = n[ok] * m[ok] / v[ok]
        rows.append(
            {"layer": int(layer), "n_m_over_v": float(np.median(r)) if r.size else np.nan, "types": int(ok.sum())}
        )
    return pd.DataFrame(rows)


def highdim_table(
    layer_stats: pd.DataFrame, layer_geometry: pd.DataFrame | None, stats: TokenStats, n_min: float, n_max: float
) -> pd.DataFrame:
    """One row per layer: M(X)/Q(X), median n_t·M/V over the band, and from the geometry (when the run
    has it) the mean cosine and the norm spread (NaN where a run predates them)."""
    out = layer_stats[["layer", "q", "m"]].assign(m_over_q=lambda d: d["m"] / d["q"])[["layer", "m_over_q"]]
    out = out.merge(mv_ratio(stats, n_min, n_max), on="layer", how="left")
    cols = ["mean_cosine", "norm_cv", "norm_mean"]
    if layer_geometry is not None and len(layer_geometry):
        g = layer_geometry.reindex(columns=["layer"] + cols)
        out = out.merge(g, on="layer", how="left")
    else:
        out = out.assign(**{c: np.nan for c in cols})
    return out.sort_values("layer").reset_index(drop=True)


__all__ = ["norm_spread_reference", "mv_ratio", "highdim_table"]
