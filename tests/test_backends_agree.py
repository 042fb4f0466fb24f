"""The two update paths of TokenMoments — the fused numba kernel (CPU default, stats/kernels.py) and
torch ``index_add_`` (the GPU path, pipeline/measures/token_moments.py) — give the same run: the whole pipeline on
the real MiniLM, published and read back, and sharded partial states merged, to float64 rounding."""

from __future__ import annotations

import gzip
import itertools

import numpy as np
import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.datadir import DEFAULT_CORPUS
from normvar_core.pipeline import models as M
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.execute.local import compute_run
from normvar_core.pipeline.execute.partials import compute_partial, merge_partials
from normvar_core.pipeline.measures.moments import MomentsMeasure
from normvar_core.pipeline.measures.token_moments import TokenMoments
from normvar_core.pipeline.run_plan import corpus_of, make_plan
from normvar_core.pipeline.sources import TransformerSource
from normvar_core.runs.reader import open_run

RTOL = 1e-12


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        lines = [s.strip() for s in itertools.islice(fh, 3000, 3050) if s.strip()]
    p = tmp_path_factory.mktemp("corpus") / "novels50.txt"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def loaded(minilm_path):
    return M.load_model(RunConfig(model=str(minilm_path)))


def close(a, b, rtol=RTOL):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = np.maximum(np.abs(a), np.abs(b)).max(initial=0.0)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale)


