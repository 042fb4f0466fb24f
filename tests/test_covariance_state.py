"""The shared covariance state (``measures/covariance.py``) against a float64 brute force of all rows: a
layer-major measure that registers it in one line, fed a random split of the batches into partial states merged
in a random order, holds n, the mean and the scatter Σ (x − μ)(x − μ)ᵀ of every row (np.cov-style, about the
mean of all rows), per coordinate too, and the raw sums; and the layer-major base sets the device and the
scatter dtype, counts the rows, and refuses a class whose bases are in the wrong order."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures.base import Measure
from normvar_core.pipeline.measures.covariance import Covariance
from normvar_core.pipeline.measures.layerview import LayerMajor
from normvar_core.pipeline.run_plan import synthetic_plan

LAYERS = [0, 1, 3]
DIM = 6


class CovarianceMeasure(LayerMajor):
    """A measure holding only the shared state, in its three uses: a d × d scatter, a per-coordinate one, and
    the raw sums (of the rows themselves)."""

    name = "cov_test"
    title = "covariance"

    def __init__(self, ctx):
        super().__init__(ctx)
        L, d = len(self.layers), ctx.dim
        self.full = Covariance(self, (L, d), device=self.device)
        self.diag = Covariance(
            self, (L, d), count="n_diag", mean="mean_diag", scatter="m2", outer=False, device=self.device
        )
        self.sums = Covariance(self, (L, d), count="n_sums", mean="sum_x", scatter="sum_xx", form="sums")

    @classmethod
    def planned_state(cls, ctx):
        L, d = ctx.num_layers, ctx.dim
        return {
            **Covariance.planned(L, d),
            **Covariance.planned(L, d, count="n_diag", mean="mean_diag", scatter="m2", outer=False),
            **Covariance.planned(L, d, count="n_sums", mean="sum_x", scatter="sum_xx"),
        }

    def update_layer(self, l, view, batch):
        self.full.fold(l, view)
        self.diag.fold(l, view)
        self.sums.add_rows(l, view.x.to(torch.float64).numpy())

    def result(self):
        return None

    def tables(self, result, ctx):
        return {}


@pytest.fixture(scope="module")
def setup():
    cfg = RunConfig(model="gaussian", samples_per_token=4, scatter_dtype="float64")
    plan = synthetic_plan(cfg, n_sentences=20, vocab_size=10, layers=LAYERS, batch_size=7)
    ctx = RunContext(cfg=cfg, layers=LAYERS, dim=DIM, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    rng = np.random.default_rng(11)
    # rows at 1e4 from the origin with a spread of 0.1–3 per layer: the raw sums Σxxᵀ − nμμᵀ would lose ten
    # digits of float64 here (about 1e-7 relative), the pooled scatter keeps them
    centre = 1e4 * rng.standard_normal((len(LAYERS), 1, DIM))
    spread = np.array([0.1, 1.0, 3.0])[:, None, None] * rng.standard_normal((len(LAYERS), 1, DIM))
    X = (centre + spread * rng.standard_normal((len(LAYERS), 900, DIM))).astype(np.float32)
    sizes = np.diff(np.r_[0, np.sort(rng.choice(np.arange(1, 900), size=40, replace=False)), 900])
    batches, at = [], 0
    for i, n in enumerate(sizes):
        ids = torch.arange(at, at + n)
        batches.append(
            StateBatch(
                index=i,
                states=torch.from_numpy(X[:, at : at + n]),
                token_ids=ids % 10,
                sentence_ids=ids,
                positions=torch.zeros(n, dtype=torch.int64),
            )
        )
        at += n
    return ctx, batches, X.astype(np.float64)  # the float64 of the same float32 rows: the ground truth


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_partials_merged_in_any_order_equal_the_brute_force(setup, seed):
    ctx, batches, X = setup
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(1, len(batches)), size=3, replace=False))
    parts = []
    for group in np.split(np.arange(len(batches)), cuts):
        m = CovarianceMeasure(ctx)
        for i in group:
            m.update(batches[i])
        parts.append(m)
    order = rng.permutation(len(parts))
    merged = parts[order[0]]
    for i in order[1:]:
        merged.merge(parts[i])

    N = X.shape[1]
    mu = X.mean(axis=1)
    S = np.stack([np.cov(x, rowvar=False, bias=True) * N for x in X])  # Σ (x − μ)(x − μ)ᵀ of all rows
    assert merged.n == merged.n_diag == merged.n_sums == N
    # the batches' order of summation, the merge order and the BLAS's blocking differ from numpy's two-pass sum:
    # float64 rounding of about 1e-13 relative, far inside 1e-9 (raw sums at this offset are off by about 1e-7)
    tol = dict(rtol=1e-9, atol=1e-9 * np.abs(S).max())
    np.testing.assert_allclose(merged.mean.numpy(), mu, rtol=1e-12)
    np.testing.assert_allclose(merged.scatter.numpy(), S, **tol)
    np.testing.assert_allclose(merged.full.covariance().numpy(), S / N, **tol)
    np.testing.assert_allclose(merged.mean_diag.numpy(), mu, rtol=1e-12)
    np.testing.assert_allclose(merged.m2.numpy(), np.diagonal(S, axis1=1, axis2=2), **tol)
    # raw sums of float64 products in another order: relative rounding of about 1e-15
    np.testing.assert_allclose(merged.sum_x, X.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(merged.sum_xx, np.einsum("lni,lnj->lij", X, X), rtol=1e-12)


def test_pooled_with_equals_the_merge_and_leaves_both(setup):
    ctx, batches, X = setup
    a, b = CovarianceMeasure(ctx), CovarianceMeasure(ctx)
    for i, sb in enumerate(batches):
        (a if i % 3 else b).update(sb)
    before = a.scatter.clone()
    n, mean, scatter = a.full.pooled_with(b.full)
    assert torch.equal(a.scatter, before)
    a.merge(b)
    assert n == a.n == X.shape[1]
    # the same pool_into, layer by layer, on the same arrays in the same order: equal to the last bit
    assert torch.equal(mean, a.mean) and torch.equal(scatter, a.scatter)


def test_planned_entries_are_the_registered_state(setup):
    ctx, _, _ = setup
    m = CovarianceMeasure(ctx)
    spec = m.state_spec()
    assert {k: (tuple(s), np.dtype(t)) for k, (s, t) in CovarianceMeasure.planned_state(ctx).items()} == spec


def test_the_base_sets_device_and_dtype_and_refuses_the_wrong_order(setup):
    ctx, batches, _ = setup
    m = CovarianceMeasure(ctx)
    assert m.device == torch.device("cpu") and m.scatter_dtype == "float64" and m.layers == LAYERS

    class Forgot(CovarianceMeasure):
        def __init__(self, ctx):  # never calls LayerMajor.__init__
            self.layers = list(ctx.layers)

    with pytest.raises(AttributeError, match=r"super\(\).__init__\(ctx\)"):
        Forgot(ctx).update(batches[0])
    with pytest.raises(TypeError, match="MRO"):
        type("Wrong", (Measure, LayerMajor), {})


def test_rows_of_one_batch_must_agree_across_layers(setup):
    ctx, _, _ = setup
    m = CovarianceMeasure(ctx)
    m.full.count(5)
    with pytest.raises(ValueError, match="same batch"):
        m.full.count(4)
