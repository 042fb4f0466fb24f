"""The Gaussian null's layer geometry (stats.null_geometry) against brute force: the covariance built
from sufficient statistics (exact between-type scatter + a rescaled Wishart) has the same eigenvalue
distribution as the covariance of the N simulated embeddings; Bartlett's Wishart has the closed-form
moments; the isotropic null's geometry shows seed 003's closed forms (norm spread 1/√(2d), pair cosines
N(0, 1/d), mean cosine 0, anisotropy near 1/d)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from normvar_core.stats.null import draw_type_moments, null_params
from normvar_core.stats.null_geometry import null_covariance, null_layer_geometry, wishart_identity
from normvar_core.stats.tokenstats import TokenStats


def _agree(a: np.ndarray, b: np.ndarray, reps: int) -> None:
    """Per column: means within 4.5 standard errors, standard deviations within 12 %."""
    se = np.sqrt(a.var(0) / reps + b.var(0) / reps)
    assert (np.abs(a.mean(0) - b.mean(0)) < 4.5 * se).all(), (a.mean(0), b.mean(0), se)
    np.testing.assert_allclose(a.std(0), b.std(0), rtol=0.12)


@pytest.mark.parametrize("dof", [3.0, 12.5])
def test_wishart_has_its_closed_form_moments(dof):
    """E W = dof·I; Var W_ii = 2 dof; Var W_ij = dof (i ≠ j) — both branches (dof ≤ d − 1: explicit Z)."""
    rng = np.random.default_rng(0)
    d, reps = 5, 6000
    W = np.array([wishart_identity(d, dof, rng) for _ in range(reps)])
    want = round(dof) if dof <= d - 1 else dof
    np.testing.assert_allclose(W.mean(0), want * np.eye(d), atol=4.5 * np.sqrt(2 * want / reps))
    assert W[:, 0, 0].var() == pytest.approx(2 * want, rel=0.1)
    assert W[:, 0, 1].var() == pytest.approx(want, rel=0.1)


@pytest.mark.parametrize("spread", ["equal", "matched"])
def test_null_covariance_equals_brute_force_in_distribution(spread):
    """Eigenvalues of Σ = (B + W)/N from the sufficient statistics against Σ of the simulated set."""
    rng = np.random.default_rng(1)
    d, reps = 6, 2500
    n = np.array([3, 5, 8, 13, 20])
    s2 = np.full(5, 0.7) if spread == "equal" else np.array([0.2, 0.5, 1.0, 2.0, 4.0])
    mu = rng.standard_normal((5, d))
    brute, suff = [], []
    for _ in range(reps):
        X = np.concatenate([mu[t] + np.sqrt(s2[t]) * rng.standard_normal((n[t], d)) for t in range(5)])
        brute.append(np.linalg.eigvalsh(np.cov(X.T, bias=True)))
        mean, S = draw_type_moments(mu, s2, n, rng)
        suff.append(np.linalg.eigvalsh(null_covariance(mean, S, n, s2, rng)))
    _agree(np.array(suff), np.array(brute), reps)


def test_isotropic_null_geometry_closed_forms():
    rng = np.random.default_rng(2)
    T, d = 400, 128
    n = np.round(10 ** rng.uniform(1, 3, T)).astype(np.int64)
    base = TokenStats.from_moments(np.arange(T), n, np.zeros((1, T, d)), np.full((1, T), 2.0 * d) * n)
    totals = pd.DataFrame({"layer": [0], "q": [2.0 * d], "m": [0.0], "v": [2.0 * d]})
    ((li, mu, s2),) = null_params("isotropic", base, totals)
    mean, S = draw_type_moments(mu, s2, n, rng)
    row, eig, cos = null_layer_geometry(mu, s2, mean, S, n, 8192, rng)
    N = n.sum()
    grand = n @ mean.astype(np.float64) / N
    between = float(n @ ((mean - grand) ** 2).sum(1))
    assert row["n"] == N and row["trace"] == pytest.approx((between + S.sum()) / N, rel=1e-9)  # V(X), eq. 6
    # Marchenko–Pastur: the top eigenvalue of an isotropic covariance over N points is s²(1 + √(d/N))²
    assert eig[0] == pytest.approx(2.0 * (1 + np.sqrt(d / N)) ** 2, rel=0.05)
    assert row["anisotropy"] == pytest.approx(1 / d, rel=0.1)
    assert row["norm_cv"] == pytest.approx(1 / np.sqrt(2 * d), rel=0.05)  # seed 003: concentration
    assert abs(row["mean_cosine"]) < 5 / (8192 * np.sqrt(d)) * np.sqrt(2) + 1e-3  # near-orthogonal
    assert len(cos) == 4096 and cos.std() == pytest.approx(1 / np.sqrt(d), rel=0.05)
    assert abs(cos.mean()) < 4 / np.sqrt(d * len(cos))
