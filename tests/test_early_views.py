"""The occurrences' early pass hands its layer views' Gram products to the pass with the batches it keeps.

Independent ground truth: a fresh ``LayerView`` of the same rows, computed here, and a run whose early pass kept
nothing (``reuse=False``) — the pass then computes every product itself."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.execute.partials import build_measures, run_range
from normvar_core.pipeline.execute.prepare import prepare
from normvar_core.pipeline.measures import layerview
from normvar_core.pipeline.measures.halves import half_rows, view_split
from normvar_core.pipeline.measures.layerview import LayerView
from normvar_core.pipeline.measures.occurrences import AxesPass


def test_a_view_from_known_products_equals_a_fresh_view():
    """``known`` = another view's ``reusable()``: the same mean, scatter, parts, per-dimension sums, centred copy
    and weighted sums as a view that computes them, with and without a split, in float64 and float32."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(301, 17, generator=g) * 4 + 2
    order = torch.randperm(301, generator=g)
    for dtype in ("float64", "float32"):
        for split in (None, (order, [120, 181])):
            first = LayerView(x, dtype, split).reusable()
            fresh, known = LayerView(x, dtype, split), LayerView(x, dtype, split, first)
            assert known._grams is first.get("grams") and known._mean is first["mean"]  # taken, not recomputed
            w = torch.rand(301, generator=g, dtype=torch.float64)
            for a, b in (
                (fresh.scatter, known.scatter),
                (fresh.mean, known.mean),
                (fresh.col_sq, known.col_sq),
                (fresh.centred, known.centred),
                (fresh.weighted_sum(w), known.weighted_sum(w)),
            ):
                torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-12)
            if split is not None:
                for (n1, m1, s1), (n2, m2, s2) in zip(fresh.parts(), known.parts()):
                    assert n1 == n2
                    torch.testing.assert_close(m1, m2, rtol=1e-13, atol=1e-12)
                    torch.testing.assert_close(s1, s2, rtol=1e-13, atol=1e-12)
            # float64 brute force of the scatter about the batch mean (float32 products: to float32's rounding)
            x64 = x.double()
            brute = (x64 - x64.mean(0)).T @ (x64 - x64.mean(0))
            tol = 1e-12 if dtype == "float64" else 1e-5
            torch.testing.assert_close(known.scatter, brute, rtol=tol, atol=tol * float(brute.abs().max()))


def test_known_products_of_another_split_or_dtype_are_ignored():
    x = torch.randn(50, 6, dtype=torch.float32)
    first = LayerView(x, "float64", (torch.arange(50), [20, 30])).reusable()
    assert LayerView(x, "float64", None, first)._grams is None  # split differs
    assert LayerView(x, "float32", (torch.arange(50), [20, 30]), first)._mean is None  # dtype differs


@pytest.fixture
def setup(tiny_models, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"the cat {i % 9} sat on mat {i % 13} with a dog {i % 5}" for i in range(160)) + "\n")

    def make(**kw):
        cfg = RunConfig(model=str(tiny_models["bert"]), corpus=str(corpus), batch_size=8, id_sample=200, name="r", **kw)
        return prepare(cfg, tmp_path / "data")

    return make


def test_the_kept_batches_carry_their_views_split_as_the_pass_splits_them(setup):
    s = setup()
    kept = s.source.kept
    assert kept and all(len(sbs) == 1 for sbs in kept.values())
    L = s.ctx.num_layers
    for sbs in kept.values():
        sb = sbs[0]
        split = view_split(half_rows(sb, "cpu"))
        assert sb.views is not None and len(sb.views) == L
        for l, v in enumerate(sb.views):
            assert v["sizes"] == split[1] and "grams" in v and v["dtype"] == torch.float64
            fresh = LayerView(sb.states[l], "float64", split)
            for (G, total), (Gk, totalk) in zip(fresh._part_grams(), v["grams"]):
                torch.testing.assert_close(G, Gk, rtol=1e-12, atol=1e-9)
                torch.testing.assert_close(total, totalk, rtol=1e-12, atol=1e-9)
            torch.testing.assert_close(fresh.mean, v["mean"], rtol=1e-13, atol=1e-12)
    # the memory plan counts them: the states and, per kept batch and layer, two d x d parts + three d-vectors
    e = AxesPass.planned(s.ctx)
    d, n_kept = s.ctx.dim, len(kept)
    states = sum(sbs[0].states.numel() * 4 for sbs in kept.values())
    assert e["batches"] == n_kept and e["held_bytes"] >= states + n_kept * L * 16 * d * d
    assert e["held_bytes"] == L * e["positions"] * d * 4 + n_kept * L * (16 * d * d + 24 * d)


