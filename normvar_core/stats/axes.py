"""Principal axes of a covariance, with a deterministic sign.

For a symmetric d × d matrix C (the exact covariance of a layer, or of the occurrences' projections), the
top-k axes are the eigenvectors v_1..v_k of its k largest eigenvalues λ_1 ≥ … ≥ λ_k (C v_i = λ_i v_i).
An eigenvector's sign is arbitrary; ``sign_fixed`` makes each column's largest-magnitude component positive,
so the same covariance always gives the same axes (the Occurrences page's fixed axes, the clouds' PCA).

Pure numpy/scipy, float64.
"""

from __future__ import annotations

import numpy as np


def sign_fixed(vectors: np.ndarray) -> np.ndarray:
    """Columns of ``vectors`` with their largest-magnitude component made positive (a deterministic sign).

    >>> sign_fixed(np.array([[1.0, -3.0], [-2.0, 1.0]])).tolist()
    [[-1.0, 3.0], [2.0, -1.0]]
    """
    idx = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[idx, np.arange(vectors.shape[1])])
    return vectors * np.where(signs == 0, 1.0, signs)


def top_axes(cov: np.ndarray, k: int) -> np.ndarray:
    """The top-``k`` eigenvectors (d, k) of a symmetric matrix, largest eigenvalue first, signs fixed
    (``sign_fixed``); k is capped at d.

    >>> top_axes(np.diag([1.0, 3.0, 2.0]), 2).tolist()
    [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]
    """
    from scipy.linalg import eigh  # here: ``normvar plan`` imports this module and never calls it

    d = cov.shape[0]
    k = min(k, d)
    _, vec = eigh(np.asarray(cov, np.float64), subset_by_index=[d - k, d - 1])
    return sign_fixed(vec[:, ::-1])


__all__ = ["sign_fixed", "top_axes"]
