"""The study's analyses checked against independent numpy / scikit-learn computations."""

from __future__ import annotations

import math

import brute
import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from normvar_core import TokenMoments
from normvar_core.stats import analyses as A


@pytest.fixture(scope="module")
def zipf_stats():
    """3 layers, 400 types with Zipf counts; per-type means with a trade-off built in."""
    rng = np.random.default_rng(0)
    T, d, L = 400, 8, 3
    counts = np.clip(rng.zipf(1.4, T), 1, 3000)
    ids = np.repeat(np.arange(T) * 2 + 1, counts)
    rng.shuffle(ids)
    centers = rng.normal(size=(L, T, d)) * rng.uniform(0.2, 3, size=(1, T, 1))
    X = centers[:, (ids - 1) // 2] + rng.normal(size=(L, ids.size, d))
    measure = TokenMoments(L, d)
    for chunk in np.array_split(np.arange(ids.size), 7):
        measure.update(X[:, chunk], ids[chunk])
    # "w7" and "##w7" share the key "w7" (the study's fn. 7); short ones fail App. A's 3 characters
    tokens = [("##" if i % 2 else "") + "w" + str(i // 2) for i in range(T)]
    return measure.result(), X, ids, tokens


def test_tradeoff_against_sklearn(zipf_stats):
    stats, *_ = zipf_stats
    df = A.tradeoff(stats, 10, 1e5)
    mask = (stats.n >= 10) & (stats.n <= 1e5)
    for l in range(stats.num_layers):
        m, v, q = stats.m[l, mask], stats.v[l, mask], stats.q[l, mask]
        reg = LinearRegression().fit(m[:, None], v)
        row = df.iloc[l]
        assert row.n_types == mask.sum()
        assert row.slope == pytest.approx(reg.coef_[0], rel=1e-9)
        assert row.intercept == pytest.approx(reg.intercept_, rel=1e-9, abs=1e-9)
        assert row.r2 == pytest.approx(reg.score(m[:, None], v), rel=1e-9)
        assert row.cv_q == pytest.approx(np.std(q) / np.mean(q), rel=1e-12)


def test_frequency_regressions_against_sklearn(zipf_stats):
    stats, *_ = zipf_stats
    df = A.frequency_regressions(stats, 2, 1000)
    mask = (stats.n >= 2) & (stats.n <= 1000)
    x = np.log10(stats.n[mask])[:, None]
    for l in range(stats.num_layers):
        for name, arr in (("Q", stats.q), ("M", stats.m), ("V", stats.v)):
            y = np.log10(1 + arr[l, mask])
            reg = LinearRegression().fit(x, y)
            row = df[(df.layer == l) & (df.quantity == name)].iloc[0]
            assert row.slope == pytest.approx(reg.coef_[0], rel=1e-9)
            assert row.r2 == pytest.approx(reg.score(x, y), rel=1e-9)


def test_decomposition_against_brute_force(zipf_stats):
    stats, X, ids, _ = zipf_stats
    df = A.decomposition(stats, 3, 500)
    counts = dict(zip(*np.unique(ids, return_counts=True)))
    keep = np.array([3 <= counts[t] <= 500 for t in ids])
    ref = brute.corpus(X[:, keep], ids[keep])
    for col in ("q", "m", "v", "v_w", "v_b"):
        np.testing.assert_allclose(df[col], ref[col], rtol=1e-9)
    np.testing.assert_allclose(df.m_over_q + df.v_w_over_q + df.v_b_over_q, 1.0, rtol=1e-10)
    np.testing.assert_allclose(df.v_w_over_v, ref["v_w"] / ref["v"], rtol=1e-9)
    np.testing.assert_allclose(df.v_w_over_v + df.v_b_over_v, 1.0, rtol=1e-12)


def test_histograms_match_numpy(zipf_stats):
    stats, *_ = zipf_stats
    h = A.histograms(stats, layer=1, bins=20)
    for name, arr in (("Q", stats.q[1]), ("M", stats.m[1]), ("V", stats.v[1])):
        cnt, edges = np.histogram(arr, bins=20)
        part = h[h.quantity == name]
        assert part["count"].tolist() == cnt.tolist()
        np.testing.assert_allclose(part["left"], edges[:-1])
    hl = A.histograms(stats, layer=2, bins=10, log10=True, n_min=5)
    assert hl[hl.quantity == "V"]["count"].sum() == (stats.n >= 5).sum()


def test_select_tokens_follows_appendix_a(zipf_stats):
    stats, _, _, tokens = zipf_stats
    chosen = A.select_tokens(stats, tokens, n_min=2, n_max=1e5, seed=0)
    again = A.select_tokens(stats, tokens, n_min=2, n_max=1e5, seed=0)
    assert np.array_equal(chosen, again)
    other = A.select_tokens(stats, tokens, n_min=2, n_max=1e5, seed=1)
    assert not np.array_equal(chosen, other)
    # independent recomputation of the bins and the N_r rule
    tok = dict(zip(stats.token_ids.tolist(), tokens))
    n = dict(zip(stats.token_ids.tolist(), stats.n.tolist()))
    cand = [t for t in stats.token_ids.tolist() if 2 <= n[t] <= 1e5 and len(A.strip_prefix(tok[t])) >= 3]
    logs = np.log10([n[t] for t in cand])
    edges = np.linspace(logs.min(), logs.max(), 11)
    bin_of = {t: min(int(np.searchsorted(edges, lg, side="right")) - 1, 9) for t, lg in zip(cand, logs)}
    sizes = np.bincount(list(bin_of.values()), minlength=10)
    expected_total = sum(min(2 + math.floor(math.sqrt(4 * s / sizes.max())), s) for s in sizes if s)
    assert len(chosen) == expected_total == len(set(chosen.tolist()))
    per_bin = np.bincount([bin_of[t] for t in chosen.tolist()], minlength=10)
    for b in range(10):
        if sizes[b]:
            assert per_bin[b] == min(2 + math.floor(math.sqrt(4 * sizes[b] / sizes.max())), sizes[b])
    assert all(len(A.strip_prefix(tok[t])) >= 3 for t in chosen.tolist())


def test_strip_prefix():
    assert [A.strip_prefix(t) for t in ["##ing", "Ġthe", "▁once", "ing", "#"]] == ["ing", "the", "once", "ing", "#"]


def test_merge_by_key_is_exact_pooling(zipf_stats):
    stats, X, ids, tokens = zipf_stats
    tok = dict(zip(stats.token_ids.tolist(), tokens))
    keys = [A.strip_prefix(tok[t]) for t in stats.token_ids.tolist()]
    merged, names = A.merge_by_key(stats, keys)
    assert len(names) == len(set(keys)) < len(keys)
    key_of_id = {t: A.strip_prefix(tok[t]) for t in stats.token_ids.tolist()}
    key_idx = np.array([names.index(key_of_id[t]) for t in ids])
    ref = brute.per_type(X, key_idx)
    for k in range(len(names)):
        n, mu, q, m, v = ref[k]
        assert merged.n[k] == n
        np.testing.assert_allclose(merged.q[:, k], q, rtol=1e-10)
        np.testing.assert_allclose(merged.v[:, k], v, rtol=1e-10)
        np.testing.assert_allclose(merged.m[:, k], m, rtol=1e-10)
    # corpus-level values do not depend on the keying
    np.testing.assert_allclose(merged.corpus()["q"], stats.corpus()["q"], rtol=1e-12)


def test_token_table(zipf_stats):
    stats, _, _, tokens = zipf_stats
    tt = A.token_table(stats, 2, tokens)
    assert len(tt) == stats.num_types and tt.token.tolist() == tokens
    np.testing.assert_allclose(tt.q, tt.m + tt.v, rtol=1e-12)
    np.testing.assert_allclose(tt.log10_n, np.log10(stats.n))