def test_the_pass_takes_the_early_products_and_equals_a_pass_that_computes_them(setup, monkeypatch):
    """The pass computes no Gram product for the kept batches, and its measures end where those of a pass
    over the same batches that computed every product end (to float64 rounding)."""
    calls = []
    real = layerview.gram
    monkeypatch.setattr(layerview, "gram", lambda xc: calls.append(xc.shape) or real(xc))

    s = setup()
    kept = len(s.source.kept)
    assert kept >= 1
    measures = build_measures(s.ctx)
    calls.clear()
    run_range(s.source, s.plan, measures, 0, s.plan.n_batches)
    L, n = s.ctx.num_layers, s.plan.n_batches
    assert len(calls) == 2 * L * (n - kept)  # two halves' Gram products per layer of each batch not kept

    ref = setup()
    for sbs in ref.source.kept.values():  # the same batches, their products left to the pass
        for sb in sbs:
            sb.views = None
    ref_accs = build_measures(ref.ctx)
    calls.clear()
    run_range(ref.source, ref.plan, ref_accs, 0, ref.plan.n_batches)
    assert len(calls) == 2 * L * n
    for name in ("geometry", "halves", "outliers", "occurrences"):
        a, b = measures[name].state_dict(), ref_accs[name].state_dict()
        assert a.keys() == b.keys()
        for k in a:
            x, y = np.asarray(a[k]), np.asarray(b[k])
            if x.dtype.kind == "f":
                finite = np.abs(y[np.isfinite(y)])
                scale = float(finite.max()) if finite.size else 1.0  # (unset TwoNN distances are inf in both)
                np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12 * scale, err_msg=f"{name}.{k}")
            else:
                np.testing.assert_array_equal(x, y, err_msg=f"{name}.{k}")


def _thread_counts() -> dict[str, int]:
    """The intra-op thread counts torch's ops run with, as torch reports them (``parallel_info``: ATen's,
    OpenMP's and MKL's maximum), and numpy's BLAS and OpenMP pools as threadpoolctl sees them."""
    import re

    from threadpoolctl import threadpool_info

    info = torch.__config__.parallel_info()
    counts = {
        f"torch {k}": int(v)
        for k, v in re.findall(
            r"(at::get_num_threads|omp_get_max_threads|"
            r"mkl_get_max_threads)\(\) : (\d+)",
            info,
        )
    }
    return counts | {
        f"{p['user_api']} {p['internal_api']} {p['filepath']}": p["num_threads"] for p in threadpool_info()
    }


def test_per_layer_leaves_torch_with_its_threads(monkeypatch):
    """``per_layer`` limits BLAS and torch to one thread per layer while it runs and sets both back: afterwards
    torch's thread count and the counts its matmuls run with (ATen's, OpenMP's and MKL's, from torch's own
    report) and numpy's BLAS pool are those from before (it had left MKL at one thread: the pass's matmuls ran
    1.8x slower). Two layers at a time on any machine (``layer_threads`` fixed at 2)."""
    from normvar_core.pipeline.measures.layerview import per_layer
    from normvar_core.stats.axes import top_axes

    monkeypatch.setattr(layerview, "layer_threads", lambda n_layers, parallel=True: 2)
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        before = _thread_counts()
        assert before["torch at::get_num_threads"] == before["torch mkl_get_max_threads"] == 2, before
        cov = np.cov(np.random.default_rng(0).standard_normal((500, 64)).T)
        inside = []
        axes = per_layer(lambda i: inside.append(_thread_counts()) or top_axes(cov, 8), 4)
        assert len(axes) == 4 and len(inside) == 4
        # one BLAS thread per layer meanwhile (the BLAS pools are process-wide; an OpenMP count is per thread)
        blas = [k for k in before if k.startswith("blas ")]
        assert blas and all(c[k] == 1 for c in inside for k in blas), inside
        assert torch.get_num_threads() == 2
        after = _thread_counts()  # (a library first loaded meanwhile is new, not changed)
        assert {k: after[k] for k in before} == before
    finally:
        torch.set_num_threads(saved)
