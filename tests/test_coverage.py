"""Every claim's nominal 95 % interval covers the truth at least 90 % of the time, on synthetic runs whose truth is
known (at least 200 replicates per claim, vectorised where the rule allows it): the split-half intervals (Student's
t on one degree of freedom; the normal 1.96 is shown to fall short), seed 004's batch intervals (t_{B−1}), the layer
linearity's cross-fitted and in-sample scores and the claim's bracket between them, and the bootstrap over types.
The claims themselves are run on tables built from the synthetic data, so a rule that reads its interval wrongly
fails here too."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from normvar_core.stats import layer_linearity as LL
from normvar_core.stats.bootstrap import Z95, bootstrap_tradeoff, split_half_interval

REPS = 400
MIN_COVER = 0.90


def covered(intervals, truth) -> float:
    lo, hi = np.asarray(intervals, float).T
    return float(np.mean((lo <= truth) & (truth <= hi)))


# ---------------------------------------------------------------------------------------------- split halves
def test_split_half_intervals_cover_a_share_of_sums_and_the_claim_reads_them():
    """position0_share's statistic — position 0's share of Q(X) — over sentences whose energies vary from sentence to
    sentence (a shared log-normal scale), the halves a random split of the sentences; the truth is
    E[Q₀] / E[Q] = k₀ / (k₀ + k_r). The same interval serves anisotropy_profile, isoscore_low and the depth trends."""
    from normvar_core.stats.claims_geometry import position0_share

    rng = np.random.default_rng(0)
    S, k0, kr = 120, 3.0, 2.0
    truth = k0 / (k0 + kr)
    scale = rng.lognormal(0.0, 0.8, (REPS, S))
    q0, qr = scale * rng.gamma(k0, 1.0, (REPS, S)), scale * rng.gamma(kr, 1.0, (REPS, S))
    half = rng.random((REPS, S)) < 0.5

    def share(m):
        return (q0 * m).sum(1) / ((q0 + qr) * m).sum(1)

    full, a, b = share(np.ones_like(half)), share(half), share(~half)
    assert covered(np.stack(split_half_interval(full, a, b), 1), truth) >= MIN_COVER
    assert covered(np.stack(split_half_interval(full, a, b, z=Z95), 1), truth) < 0.85  # the normal quantile: short
    ivs = []
    for r in range(REPS):  # the claim on each replicate's tables
        rv = SimpleNamespace(
            exclude_position0=False,
            run=None,  # no run file: the claim's facts with and without position 0 are not read
            geometry=None,
            is_decoder=False,
            outliers=pd.DataFrame({"layer": [3], "max_over_median": [500.0], "q_share_pos0": [full[r]]}),
            halves=pd.DataFrame({"half": ["a", "b"], "layer": [3, 3], "q_share_pos0": [a[r], b[r]]}),
        )
        f = position0_share(rv)
        assert f.value == pytest.approx(full[r])
        ivs.append(f.interval)
    assert covered(ivs, truth) >= MIN_COVER


# ---------------------------------------------------------------------------------------------- TwoNN batches
def _batches(rng, truth: np.ndarray, B: int, spread: float) -> np.ndarray:
    """(REPS, B, L) per-batch estimates: the truth times a skewed factor of mean 1, shared in part by a batch's
    layers (one batch's sample is one draw of embeddings for every layer)."""
    shared = rng.gamma(1 / spread**2, spread**2, (REPS, B, 1))
    own = rng.gamma(1 / spread**2, spread**2, (REPS, B, truth.size))
    return truth * (0.5 * shared + 0.5 * own)


def test_id_profile_interval_covers_the_peak_dimension():
    from normvar_core.stats.claims_geometry import id_profile_of

    rng = np.random.default_rng(1)
    truth, B = np.array([5.0, 9.0, 12.0, 10.0, 6.0]), 4
    est = _batches(rng, truth, B, 0.15)
    ivs, hit = [], []
    for r in range(REPS):
        g = pd.DataFrame(
            {
                "layer": range(truth.size),
                "twonn_id": est[r].mean(0),
                "twonn_id_std": est[r].std(0),
                "twonn_batches": B,
            }
        )
        f = id_profile_of(g)
        ivs.append(f.interval)
        hit.append(truth[f.layer])  # the truth at the layer the rule reports
    lo, hi = np.asarray(ivs).T
    assert np.mean((lo <= hit) & (np.asarray(hit) <= hi)) >= MIN_COVER


def test_overlap_profile_interval_covers_the_change_after_the_peak():
    from normvar_core.stats.claims_neighbourhoods import overlap_profile

    rng = np.random.default_rng(2)
    chi, B, p = np.array([0.5, 0.35, 0.4, 0.55, 0.6, 0.62]), 5, 1
    truth = chi[p + 1 : -1].mean() - chi[p]
    est = np.minimum(_batches(rng, chi, B, 0.12), 1.0)
    ids = [4.0, 12.0, 9.0, 8.0, 7.0, 6.0]  # the TwoNN peak at layer 1, a clear interior one
    geo = pd.DataFrame({"layer": range(6), "twonn_id": ids, "twonn_id_std": 0.5, "twonn_batches": B})
    ivs = []
    for r in range(REPS):
        o = pd.DataFrame({"layer": range(6), "overlap_next": est[r].mean(0), "overlap_next_std": est[r].std(0)})
        o.loc[5, "overlap_next"] = np.nan  # the last layer has no next one
        tabs = {"layer_overlap": o}
        run = SimpleNamespace(table_names=list(tabs), table=tabs.__getitem__)
        f = overlap_profile(SimpleNamespace(run=run, geometry=geo))
        assert f.layer == p
        ivs.append(f.interval)
    assert covered(ivs, truth) >= MIN_COVER


# ---------------------------------------------------------------------------------------------- layer linearity
def _moments(X, Y):
    mx, my = X.mean(0), Y.mean(0)
    Xc, Yc = X - mx, Y - my
    return len(X), mx, my, Xc.T @ Xc, Yc.T @ Yc, Xc.T @ Yc


def _pair(rng, d: int):
    """A pair of layers Y = X Bᵀ + E (X ~ N(0, diag(sd²)), E ~ N(0, σ²I)) and its population score
    ρ² = tr(B Σ Bᵀ) / (tr(B Σ Bᵀ) + d σ²)."""
    Bm = rng.standard_normal((d, d)) * 0.4
    sd, sigma = np.linspace(0.5, 1.5, d), 0.6
    signal = float(np.trace(Bm @ np.diag(sd**2) @ Bm.T))
    return Bm, sd, sigma, signal / (signal + d * sigma**2)


def _draw(rng, pair, n: int, reps: int):
    Bm, sd, sigma, _ = pair
    X = rng.standard_normal((reps, n, sd.size)) * sd
    return X, X @ Bm.T + sigma * rng.standard_normal(X.shape), rng.random((reps, n)) < 0.5


def _linearity_replicates(rng, pair, n: int, reps: int) -> pd.DataFrame:
    """The table's row per replicate, by the library's functions from each replicate's halves' moments."""
    X, Y, H = _draw(rng, pair, n, reps)
    rows = []
    for x, y, h in zip(X, Y, H):
        w, a, b = _moments(x, y), _moments(x[h], y[h]), _moments(x[~h], y[~h])
        vals = [LL.pair_values(m[3], m[4], m[5]) for m in (w, a, b)]
        xfit = LL.pair_cross_fitted(a, b, True)
        rows.append(LL.table_columns([1], [2], [n], [vals[0]], [vals[1]], [vals[2]], [xfit], [x.shape[1]]))
    return pd.DataFrame({k: np.concatenate([r[k] for r in rows]) for k in rows[0]})


def _expected_scores(rng, pair, n: int, reps: int) -> tuple[float, float]:
    """The two scores' expectations at this n by a vectorised brute force over ``reps`` replicates (batched least
    squares on the rows themselves: the in-sample R², and the out-of-sample R² of each half's fit on the other)."""
    X, Y, H = _draw(rng, pair, n, reps)

    def fit(w):  # the map and intercept fitted on the rows with weight 1
        k = w.sum(1)[:, None, None]
        mx, my = (w[..., None] * X).sum(1, keepdims=True) / k, (w[..., None] * Y).sum(1, keepdims=True) / k
        Xc = (X - mx) * w[..., None]
        A = np.linalg.solve(Xc.transpose(0, 2, 1) @ Xc, Xc.transpose(0, 2, 1) @ (Y - my))
        return A, mx, my

    def sums(w, A, mx, my):  # (RSS, TSS about the rows' own mean) on the rows with weight 1
        k = w.sum(1)[:, None, None]
        r = (Y - my - (X - mx) @ A) * w[..., None]
        yc = (Y - (w[..., None] * Y).sum(1, keepdims=True) / k) * w[..., None]
        return (r**2).sum((1, 2)), (yc**2).sum((1, 2))

    one = np.ones(H.shape)
    rss, tss = sums(one, *fit(one))
    a, b = H.astype(float), (~H).astype(float)
    rab, tb = sums(b, *fit(a))
    rba, ta = sums(a, *fit(b))
    return float(np.mean(1 - rss / tss)), float(np.mean(1 - (rab + rba) / (ta + tb)))


@pytest.mark.parametrize("n, d", [pytest.param(400, 6, marks=pytest.mark.slow), (90, 6)], ids=["n/d=67", "n/d=15"])
def test_the_linearity_scores_intervals_and_the_claims_cover(n, d):
    """The in-sample and the cross-fitted score's intervals cover their expectation at this sample size (the mean
    of 2,000 further replicates by a batched brute force), and the claim's interval — from the cross-fitted low
    end to the in-sample high end — covers the population score ρ², which the in-sample score overstates and the
    cross-fitted one understates (both checked)."""
    from normvar_core.stats.claims import RunView

    rng = np.random.default_rng([3, n])
    pair = _pair(rng, d)
    rho2 = pair[-1]
    t = _linearity_replicates(rng, pair, n, REPS)
    e_in, e_x = _expected_scores(rng, pair, n, 2000)
    assert e_x < rho2 < e_in  # the bias the bracket rests on
    assert covered(t[["linearity_low", "linearity_high"]].to_numpy(), e_in) >= MIN_COVER
    assert covered(t[["linearity_xfit_low", "linearity_xfit_high"]].to_numpy(), e_x) >= MIN_COVER
    ivs = []
    for r in range(REPS):
        row = t.iloc[[r]]
        run = SimpleNamespace(table_names=(LL.TABLE,), table=lambda name, row=row: row)
        rv = RunView(
            "x",
            [0, 1, 2, 3, 4],
            5,
            True,
            "",
            False,
            False,
            *(np.zeros(0),) * 5,
            pd.DataFrame(),
            None,
            None,
            None,
            run=run,
        )
        f = LL.layers_linear(rv)
        assert f.value == pytest.approx(row["linearity_xfit"].iloc[0])
        ivs.append(f.interval)
    assert covered(ivs, rho2) >= MIN_COVER


# ---------------------------------------------------------------------------------------------- bootstrap over types
def test_the_bootstrap_over_types_covers_the_cv_of_q():
    """cv_min_intermediate's and null_vs_run's C.V. of Q(X_t) over the band's types (the slope's and R²'s coverage:
    tests/test_bootstrap.py): Q(X_t) ~ Gamma(k, θ) over 300 types, C.V. = 1 / √k; 200 replicates of 1,000
    resamples each."""
    rng = np.random.default_rng(4)
    k, T, reps = 4.0, 300, 200
    q = rng.gamma(k, 2.0, (reps, T))
    m = 0.5 * q
    ivs = []
    for r in range(reps):
        lo, hi = bootstrap_tradeoff(q[r : r + 1], m[r : r + 1], q[r : r + 1] - m[r : r + 1], seed=r)["cv_q"]
        ivs.append([lo[0], hi[0]])
    assert covered(ivs, 1 / np.sqrt(k)) >= MIN_COVER
