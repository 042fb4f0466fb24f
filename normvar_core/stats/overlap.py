"""The neighbourhood overlap between two layers (Valeriani et al., NeurIPS 2023, §2; DADApy's
``return_data_overlap``). numpy, and a numba pass for the shared neighbours.

For the same points at layers l and l′, with N_k^l(i) the k nearest neighbours of point i at layer l (within its
batch, ties by the smaller index: ``stats.knn.nearest_k``),

    χ_k(l, l′) = (1/N) Σ_i |N_k^l(i) ∩ N_k^l′(i)| / k.

Two layers whose neighbourhoods are drawn independently (the Gaussian null draws every layer's sample afresh)
share k/n of them on average, n the point's candidates (its batch's other points; with its own sentence masked,
the points of other sentences): E|A ∩ B| = k²/n for two independent uniform k-subsets of n. That is the
``chance`` column.
"""

from __future__ import annotations

import numpy as np

KS = (1, 2, 4, 8, 10, 16, 32, 64)  # the curve over k; k = 10 the default (Valeriani et al.)
K_DEFAULT = 10


def shared(a: np.ndarray, b: np.ndarray, ks=KS) -> np.ndarray:
    """(len(ks), m): for each k and row i, |a[i, :k] ∩ b[i, :k]| of two (m, ≥ max k) neighbour lists (−1: none,
    never shared). Row i's entry a[i, p] is found in b[i] at rank q (or not); it is shared at k when p, q < k."""
    from normvar_core.stats.knn_kernels import shared_from  # numba: not imported by the pages' readers

    K = max(ks)
    a = np.ascontiguousarray(a[:, :K], np.int32)
    b = np.ascontiguousarray(b[:, :K], np.int32)
    late = np.empty(a.shape, np.int32)  # max(p, q), q the rank in b of a's p-th neighbour: shared from k > it
    shared_from(a, b, late)
    return np.stack([(late < k).sum(1) for k in ks])


def chance(candidates: np.ndarray, ks=KS) -> np.ndarray:
    """(len(ks),): the mean over rows of k / n_i, n_i a row's candidates (the independent-layers expectation)."""
    n = np.asarray(candidates, np.float64)
    n = n[n > 0]
    return np.array([float(np.mean(np.minimum(k, n) / n)) if n.size else float("nan") for k in ks])


__all__ = ["KS", "K_DEFAULT", "shared", "chance"]