@pytest.fixture
def one_thread():
    """torch on one intra-op thread: a float32 forward pass then repeats bit for bit within the process (with
    several threads its parallel reductions may end in another order and move the last float32 digit, 1e-7
    relative, which would hide what this test compares: the two update paths, to float64 rounding)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_published_runs_equal(minilm_path, corpus, loaded, tmp_path, monkeypatch, one_thread):
    monkeypatch.setattr(M, "load_model", lambda cfg, d=None: loaded)  # load the model once
    runs = {}
    for backend in ("auto", "torch"):
        monkeypatch.setattr(MomentsMeasure, "backend", backend)
        cfg = RunConfig(
            model=str(minilm_path),
            corpus=str(corpus),
            name=f"b-{backend}",
            batch_size=16,
            geometry=False,
            samples_per_token=2,
        )
        runs[backend] = open_run(compute_run(cfg, tmp_path))
    a, b = runs["auto"], runs["torch"]
    assert a.layers == b.layers and len(a.layers) == 7
    for layer in a.layers:
        ta, tb = a.token_table(layer), b.token_table(layer)
        assert ta["token_id"].tolist() == tb["token_id"].tolist() and ta["n"].tolist() == tb["n"].tolist()
        assert ta["n"].sum() > 500
        for col in ("q", "m", "v"):
            close(ta[col], tb[col])
    sa, sb = a.stats(), b.stats()
    close(sa.mean, sb.mean, rtol=1e-6)  # stored as float32: equal to the last float32 digit
    la, lb = a.layer_stats(), b.layer_stats()
    for col in la.columns:
        if np.issubdtype(la[col].dtype, np.number):
            close(la[col], lb[col])


def _sharded(loaded, cfg, cuts, backend, monkeypatch):
    monkeypatch.setattr(MomentsMeasure, "backend", backend)
    with open(cfg.corpus, encoding="utf-8") as fh:
        text = corpus_of([s.strip() for s in fh if s.strip()])
    plan = make_plan(
        cfg, text, loaded.tokenizer, num_hidden_states=loaded.info.num_hidden_states, max_length=loaded.info.max_length
    )
    source = TransformerSource(loaded, plan.layers)
    ctx = RunContext(
        cfg=cfg, layers=plan.layers, dim=source.info.dim, device=torch.device("cpu"), plan=plan, tokens=plan.tokens
    )
    bounds = [0, *cuts, plan.n_batches]
    parts = [compute_partial(source, plan, ctx, s, e) for s, e in zip(bounds, bounds[1:])]
    measures = merge_partials(ctx, parts[::-1])  # merged in reverse order
    assert measures["moments"].acc.backend == ("torch" if backend == "torch" else "numba")
    return measures["moments"].result()


@pytest.mark.slow
def test_sharded_partial_states_merge_equal(corpus, loaded, monkeypatch):
    cfg = RunConfig(model="minilm", corpus=str(corpus), batch_size=8, geometry=False, samples_per_token=0)
    a = _sharded(loaded, cfg, [3, 7], "auto", monkeypatch)
    b = _sharded(loaded, cfg, [5], "torch", monkeypatch)
    assert np.array_equal(a.token_ids, b.token_ids) and np.array_equal(a.n, b.n)
    for f in ("mean", "q", "m", "v"):
        close(getattr(a, f), getattr(b, f))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_low_precision_states_and_float32_means(dtype):
    """Half-precision states (the GPU forward) and float32 mean storage take the same path to float64."""
    g = torch.Generator().manual_seed(0)
    L, N, d = 3, 4000, 48
    ids = torch.randint(0, 300, (N,), generator=g) ** 2 % 997  # sparse ids, uneven counts
    X = (torch.randn((L, N, d), generator=g) * 3 + 50).to(dtype)
    for mean_dtype, rtol in (("float64", RTOL), ("float32", 1e-6)):
        measures = {b: TokenMoments(L, d, backend=b, mean_dtype=mean_dtype) for b in ("numba", "torch")}
        for measure in measures.values():
            for s in range(0, N, 700):  # several batches: new and seen types
                measure.update(X[:, s : s + 700], ids[s : s + 700])
        ra, rb = (measures[b].result() for b in ("numba", "torch"))
        assert np.array_equal(ra.n, rb.n)
        for f in ("mean", "q", "m", "v"):
            close(getattr(ra, f), getattr(rb, f), rtol)


def _batches(seed=1, L=2, N=3000, d=16, vocab=400):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (N,), generator=g) * 3  # ids with gaps
    X = torch.randn((L, N, d), generator=g, dtype=torch.float64) * 2 + 1e3  # a large mean: exactness matters
    return [(X[:, s : s + 500], ids[s : s + 500]) for s in range(0, N, 500)], ids


def test_registered_torch_path_equals_the_kernel_and_merges():
    """register() (rows assigned up front, no host sync in update beyond torch.unique) changes nothing:
    same result as the numba kernel, unseen registered types absent, shards merge in any mix."""
    parts, ids = _batches()
    plan_ids = np.union1d(ids.numpy(), [5, 7, 10_000])  # registered but never seen
    ref = TokenMoments(2, 16, backend="numba")
    reg = TokenMoments(2, 16, backend="torch").register(plan_ids)
    assert reg._fixed and reg.num_types == 0
    for X, i in parts:
        ref.update(X, i)
        reg.update(X, i)
    ra, rb = ref.result(), reg.result()
    assert reg.num_types == ra.num_types == np.unique(ids.numpy()).size
    assert np.array_equal(ra.token_ids, rb.token_ids) and np.array_equal(ra.n, rb.n)
    for f in ("mean", "q", "m", "v"):
        close(getattr(ra, f), getattr(rb, f))
    sd = reg.state_dict()
    assert np.array_equal(np.sort(sd["ids"]), ra.token_ids) and (sd["n"] > 0).all()
    # halves: registered + registered, registered + plain, plain + registered
    for kinds in (("reg", "reg"), ("reg", "plain"), ("plain", "reg")):
        halves = []
        for k, chunk in zip(kinds, (parts[:3], parts[3:])):
            measure = TokenMoments(2, 16, backend="torch")
            if k == "reg":
                measure.register(plan_ids)
            for X, i in chunk:
                measure.update(X, i)
            halves.append(measure)
        merged = halves[0].merge(halves[1]).result()
        assert np.array_equal(merged.n, ra.n)
        for f in ("mean", "q", "m", "v"):
            close(getattr(merged, f), getattr(ra, f))
    restored = TokenMoments.from_state_dict(sd, backend="torch").result()
    close(restored.v, ra.v)


@pytest.mark.parametrize("bad", [10_001, 4, -3])
def test_registered_path_refuses_unregistered_ids_at_the_end(bad):
    parts, ids = _batches()
    measure = TokenMoments(2, 16, backend="torch").register(ids.numpy())
    X, i = parts[0]
    measure.update(X, torch.cat([i[:-1], torch.tensor([bad])]))  # no check (no host sync) per batch ...
    with pytest.raises(ValueError, match="outside the registered types"):
        measure.result()  # ... but the result is never wrong silently
    with pytest.raises(ValueError, match="outside the registered types"):
        measure.state_dict()
    other = TokenMoments(2, 16, backend="torch").update(X[:, :3], torch.tensor([1, 10_001, 2]))
    fresh = TokenMoments(2, 16, backend="torch").register(ids.numpy())
    with pytest.raises(ValueError, match="outside the registered types"):
        fresh.merge(other)
    with pytest.raises(ValueError, match="non-negative"):
        TokenMoments(2, 16, backend="torch").register([-1, 2])
