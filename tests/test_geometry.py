"""Layer geometry (seed 004) against independent ground truth.

Real MiniLM hidden states of 150 novel sentences, every state kept in float64 in the test: the
streamed spectrum, anisotropy, participation ratio and trace equal numpy's eigendecomposition of the
full centred matrix; the mean cosine equals the mean over all pairs; self-similarities equal the
pairwise means; the outlier statistics equal numpy. TwoNN: points of known dimension embedded in
384–768 d, and equality with scikit-dimension on the same batch."""

from __future__ import annotations

import numpy as np
import pytest

from normvar_core.stats import layer_geometry as G


@pytest.fixture(scope="module")
def minilm_pass(minilm_pass_150):
    """(plan, measures, states X, token ids, positions) of the session's MiniLM pass (tests/conftest.py)."""
    return tuple(minilm_pass_150[k] for k in ("plan", "measures", "X", "ids", "pos"))


def test_spectrum_anisotropy_and_trace_equal_numpy(minilm_pass):
    plan, measures, X, _, _ = minilm_pass
    res = measures["geometry"].result()
    stats = measures["moments"].result()
    v_all = stats.corpus()["v"].to_numpy()
    for li, row in enumerate(res["rows"]):
        x = X[li]
        xc = x - x.mean(0)
        lam = np.clip(np.linalg.eigvalsh(xc.T @ xc / x.shape[0])[::-1], 0, None)
        np.testing.assert_allclose(res["spectra"][li], lam, rtol=1e-9, atol=1e-9 * lam[0])
        np.testing.assert_allclose(row["anisotropy"], lam[0] / lam.sum(), rtol=1e-9)
        np.testing.assert_allclose(row["participation_ratio"], lam.sum() ** 2 / (lam**2).sum(), rtol=1e-9)
        np.testing.assert_allclose(row["trace"], v_all[li], rtol=1e-10)
        cum = np.cumsum(lam) / lam.sum()
        assert row["n90"] == int(np.argmax(cum >= 0.9)) + 1 and row["n99"] == int(np.argmax(cum >= 0.99)) + 1


def test_mean_cosine_equals_the_mean_over_all_pairs(minilm_pass):
    _, measures, X, _, _ = minilm_pass
    res = measures["geometry"].result()
    for li in (0, 3, 6):
        u = X[li] / np.linalg.norm(X[li], axis=1, keepdims=True)
        n = u.shape[0]
        total = 0.0
        for a in range(0, n, 2048):  # all pairs, chunked: sum of cos over i != j
            c = u[a : a + 2048] @ u.T
            total += c.sum() - np.trace(c[:, a : a + 2048])
        np.testing.assert_allclose(res["rows"][li]["mean_cosine"], total / (n * (n - 1)), rtol=1e-9)


