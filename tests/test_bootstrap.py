"""The bootstrap over types and the split-half measure, against independent ground truth:
np.polyfit on explicitly resampled rows; nominal coverage of a known slope over many seeded
synthetic data sets; the halves merged equal the main moments (and the geometry's covariance)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normvar_core.stats.bootstrap import bootstrap_tradeoff, resample_counts, split_half_interval


def test_weighted_replicates_equal_explicit_resamples():
    rng = np.random.default_rng(5)
    T, B = 60, 40
    m = rng.gamma(2.0, 10.0, (2, T))
    v = 50.0 - m + rng.normal(0, 2.0, (2, T))
    q = m + v
    out = bootstrap_tradeoff(q, m, v, resamples=B, seed=11)
    idx = np.random.default_rng(11).integers(0, T, size=(B, T))  # the same draws, as row indices
    for b in range(B):
        for l in range(2):
            x, y, z = m[l, idx[b]], v[l, idx[b]], q[l, idx[b]]
            slope = np.polyfit(x, y, 1)[0]
            r2 = np.corrcoef(x, y)[0, 1] ** 2
            np.testing.assert_allclose(out["replicates"]["slope"][b, l], slope, rtol=1e-9)
            np.testing.assert_allclose(out["replicates"]["r2"][b, l], r2, rtol=1e-9)
            np.testing.assert_allclose(out["replicates"]["cv_q"][b, l], z.std() / z.mean(), rtol=1e-9)
    lo, hi = out["slope"]
    np.testing.assert_allclose(lo, np.quantile(out["replicates"]["slope"], 0.025, axis=0))
    np.testing.assert_allclose(hi, np.quantile(out["replicates"]["slope"], 0.975, axis=0))
    W = resample_counts(T, 7, np.random.default_rng(0))
    assert W.shape == (7, T) and (W.sum(1) == T).all()


def test_percentile_intervals_cover_a_known_slope_at_the_nominal_rate():
    """800 seeded data sets y = 30 − x + ε (T = 150 types), 1,000 resamples each: the 95 % interval
    must cover −1 in 92–97.5 % of them (measured: 93.3 %; the percentile interval runs a little short at T = 150)
    (binomial s.e. ≈ 0.8 %). Vectorised: a block of 100 data
    sets is 100 "layers" of one call (one resample draw per block, 8 blocks, 8 seeds)."""
    blocks, per, T, true = 8, 100, 150, -1.0
    hits = 0
    for r in range(blocks):
        rng = np.random.default_rng([26, r])
        m = rng.gamma(2.0, 5.0, (per, T))
        v = 30.0 + true * m + rng.normal(0, 3.0, (per, T))
        lo, hi = bootstrap_tradeoff(m + v, m, v, seed=r)["slope"]
        hits += int(((lo <= true) & (true <= hi)).sum())
    coverage = hits / (blocks * per)
    assert 0.92 <= coverage <= 0.975, coverage


def test_split_half_interval_is_symmetric_and_scales_with_the_gap():
    lo, hi = split_half_interval(1.0, 0.9, 1.1)
    # Student's t on one degree of freedom: tan(0.475 π) = 12.706
    np.testing.assert_allclose([lo, hi], [1.0 - 12.706204736174696 * 0.1, 1.0 + 12.706204736174696 * 0.1])
    lo, hi = split_half_interval(2.0, 2.0, 2.0)
    assert lo == hi == 2.0


@pytest.fixture(scope="module")
def streamed():
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.measures import GeometryMeasure, HalvesMeasure, MomentsMeasure
    from normvar_core.pipeline.run_plan import synthetic_plan
    from normvar_core.pipeline.sources import GaussianSource

    layers = [0, 1, 3]
    cfg = RunConfig(model="gaussian", samples_per_token=0, id_sample=64)
    plan = synthetic_plan(cfg, n_sentences=400, vocab_size=40, layers=layers, batch_size=16)
    src = GaussianSource(dim=12, layers=layers, seed=9, offset=1e4, scales=[1.0, 5.0, 0.5], dtype=torch.float32)
    ctx = RunContext(cfg=cfg, layers=layers, dim=12, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    measures = [MomentsMeasure.for_run(ctx), HalvesMeasure.for_run(ctx), GeometryMeasure.for_run(ctx)]
    for sb in src.batches(plan, 0, plan.n_batches):
        for a in measures:
            a.update(sb)
    return measures


def test_halves_merged_equal_the_main_moments(streamed):
    moments, halves, geometry = streamed
    main = moments.result()
    merged = halves.merged_moments().result()
    a, b = halves.a.tm.result(), halves.b.tm.result()
    assert a.n.sum() > 0 and b.n.sum() > 0 and halves.a.n + halves.b.n == moments.n_embeddings
    np.testing.assert_array_equal(merged.token_ids, main.token_ids)
    np.testing.assert_array_equal(merged.n, main.n)
    for k in ("mean", "q", "m", "v"):  # |x| ~ 1e4: Q ~ 1e9, V ~ 10: relative to Q, 1e-12
        x, y = getattr(merged, k), getattr(main, k)
        scale = np.abs(main.q).max() if k != "mean" else np.abs(main.mean).max()
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(merged.v, main.v, rtol=1e-9)  # V exactly too (no Q − M cancellation)

    res = halves.result()
    h = {k: np.asarray(v) for k, v in res["halves_layer"].items()}
    allrow = h["half"] == "all"
    corpus = main.corpus(10, 1e5)
    for col in ("q", "m", "v_w", "v_b"):
        np.testing.assert_allclose(h[col][allrow], corpus[col].to_numpy(), rtol=1e-9)
    # the halves' pooled covariance is the geometry's: the same anisotropy
    geo = {r["layer"]: r for r in geometry.result()["rows"]}
    np.testing.assert_allclose(h["anisotropy"][allrow], [geo[l]["anisotropy"] for l in h["layer"][allrow]], rtol=1e-9)
    # every position in exactly one half: the halves' counts add up to n_t
    counts = np.zeros(main.n.size, np.int64)
    for part in (a, b):
        np.add.at(counts, np.searchsorted(main.token_ids, part.token_ids), part.n)
    np.testing.assert_array_equal(counts, main.n)


def test_half_covariances_equal_numpy_per_half():
    """Each half's covariance (one Gram matrix per half in the shared layer view; the geometry's scatter is
    their sum) = numpy's covariance of that half's states in float64, and the geometry's = the whole's —
    through ``update_all`` (one shared view) and through each measure's own ``update`` alike."""
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.measures import GeometryMeasure, HalvesMeasure
    from normvar_core.pipeline.measures.halves import half_of
    from normvar_core.pipeline.measures.layerview import update_all
    from normvar_core.pipeline.run_plan import synthetic_plan
    from normvar_core.pipeline.sources import GaussianSource

    layers = [0, 2]
    cfg = RunConfig(model="gaussian", samples_per_token=0, id_sample=64)
    plan = synthetic_plan(cfg, n_sentences=300, vocab_size=30, layers=layers, batch_size=13)
    src = GaussianSource(dim=9, layers=layers, seed=4, offset=50.0, scales=[1.0, 3.0], dtype=torch.float32)
    ctx = RunContext(cfg=cfg, layers=layers, dim=9, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    shared = {"geometry": GeometryMeasure.for_run(ctx), "halves": HalvesMeasure.for_run(ctx)}
    alone = [GeometryMeasure.for_run(ctx), HalvesMeasure.for_run(ctx)]
    states, halves = [], []
    for sb in src.batches(plan, 0, plan.n_batches):
        update_all(shared, sb)
        for measure in alone:
            measure.update(sb)
        states.append(sb.states.numpy().astype(np.float64))
        halves.append(half_of(sb.sentence_ids))
    X, half = np.concatenate(states, axis=1), np.concatenate(halves)
    assert 0 < half.sum() < half.size
    for geometry, measure in ((shared["geometry"], shared["halves"]), tuple(alone)):
        covs = measure._covariances()
        for li in range(len(layers)):
            for h, cov in ((0, covs[0]), (1, covs[1]), (None, covs[2])):
                rows = X[li] if h is None else X[li][half == h]
                want = np.cov(rows, rowvar=False, bias=True)
                np.testing.assert_allclose(cov[li], want, rtol=0, atol=1e-10 * np.abs(want).max())
            want = np.cov(X[li], rowvar=False, bias=True)
            got = (geometry.scatter[li] / geometry.n).numpy()
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())


def test_halves_reuse_the_run_moments(streamed):
    """Published, the "all" rows come from the moments measure's result (handed over by publish,
    ``take_results``) instead of merging the halves again: the same table as the merge gives."""
    moments, halves, _ = streamed
    merged = halves.result()
    halves.take_results({"moments": moments.result()})
    reused = halves.result()
    # the fixture's |x| ~ 1e4 makes V/Q ~ 1e-7: the moments' 1e-12 (relative to Q) agreement becomes ~1e-7
    # in the bootstrap's slopes over the types' (M, V), whose quantiles are the intervals' ends
    for name, rtol in (("halves_layer", 1e-9), ("intervals", 1e-5)):
        for col, v in merged[name].items():
            if np.asarray(v).dtype.kind == "f":
                np.testing.assert_allclose(reused[name][col], v, rtol=rtol, atol=1e-12, err_msg=f"{name}.{col}")
            else:
                np.testing.assert_array_equal(reused[name][col], v)
