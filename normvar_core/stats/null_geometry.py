"""The layer geometry of a Gaussian null (the Gaussian-geometry comment next to Razzhigaev et al.'s measures), without
drawing its
N embeddings.

Covariance. The scatter of a layer's whole embedding set splits into between- and within-type parts,
C = B + W (the matrix form of eq. 6, V(X) = V_B(X) + V_W(X)):

* B = Σ_t n_t (μ̂_t − μ̂)(μ̂_t − μ̂)ᵀ from the null's drawn type means μ̂_t — exact;
* W = Σ_t Σ_{x ∈ X_t} (x − μ̂_t)(x − μ̂_t)ᵀ. For type t drawn from N(μ_t, s_t² I), its part is
  s_t² · Wishart(I, n_t − 1), independent of μ̂_t. When every s_t is the same (``isotropic``,
  ``offset``) the sum is exactly s² · Wishart(I, N − T); its trace is s² χ²(d(N − T)) and, the
  Gaussian vector of all entries being isotropic, W / tr W is independent of tr W. So W is drawn
  as a Wishart (Bartlett's decomposition, O(d³)) rescaled to the trace Σ_t S_t that the moments
  already drew — exact in distribution and consistent with V(X_t). For ``matched`` (s_t differs)
  the Wishart's degrees of freedom are Satterthwaite's ν = (Σ a_t)² / Σ a_t² / (n_t − 1),
  a_t = s_t² (n_t − 1): exact mean and entry variances, an approximation beyond them (its spectrum
  spreads by O(√(d/ν)), under 1 % at the study's scale).

The measures that need raw vectors (TwoNN, Razzhigaev et al.'s batch anisotropy, the mean cosine, the norm
spread and the random-pair cosines) use a sample of K embeddings: types drawn with probability
n_t / N, x = μ_t + s_t z.
"""

from __future__ import annotations

import numpy as np

from normvar_core.stats import layer_geometry as G

_TYPE_CHUNK = 4096


def between_scatter(mean: np.ndarray, n: np.ndarray) -> np.ndarray:
    """B = Σ_t n_t (μ̂_t − μ̂)(μ̂_t − μ̂)ᵀ in float64, accumulated over chunks of types."""
    n = np.asarray(n, np.float64)
    grand = (n @ np.asarray(mean, np.float64)) / n.sum()
    d = mean.shape[1]
    B = np.zeros((d, d))
    for a in range(0, len(n), _TYPE_CHUNK):
        Y = (np.asarray(mean[a : a + _TYPE_CHUNK], np.float64) - grand) * np.sqrt(n[a : a + _TYPE_CHUNK])[:, None]
        B += Y.T @ Y
    return B


def wishart_identity(d: int, dof: float, rng: np.random.Generator) -> np.ndarray:
    """A draw of Wishart(I_d, dof): Bartlett's A Aᵀ (A lower triangular, A_ii² ~ χ²(dof − i),
    A_ij ~ N(0, 1) below) when dof > d − 1; Σ z zᵀ over round(dof) standard normals otherwise."""
    if dof <= d - 1:
        Z = rng.standard_normal((max(int(round(dof)), 0), d))
        return Z.T @ Z
    A = np.tril(rng.standard_normal((d, d)), -1)
    A[np.diag_indices(d)] = np.sqrt(rng.chisquare(dof - np.arange(d)))
    return A @ A.T


def null_covariance(
    mean: np.ndarray, S: np.ndarray, n: np.ndarray, s2: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Σ = (B + W) / N of a null layer from its drawn type means, sums of squares S_t and the model's s_t²."""
    n = np.asarray(n, np.float64)
    d = mean.shape[1]
    B = between_scatter(mean, n)
    trace_w = float(np.sum(S))
    k = n - 1
    a = np.asarray(s2, np.float64) * k
    keep = (k > 0) & (a > 0)
    if trace_w > 0 and keep.any():
        dof = a[keep].sum() ** 2 / np.sum(a[keep] ** 2 / k[keep])
        W = wishart_identity(d, dof, rng)
        W *= trace_w / np.trace(W)
        B += W
    return B / n.sum()


def null_sample(mu: np.ndarray, s2: np.ndarray, n: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` embeddings of the null (float32, random order): type t with probability n_t / N,
    then x = μ_t + s_t z."""
    n = np.asarray(n, np.float64)
    t = rng.choice(len(n), size=size, p=n / n.sum())
    X = rng.standard_normal((size, mu.shape[1]), dtype=np.float32)
    X *= np.sqrt(np.asarray(s2, np.float64)[t]).astype(np.float32)[:, None]
    X += np.asarray(mu[t], np.float32)
    return X


def null_layer_geometry(
    mu: np.ndarray,
    s2: np.ndarray,
    mean: np.ndarray,
    S: np.ndarray,
    n: np.ndarray,
    sample_size: int,
    rng: np.random.Generator,
    search=None,
):
    """(``layer_geometry`` row without the layer, eigenvalues, pair cosines) of one null layer; its context
    columns say that no two of its points share a sentence."""
    cov = null_covariance(mean, S, n, s2, rng)
    X = null_sample(mu, s2, n, sample_size, rng)
    X64 = X.astype(np.float64)
    norms = np.linalg.norm(X64, axis=1)
    u = X64[norms > 0] / norms[norms > 0, None]
    su = u.sum(0)
    row, eig = G.layer_row(
        cov,
        X,
        n=len(X),
        sum_u_sq=float(su @ su),
        n_u=len(u),
        norm_sum=float(norms.sum()),
        sq_sum=float(norms @ norms),
        search=search,
    )
    row["n"] = int(np.sum(n))
    # a null's points are independent draws, each its own context: no neighbour shares a sentence, and the
    # cross-context TwoNN is the seed's (``stats.twonn_context`` with every point in its own group)
    row.update(same_sentence_nn=0.0, twonn_id_cross=row["twonn_id"], twonn_id_cross_std=row["twonn_id_std"])
    return row, eig, G.pair_cosines(X)


__all__ = ["between_scatter", "wishart_identity", "null_covariance", "null_sample", "null_layer_geometry"]
