"""Where one occurrence of a token sits against its type's statistics in a run (the "your own
sentence" view, LIT-style).

For an occurrence x of type t at a layer, with the run's exact mean μ(X_t) and the type's sampled
uses x_1..x_m at that layer:

* distance  d(x) = ‖x − μ(X_t)‖ (the spread whose mean square is V(X_t) = E‖x − μ(X_t)‖², eq. 6);
* percentile p(x) = 100 · (#{i : d_i < d(x)} + ½ #{i : d_i = d(x)}) / m with d_i = ‖x_i − μ(X_t)‖, the
  mid-rank: the share of the type's sampled uses nearer the mean, ties counted half (0: closer than every
  sampled use; 100: farther than every one). Distances within ``TIE_RTOL`` of the vectors' scale are ties
  (float32 storage noise): where every use sits at the same point — [CLS] at layer 0, whose input embedding
  never depends on the context — the occurrence is at the 50th percentile, not the 100th;
* its point on the trade-off: (M(X_t), ‖x − μ(X_t)‖²). The type's own point (M(X_t), V(X_t)) is the
  average of its occurrences' points, since V(X_t) = E‖x − μ(X_t)‖² (Q = M + V, eqs. 1–6).

Pure numpy, float64.
"""

from __future__ import annotations

import numpy as np


def distances_to_mean(samples: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """‖x_i − μ‖ for each row x_i of ``samples`` (m, d)."""
    X = np.asarray(samples, dtype=np.float64).reshape(-1, np.asarray(mean).size)
    return np.linalg.norm(X - np.asarray(mean, dtype=np.float64).ravel(), axis=1)


TIE_RTOL = 1e-5


def distance_percentile(x: np.ndarray, mean: np.ndarray, samples: np.ndarray) -> tuple[float, float]:
    """(d(x), p(x)) as in the module docstring; p is NaN when the type has no sampled use."""
    mu = np.asarray(mean, dtype=np.float64).ravel()
    d = float(np.linalg.norm(np.asarray(x, dtype=np.float64).ravel() - mu))
    ref = distances_to_mean(samples, mean)
    if ref.size == 0:
        return d, float("nan")
    tol = TIE_RTOL * (float(np.linalg.norm(mu)) + d)
    below = np.count_nonzero(ref < d - tol)
    ties = np.count_nonzero(np.abs(ref - d) <= tol)
    return d, float(100.0 * (below + 0.5 * ties) / ref.size)


__all__ = ["distances_to_mean", "distance_percentile", "TIE_RTOL"]
