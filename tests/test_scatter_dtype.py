"""--scatter-dtype: the float32 path (per batch, centred on the batch mean, pooled across batches in
float64 by Chan) against the exact float64 path on real MiniLM hidden states; the layer-major loop
(one shared layer view per batch) against each measure's own update; what ``auto`` picks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from brute import pass_in_memory

from normvar_core.config import RunConfig
from normvar_core.pipeline.measures.geometry import GeometryMeasure
from normvar_core.pipeline.measures.layerview import resolve_scatter_dtype, update_all
from normvar_core.pipeline.measures.outliers import OutlierMeasure
from normvar_core.pipeline.measures.selfsim import SelfSimilarityMeasure


@pytest.fixture(scope="module")
def minilm(minilm_path):
    cfg = RunConfig(model="minilm", max_sentences=120, batch_size=16, samples_per_token=0, id_sample=300)
    plan, _, ctx, parts, measures = pass_in_memory(cfg)  # each measure's own update, float64 (auto on CPU)
    assert len(parts) >= 7 and measures["geometry"].scatter_dtype == "float64"
    return ctx, parts, measures


def _shared(ctx, parts, scatter_dtype: str, selfsim_backend: str = "auto") -> dict:
    c = dataclasses.replace(ctx, cfg=ctx.cfg.replace(scatter_dtype=scatter_dtype))
    measures = {"geometry": GeometryMeasure(c), "outliers": OutlierMeasure(c), "selfsim": SelfSimilarityMeasure(c)}
    measures["selfsim"].backend = selfsim_backend
    for sb in parts:
        update_all(measures, sb)
    return measures


def test_float32_scatter_equals_float64_to_1e6(minilm):
    ctx, parts, exact = minilm
    f32 = _shared(ctx, parts, "float32", selfsim_backend="torch")
    assert f32["geometry"].scatter_dtype == "float32" and f32["geometry"].run_meta(None)["scatter_dtype"] == "float32"
    a, b = exact["geometry"].result(), f32["geometry"].result()
    for li in range(len(ctx.layers)):
        lam, lam32 = a["spectra"][li], b["spectra"][li]
        np.testing.assert_allclose(lam32, lam, rtol=1e-6, atol=1e-6 * lam[0])
        np.testing.assert_allclose(b["rows"][li]["trace"], a["rows"][li]["trace"], rtol=1e-6)
        np.testing.assert_allclose(b["rows"][li]["anisotropy"], a["rows"][li]["anisotropy"], rtol=1e-6)
        np.testing.assert_allclose(b["rows"][li]["mean_cosine"], a["rows"][li]["mean_cosine"], rtol=1e-6)
    oa, ob = exact["outliers"].result(), f32["outliers"].result()
    np.testing.assert_allclose(ob["var"], oa["var"], rtol=1e-5, atol=1e-6 * oa["var"].max())
    sa, sb = exact["selfsim"].result()["self_similarity"], f32["selfsim"].result()["self_similarity"]
    ok = np.isfinite(sa)
    np.testing.assert_allclose(sb[ok], sa[ok], rtol=1e-5, atol=1e-6)


def test_shared_layer_views_equal_each_measures_own_update(minilm):
    """The layer-major loop (one float64 copy per layer shared by geometry and outliers; the numba
    self-similarity kernel) gives what each measure's separate update gives, to rounding."""
    ctx, parts, exact = minilm
    shared = _shared(ctx, parts, "float64")
    torch_path = _shared(ctx, parts, "float64", selfsim_backend="torch")
    np.testing.assert_allclose(
        shared["geometry"].scatter.numpy(),
        exact["geometry"].scatter.numpy(),
        rtol=1e-12,
        atol=1e-12 * float(exact["geometry"].scatter.abs().max()),
    )
    np.testing.assert_allclose(shared["outliers"].m2.numpy(), exact["outliers"].m2.numpy(), rtol=1e-12)
    np.testing.assert_allclose(
        shared["selfsim"].sum_u.numpy(), torch_path["selfsim"].sum_u.numpy(), rtol=1e-12, atol=1e-12
    )


def test_auto_picks_float64_where_float64_is_fast(monkeypatch):
    assert resolve_scatter_dtype("auto", "cpu") == "float64"
    assert resolve_scatter_dtype("float32", "cpu") == "float32"
    for cap, want in (
        ((8, 0), "float64"),
        ((9, 0), "float64"),
        ((8, 6), "float32"),
        ((8, 9), "float32"),
        ((7, 5), "float32"),
        ((12, 0), "float32"),
    ):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None, c=cap: c)
        assert resolve_scatter_dtype("auto", torch.device("cuda", 0)) == want, cap
    assert resolve_scatter_dtype("auto", "mps") == "float32"
    with pytest.raises(ValueError):
        resolve_scatter_dtype("float16", "cpu")


@pytest.mark.subprocess
def test_bench_gpu_without_a_gpu_prints_one_line_and_exits_0():
    """`make bench-gpu` on a machine without CUDA (CUDA_VISIBLE_DEVICES hides any GPU): one line, status 0."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(root))
    r = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "bench_gpu.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1 and "no CUDA GPU" in lines[0]


def test_halves_square_norms_without_the_geometry_equal_brute_force(minilm):
    """Without the geometry no measure needs the layer view's centred float64 copy: the split halves'
    Σ‖x‖² (all positions, position 0) then come from Σ_j x_ij² directly. Both paths equal a float64
    brute force over the kept MiniLM states, half by half."""
    from normvar_core.pipeline.measures.halves import HalvesMeasure, half_of

    ctx, parts, _ = minilm
    L = len(ctx.layers)
    brute, brute0 = np.zeros((2, L)), np.zeros((2, L))
    for sb in parts:
        x = sb.states.to(torch.float64).numpy()
        half = half_of(np.asarray(sb.sentence_ids))
        pos0 = np.asarray(sb.positions) == 0
        for h in (0, 1):
            brute[h] += (x[:, half == h] ** 2).sum((1, 2))
            brute0[h] += (x[:, (half == h) & pos0] ** 2).sum((1, 2))
    assert brute0.min() > 0
    for geometry in (True, False):
        measure = HalvesMeasure(dataclasses.replace(ctx, cfg=ctx.cfg.replace(geometry=geometry)))
        for sb in parts:
            update_all({"halves": measure}, sb)
        for h in (0, 1):
            np.testing.assert_allclose(measure.halves[h].sq_all.numpy(), brute[h], rtol=1e-12)
            np.testing.assert_allclose(measure.halves[h].sq_pos0.numpy(), brute0[h], rtol=1e-12)