def test_norm_spread_and_pair_cosines_equal_numpy(minilm_pass):
    """Seed 003's checks: std(‖x‖)/E‖x‖ over every embedding, and the cosines of disjoint pairs of the
    (random-order) TwoNN sample."""
    _, measures, X, _, _ = minilm_pass
    measure = measures["geometry"]
    res = measure.result()
    for li, row in enumerate(res["rows"]):
        norms = np.linalg.norm(X[li], axis=1)
        np.testing.assert_allclose(row["norm_mean"], norms.mean(), rtol=1e-9)
        np.testing.assert_allclose(row["norm_cv"], norms.std() / norms.mean(), rtol=1e-6)
        S = measure.sample[li].numpy().astype(np.float64)
        a, b = S[0::2][: len(S) // 2], S[1::2][: len(S) // 2]
        want = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        np.testing.assert_allclose(res["cosines"][li], want, rtol=1e-9)
        assert len(want) == 300


def test_self_similarity_equals_pairwise_mean(minilm_pass):
    plan, measures, X, ids, _ = minilm_pass
    res = measures["selfsim"].result()
    tokens = plan.token_ids
    for t in tokens[np.argsort(-plan.counts)][[0, 5, 40]]:
        row = int(np.searchsorted(tokens, t))
        for li in (1, 4):
            u = X[li][ids == t]
            u = u / np.linalg.norm(u, axis=1, keepdims=True)
            c = u @ u.T
            n = u.shape[0]
            want = (c.sum() - np.trace(c)) / (n * (n - 1))
            np.testing.assert_allclose(res["self_similarity"][li, row], want, rtol=1e-9)


def test_outlier_statistics_equal_numpy(minilm_pass):
    _, measures, X, ids, pos = minilm_pass
    res = measures["outliers"].result()
    np.testing.assert_allclose(res["mean"], X.mean(1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res["var"], X.var(1), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(res["max_abs"], np.abs(X).max(1), rtol=0)
    sq = (X**2).sum(-1)
    np.testing.assert_allclose(res["layer"]["q_share_pos0"], sq[:, pos == 0].sum(1) / sq.sum(1), rtol=1e-9)
    e2 = (X**2).mean(1)
    np.testing.assert_allclose(res["layer"]["q_share_top1dim"], e2.max(1) / e2.sum(1), rtol=1e-8)
    top = res["top"]
    for li in (0, 6):
        # brute force over every entry: the largest |h| of each (token, position, dim) key, the TOP_K keys
        import pandas as pd

        A = np.abs(X[li])
        R, D = A.shape
        df = pd.DataFrame(
            {"t": np.repeat(ids, D), "p": np.repeat(pos, D), "d": np.tile(np.arange(D), R), "v": A.reshape(-1)}
        )
        g = df.groupby(["t", "p", "d"])["v"].max().sort_values(ascending=False).head(top.shape[1])
        want = [(tuple(int(x) for x in k), float(v)) for k, v in g.items()]
        np.testing.assert_allclose(np.abs(top[li, :, 0]), [v for _, v in want], rtol=1e-6)
        keys = {(int(t[2]), int(t[4]), int(t[1])) for t in top[li]}
        assert len(keys) == top.shape[1]  # distinct rows, no repeats
        assert (int(top[li, 0, 2]), int(top[li, 0, 4]), int(top[li, 0, 1])) == want[0][0]


def test_twonn_sample_is_the_smallest_keys_of_all_positions(minilm_pass):
    """The TwoNN sample: the id_sample positions with the smallest seeded keys, with their states."""
    plan, measures, X, _, pos = minilm_pass
    geo = measures["geometry"]
    sent = np.concatenate([np.asarray(b.indices)[np.nonzero(b.attention_mask.numpy())[0]] for b in plan.batches])
    keys = G.sample_keys(plan.cfg.seed, sent, pos)
    planned = plan.uniform.token_ids.view(np.uint64)
    assert np.array_equal(planned, np.sort(keys)[:600])
    where = {k: i for i, k in enumerate(keys)}
    idx = np.array([where[k] for k in planned])
    assert geo.filled.all()
    np.testing.assert_array_equal(geo.sample[2].numpy(), X[2][idx].astype(np.float32))


# ----------------------------------------------------------------------------- TwoNN
def _embed(Z: np.ndarray, D: int, rng) -> np.ndarray:
    Q, _ = np.linalg.qr(rng.standard_normal((D, Z.shape[1])))
    return Z @ Q.T


@pytest.mark.parametrize("case,truth,D", [("linear5", 5, 384), ("gauss10", 10, 768), ("swissroll", 2, 384)])
def test_twonn_recovers_known_dimensions(case, truth, D):
    rng = np.random.default_rng(0)
    m = 4096
    if case == "linear5":
        Z = rng.uniform(-1, 1, (m, 5))
    elif case == "gauss10":
        Z = rng.standard_normal((m, 10))
    else:
        t = 1.5 * np.pi * (1 + 2 * rng.random(m))
        Z = np.stack([t * np.cos(t), 21 * rng.random(m), t * np.sin(t)], 1)
    d, dup = G.twonn(_embed(Z, D, rng))
    assert dup == 0
    assert abs(d - truth) / truth < 0.10, (case, d)


def test_twonn_equals_scikit_dimension_and_keeps_one_copy_of_duplicates():
    import skdim

    rng = np.random.default_rng(1)
    X = _embed(rng.standard_normal((1500, 7)), 384, rng)
    ours, _ = G.twonn(X)
    ref = skdim.id.TwoNN().fit(X).dimension_
    np.testing.assert_allclose(ours, ref, rtol=1e-9)
    # 40 rows twice and 10 rows four times (fp16 states, repeated contexts), shuffled in: the estimate
    # is scikit-dimension's on the distinct rows (DADApy's remove_identical_points), 40 + 30 copies counted
    Xd = np.concatenate([X, X[:40], X[100:110], X[100:110], X[100:110]])[rng.permutation(1570)]
    d, dup = G.twonn(Xd)
    assert dup == 70
    uniq = np.unique(Xd, axis=0)
    assert uniq.shape[0] == 1500
    np.testing.assert_allclose(d, skdim.id.TwoNN().fit(uniq).dimension_, rtol=1e-9)
    # the old rule (drop r1 = 0, copies still serve as neighbours) gives another number: the test can fail
    r1, r2 = G.nearest_two(Xd)
    assert abs(G.twonn_from_distances(r1[r1 > 0], r2[r1 > 0])[0] - d) > 1e-3


def test_twonn_on_minilm_layer0_runs_on_distinct_states(minilm_pass):
    """MiniLM's layer 0 (context-free input states: many repeats) — the run's TwoNN equals
    scikit-dimension's on the distinct states of each batch of its sample, and the copies are counted."""
    import skdim

    plan, measures, X, _, _ = minilm_pass
    geo = measures["geometry"]
    row = next(r for r in geo.result()["rows"] if r["layer"] == 0)
    sample = geo.sample[0].numpy().astype(np.float64)  # 600 rows: one TwoNN batch
    uniq = np.unique(sample, axis=0)
    assert row["twonn_duplicates"] == sample.shape[0] - uniq.shape[0] > 50
    np.testing.assert_allclose(row["twonn_id"], skdim.id.TwoNN().fit(uniq).dimension_, rtol=1e-9)


def test_sample_keys_do_not_depend_on_batching():
    s = np.arange(1000) // 10
    p = np.arange(1000) % 10
    k = G.sample_keys(3, s, p)
    assert np.array_equal(k[500:], G.sample_keys(3, s[500:], p[500:]))
    assert len(np.unique(k)) == 1000 and not np.array_equal(k, G.sample_keys(4, s, p))
