"""App. I — measured against predicted: where a hidden state is a normalization's output the run
records ‖γ‖² + ‖β‖² (``norm_params``, see ``pipeline/models/norm_params.py``); App. I predicts
Q(X_t) ≈ ‖γ‖² + ‖β‖² for every type, with C.V. O(n₀^{-1/2}).

The prediction is exact when γ is uniform (‖z‖² = d for LayerNorm's z); with a non-uniform γ,
Q(X_t) = Σ γ_i² E z_i² + 2 Σ γ_i β_i E z_i + ‖β‖² weights γ by where z puts its energy, so the ratio
measured / predicted tells how far the model's z departs from spreading evenly over the coordinates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from normvar_core.stats.tokenstats import TokenStats


def layernorm_table(norm_params: pd.DataFrame, stats: TokenStats, n_min: float, n_max: float) -> pd.DataFrame:
    """Per stored layer: the norm module (''  where the state is not a norm output), the predicted Q,
    the mean and C.V. of Q(X_t) over the types in the band, and measured / predicted."""
    keep = stats.band(n_min, n_max)
    rows = []
    pred = norm_params.set_index("layer")
    for li, layer in enumerate(stats.layer_index):
        q = stats.q[li, keep]
        p = pred.loc[int(layer)] if int(layer) in pred.index else None
        q_pred = float(p["q_pred"]) if p is not None and p["module"] else np.nan
        mean = float(q.mean()) if q.size else np.nan
        rows.append(
            {
                "layer": int(layer),
                "module": p["module"] if p is not None else "",
                "q_pred": q_pred,
                "q_types_mean": mean,
                "cv_q": float(q.std() / mean) if q.size and mean else np.nan,
                "measured_over_predicted": mean / q_pred if np.isfinite(q_pred) and q_pred > 0 else np.nan,
            }
        )
    return pd.DataFrame(rows)


TOP_DIMS = 5


def layernorm_attribution(
    norm_affine: pd.DataFrame, dim_stats: pd.DataFrame, norm_params: pd.DataFrame, top: int = TOP_DIMS
) -> pd.DataFrame:
    """Where App. I's prediction fails, exactly, per norm-output layer, over all embeddings of the layer.

    With y = γ ⊙ z + β and the layer's per-coordinate mean m_i and variance v_i (``dim_stats``),
    E (y_i − β_i)² = v_i + (m_i − β_i)² = γ_i² E z_i², and

        Q(X) = Σ_i γ_i² E z_i²  +  2 Σ_i β_i (m_i − β_i)  +  ‖β‖²          (App. I, before averaging)

    identically. App. I's ‖γ‖² + ‖β‖² (``q_pred``, from ``norm_params``) takes E z_i² = 1 in every
    coordinate (LayerNorm only fixes Σ_i z_i² = d). Columns: ``q_all`` (= Σ v_i + m_i², Q(X)),
    ``q_pred``, ``q_over_pred``, ``gamma_term``, ``cross_term``,
    ``beta_sq``; ``gamma_weighting`` = Σ γ_i² E z_i² / ‖γ‖² (1 when z spreads its energy evenly or γ
    is uniform); ``z_energy`` = Σ E z_i² / d (1 for a norm output: checks the recorded γ, β);
    ``top_z_share`` = share of Σ E z_i² in the ``top`` coordinates with the largest E z_i², and
    ``top_gamma_sq_ratio`` = their mean γ_i² over the mean γ_i² of all coordinates (< 1: the norm
    shrinks the coordinates z loads, and Q falls below the prediction)."""
    rows = []
    stats = dim_stats.set_index(["layer", "dim"])
    for layer, aff in norm_affine.groupby("layer", sort=True):
        aff = aff.sort_values("dim")
        try:
            ds = stats.loc[int(layer)].reindex(aff["dim"].to_numpy())
        except KeyError:
            continue
        g, b = aff["gamma"].to_numpy(np.float64), aff["beta"].to_numpy(np.float64)
        m, v = ds["mean"].to_numpy(np.float64), ds["var"].to_numpy(np.float64)
        if not (np.isfinite(m).all() and np.isfinite(v).all()):
            continue
        dev2 = v + (m - b) ** 2  # γ_i² E z_i²
        g2 = g * g
        ez2 = np.divide(dev2, g2, out=np.full_like(dev2, np.nan), where=g2 > 0)
        order = np.argsort(np.nan_to_num(ez2, nan=-1.0))[::-1][:top]
        rows.append(
            {
                "layer": int(layer),
                "q_all": float((v + m * m).sum()),
                "gamma_term": float(dev2.sum()),
                "cross_term": float(2 * (b * (m - b)).sum()),
                "beta_sq": float(b @ b),
                "gamma_weighting": float(dev2.sum() / g2.sum()) if g2.sum() > 0 else np.nan,
                "z_energy": float(np.nansum(ez2) / ez2.size),
                "top_z_share": float(np.nansum(ez2[order]) / np.nansum(ez2)),
                "top_gamma_sq_ratio": float(g2[order].mean() / g2.mean()) if g2.mean() > 0 else np.nan,
            }
        )
    cols = [
        "layer",
        "q_all",
        "gamma_term",
        "cross_term",
        "beta_sq",
        "gamma_weighting",
        "z_energy",
        "top_z_share",
        "top_gamma_sq_ratio",
    ]
    out = pd.DataFrame(rows, columns=cols).merge(norm_params[["layer", "q_pred"]], on="layer", how="left")
    out.insert(2, "q_pred", out.pop("q_pred"))
    out.insert(3, "q_over_pred", out["q_all"] / out["q_pred"])
    return out


__all__ = ["layernorm_table", "layernorm_attribution", "TOP_DIMS"]
