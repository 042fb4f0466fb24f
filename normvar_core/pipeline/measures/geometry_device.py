"""The geometry's finalize where its state is (a GPU run): what ``GeometryMeasure.result`` computes on the host
from the sample, computed on the sample's device with torch, so the sample and the covariances never come to the
host — only the per-batch numbers do.

* ``knn_device.canonical_rows``: each batch's distinct rows, numbered in order of first appearance (the host's
  ``geometry.first_copies``);
* ``masked_search``: a decimated set of distinct rows' two nearest over every other row and over the rows of other
  sentences (``knn_device.searches``: the host search's exact rule, float64 distances), for
  ``stats.twonn_context.batch_context``'s ``masked``;
* ``batch_anisotropy``: σ₁² / Σσᵢ² of the centred batch (Razzhigaev et al.'s estimate, ``stats.layer_geometry``'s),
from the
  eigenvalues of X_cᵀ X_c in float64;
* ``eigenvalues``: a layer's covariance spectrum (float64 ``eigvalsh``, descending, clipped at 0);
* ``pair_cosines``: the cosines of the disjoint pairs (x₀, x₁), (x₂, x₃), … (``stats.layer_geometry.pair_cosines``).

Each equals the host's to float64 rounding (the same formulas, reduced in the device's order), not bit for bit:
``tests/test_geometry_device.py`` runs both on the CPU's torch and compares them.
"""

from __future__ import annotations

import numpy as np
import torch

from normvar_core.pipeline.measures.knn_device import searches
from normvar_core.pipeline.measures.twonn_stream import unit_roundoff


def masked_search(X: torch.Tensor, sentences: np.ndarray):
    """``masked(idx)`` -> (every, cross): the two nearest (float64, ascending; inf where none) of the distinct rows
    X[idx] among themselves, over all of them and over those of other sentences — on X's device."""
    u = unit_roundoff(X.device)

    def masked(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if idx.size == 0:
            return np.zeros((0, 2)), np.zeros((0, 2))
        dist, _ = searches(X[torch.as_tensor(idx, device=X.device)], 2, groups=np.asarray(sentences)[idx], u=u)
        return dist[0], dist[1]

    return masked


def batch_anisotropy(X: torch.Tensor) -> float:
    """σ₁² / Σσᵢ² of the centred rows X (float64), as ``stats.layer_geometry.batch_anisotropy``."""
    X = X.to(torch.float64)
    Xc = X - X.mean(0)
    lam = torch.linalg.eigvalsh(Xc.T @ Xc).clamp_min_(0.0)
    total = float(lam.sum())
    return float(lam[-1]) / total if total > 0 else float("nan")


def eigenvalues(cov: torch.Tensor) -> np.ndarray:
    """The eigenvalues of a symmetric PSD matrix, descending, tiny negative rounding clipped to 0 (float64)."""
    return torch.linalg.eigvalsh(cov.to(torch.float64)).flip(0).clamp_min_(0.0).cpu().numpy()


def pair_cosines(X: torch.Tensor) -> np.ndarray:
    """Cosines of the disjoint pairs (x₀, x₁), (x₂, x₃), … of the rows of X; pairs with a zero vector dropped."""
    m = X.shape[0] // 2
    a, b = X[0 : 2 * m : 2].to(torch.float64), X[1 : 2 * m : 2].to(torch.float64)
    na, nb = a.norm(dim=1), b.norm(dim=1)
    ok = (na > 0) & (nb > 0)
    return ((a[ok] * b[ok]).sum(1) / (na[ok] * nb[ok])).cpu().numpy()


__all__ = ["masked_search", "batch_anisotropy", "eigenvalues", "pair_cosines"]
