"""App. I — measured against predicted: where a hidden state is a normalization's output the run
records ‖γ‖² + ‖β‖² (``norm_params``, see ``pipeline/norm_params.py``); App. I predicts
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
    keep = (stats.n >= n_min) & (stats.n <= n_max)
    rows = []
    pred = norm_params.set_index("layer")
    for li, layer in enumerate(stats.layer_index):
        q = stats.q[li, keep]
        p = pred.loc[int(layer)] if int(layer) in pred.index else None
        q_pred = float(p["q_pred"]) if p is not None and p["module"] else np.nan
        mean = float(q.mean()) if q.size else np.nan
        rows.append({"layer": int(layer), "module": p["module"] if p is not None else "",
                     "q_pred": q_pred, "q_types_mean": mean,
                     "cv_q": float(q.std() / mean) if q.size and mean else np.nan,
                     "measured_over_predicted": mean / q_pred if np.isfinite(q_pred) and q_pred > 0 else np.nan})
    return pd.DataFrame(rows)


__all__ = ["layernorm_table"]
