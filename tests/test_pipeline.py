"""The pipeline's stages against independent ground truth, without a model.

A synthetic plan (random Zipf "sentences") and the seeded GaussianSource go through the same
stages as a real run: the published statistics equal a float64 two-pass brute force over the very
states the source produced, and partial states of any split of the batches merge into exactly the
one-pass state ("two halves merged = one stream")."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from brute import corpus as brute_corpus
from brute import per_type
from hypothesis import given, settings
from hypothesis import strategies as st

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.execute.checkpoint import partial_state
from normvar_core.pipeline.execute.partials import build_measures, compute_partial, merge_partials, run_range
from normvar_core.pipeline.execute.publish import publish_run
from normvar_core.pipeline.measures import MEASURES
from normvar_core.pipeline.run_plan import synthetic_plan
from normvar_core.pipeline.sources import GaussianSource
from normvar_core.runs.reader import open_run

LAYERS = [0, 1, 2]
DIM = 12


def _setup(n_sentences=60, seed=0, offset=1e3, sigma=1.0, samples_per_token=5):
    cfg = RunConfig(model="gaussian", name="synthetic", samples_per_token=samples_per_token, seed=seed)
    plan = synthetic_plan(cfg, n_sentences=n_sentences, vocab_size=40, layers=LAYERS, seed=seed, batch_size=7)
    source = GaussianSource(
        dim=DIM, layers=LAYERS, seed=seed, offset=offset, sigma=sigma, scales=[1.0, 2.0, 0.5], dtype=torch.float64
    )
    ctx = RunContext(cfg=cfg, layers=LAYERS, dim=DIM, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    return plan, source, ctx


def _all_states(source, plan):
    parts = list(source.batches(plan, 0, plan.n_batches))
    X = torch.cat([p.states for p in parts], 1).numpy()
    ids = torch.cat([p.token_ids for p in parts]).numpy()
    return X, ids, parts


def _one_pass(plan, source, ctx):
    measures = build_measures(ctx)
    run_range(source, plan, measures, 0, plan.n_batches)
    return measures


def test_gaussian_source_is_deterministic_per_batch():
    plan, source, _ = _setup()
    a = list(source.batches(plan, 3, 5))
    b = list(source.batches(plan, 0, plan.n_batches))[3:5]
    for x, y in zip(a, b):
        assert x.index == y.index and torch.equal(x.states, y.states) and torch.equal(x.token_ids, y.token_ids)
    # the per-type mean is the one the source documents
    mu = source.mean_of(7)
    assert np.isclose(np.linalg.norm(mu), 1e3)


def test_synthetic_run_equals_float64_brute_force(tmp_path):
    plan, source, ctx = _setup(offset=1e4, sigma=1e-2)  # the stress case: ||mu||^2 / V ~ 1e10
    X, ids, _ = _all_states(source, plan)
    measures = _one_pass(plan, source, ctx)
    path = publish_run(
        tmp_path / "syn.duckdb",
        plan=plan,
        source=source,
        ctx=ctx,
        measures=measures,
        seconds=0.0,
        notes={},
        source_kind="synthetic",
    )
    run = open_run(path)
    # the run row names every measure the run held, in registry order
    assert run.meta["accumulators"] == [c.name for c in MEASURES if c.name in measures] == list(measures)
    assert run.meta["source"] == "synthetic"
    truth = per_type(X, ids)
    for layer in LAYERS:
        tab = run.token_table(layer).set_index("token_id")
        li = LAYERS.index(layer)
        for t, (n, _mu, q, m, v) in truth.items():
            row = tab.loc[t]
            assert row["n"] == n
            np.testing.assert_allclose(row["q"], q[li], rtol=1e-12)
            np.testing.assert_allclose(row["m"], m[li], rtol=1e-12)
            np.testing.assert_allclose(row["v"], v[li], rtol=1e-8, atol=0)
    c = brute_corpus(X, ids)
    ls = run.layer_stats()
    for k in ("q", "m", "v_w", "v_b"):
        np.testing.assert_allclose(ls[k].to_numpy(), c[k], rtol=1e-9)
    # the samples are the source's states at the stored (sentence, position)
    smp = run.samples(1)
    key = {}
    for p in source.batches(plan, 0, plan.n_batches):
        for j, (s, pos) in enumerate(zip(p.sentence_ids.tolist(), p.positions.tolist())):
            key[(s, pos)] = p.states[1, j].numpy()
    for _, r in smp.iterrows():
        np.testing.assert_allclose(r["vector"], key[(r["sentence_id"], r["position"])].astype(np.float32))
        assert run.sentences([r["sentence_id"]])[r["sentence_id"]].split()[r["position"]] == r["token"]


def _assert_same_moments(a, b, rtol=1e-12):
    ra, rb = a["moments"].result(), b["moments"].result()
    np.testing.assert_array_equal(ra.token_ids, rb.token_ids)
    np.testing.assert_array_equal(ra.n, rb.n)
    np.testing.assert_allclose(ra.mean, rb.mean, rtol=rtol, atol=0)
    np.testing.assert_allclose(ra.v, rb.v, rtol=rtol, atol=0)
    np.testing.assert_allclose(ra.q, rb.q, rtol=rtol, atol=0)
    if "samples" in a:
        np.testing.assert_array_equal(a["samples"].result()["vectors"], b["samples"].result()["vectors"])


@settings(max_examples=12, deadline=None)
@given(cuts=st.lists(st.integers(1, 8), min_size=1, max_size=4, unique=True), reverse=st.booleans())
def test_partial_states_of_any_split_merge_to_one_pass(cuts, reverse):
    plan, source, ctx = _setup()
    one = _one_pass(plan, source, ctx)
    bounds = [0, *sorted(c for c in cuts if c < plan.n_batches), plan.n_batches]
    parts = [compute_partial(source, plan, ctx, a, b) for a, b in zip(bounds, bounds[1:])]
    merged = merge_partials(ctx, parts[::-1] if reverse else parts)
    _assert_same_moments(one, merged)


def test_merge_in_every_order_of_four_shards():
    plan, source, ctx = _setup(n_sentences=40)
    one = _one_pass(plan, source, ctx)
    q = plan.n_batches // 4
    bounds = [0, q, 2 * q, 3 * q, plan.n_batches]
    parts = [compute_partial(source, plan, ctx, a, b) for a, b in zip(bounds, bounds[1:])]
    for perm in itertools.permutations(parts):
        _assert_same_moments(one, merge_partials(ctx, list(perm)))


def test_partial_state_round_trips_through_npz_arrays(tmp_path):
    plan, source, ctx = _setup()
    measures = build_measures(ctx)
    run_range(source, plan, measures, 0, 4)
    ps = partial_state(measures, 0, 4)
    np.savez(tmp_path / "p.npz", **ps.arrays())
    with np.load(tmp_path / "p.npz", allow_pickle=False) as z:
        back = type(ps).from_arrays(0, 4, {k: z[k] for k in z.files})
    rest = compute_partial(source, plan, ctx, 4, plan.n_batches)
    _assert_same_moments(_one_pass(plan, source, ctx), merge_partials(ctx, [back, rest]))


def test_overlapping_ranges_are_refused():
    plan, source, ctx = _setup(n_sentences=30)
    a = compute_partial(source, plan, ctx, 0, 3)
    b = compute_partial(source, plan, ctx, 2, plan.n_batches)
    with pytest.raises(ValueError, match="overlapping"):
        merge_partials(ctx, [a, b])


def test_geometry_of_the_stress_case_equals_numpy(tmp_path):
    """Offset of norm 1e4 plus noise 1e-2 (||mu||^2 / V ~ 1e10): the streamed covariance keeps every
    digit — its spectrum, trace, anisotropy and participation ratio equal numpy's eigendecomposition
    of the full centred matrix; the trace equals V(X) of the moments."""
    plan, source, ctx = _setup(offset=1e4, sigma=1e-2)
    X, ids, _ = _all_states(source, plan)
    measures = _one_pass(plan, source, ctx)
    path = publish_run(
        tmp_path / "g.duckdb", plan=plan, source=source, ctx=ctx, measures=measures, seconds=0.0, notes={}
    )
    run = open_run(path)
    geo = run.table("layer_geometry").set_index("layer")
    spec = run.table("layer_spectrum")
    ls = run.layer_stats().set_index("layer")
    for li, layer in enumerate(LAYERS):
        x = X[li]
        xc = x - x.mean(0)
        lam = np.linalg.eigvalsh(xc.T @ xc / x.shape[0])[::-1]
        got = spec[spec.layer == layer].sort_values("k")["eigenvalue"].to_numpy()
        np.testing.assert_allclose(got, lam, rtol=1e-9, atol=1e-12 * lam[0])
        np.testing.assert_allclose(geo.loc[layer, "anisotropy"], lam[0] / lam.sum(), rtol=1e-9)
        np.testing.assert_allclose(geo.loc[layer, "participation_ratio"], lam.sum() ** 2 / (lam**2).sum(), rtol=1e-9)
        np.testing.assert_allclose(geo.loc[layer, "trace"], ls.loc[layer, "v"], rtol=1e-10)
