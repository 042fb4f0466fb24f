"""TokenMoments / TokenStats against an independent float64 two-pass brute force (tests/brute.py)."""

from __future__ import annotations

import io
import itertools

import brute
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from normvar_core import TokenMoments, TokenStats

BACKENDS = ["numba", "torch"]


def _check_against_brute(res: TokenStats, X: np.ndarray, ids: np.ndarray, rtol: float) -> None:
    ref = brute.per_type(X, ids)
    assert res.token_ids.tolist() == sorted(ref)
    for k, t in enumerate(res.token_ids):
        n, mu, q, m, v = ref[int(t)]
        assert res.n[k] == n
        scale = max(1.0, float(np.abs(q).max()))
        np.testing.assert_allclose(res.mean[:, k], mu, rtol=rtol, atol=rtol * np.sqrt(scale))
        np.testing.assert_allclose(res.q[:, k], q, rtol=rtol, atol=1e-300)
        np.testing.assert_allclose(res.m[:, k], m, rtol=rtol, atol=rtol * scale)
        np.testing.assert_allclose(res.v[:, k], v, rtol=rtol, atol=rtol * scale)


@st.composite
def batches(draw):
    L = draw(st.integers(1, 3))
    d = draw(st.integers(1, 9))
    n_batches = draw(st.integers(1, 4))
    n_types = draw(st.integers(1, 6))
    gap = draw(st.sampled_from([1, 7, 1000]))  # ids with gaps (and a large id)
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        N = draw(st.integers(0, 40))  # empty updates included
        X = rng.normal(size=(L, N, d)) * rng.uniform(0.1, 10) + rng.normal(size=(1, 1, d)) * 5
        ids = rng.integers(0, n_types, N) * gap
        out.append((X, ids))
    return L, d, out


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches())
def test_matches_two_pass_brute_force(backend, data):
    L, d, parts = data
    measure = TokenMoments(L, d, backend=backend)
    for X, ids in parts:
        assert measure.update(X, ids) is measure
    X = np.concatenate([p[0] for p in parts], axis=1)
    ids = np.concatenate([p[1] for p in parts]).astype(np.int64)
    res = measure.result()
    assert measure.n_embeddings == ids.size
    _check_against_brute(res, X, ids, rtol=1e-10)
    # eq. 1 for every (layer, type)
    np.testing.assert_allclose(res.q, res.m + res.v, rtol=1e-12, atol=0)
    # only some types (every other one seen, and one never seen): the brute force of their rows alone
    some = np.append(np.unique(ids)[::2], ids.max(initial=0) + 1)
    rows = np.isin(ids, some)
    _check_against_brute(measure.result(types=some), X[:, rows], ids[rows], rtol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("backend", BACKENDS)
def test_low_precision_inputs_are_exact_on_their_values(dtype, backend):
    """fp16/bf16/fp32 inputs: the statistics are exact (float64) for the values actually given."""
    g = torch.Generator().manual_seed(3)
    X = (torch.randn(2, 500, 12, generator=g) * 2 + 3).to(dtype)
    ids = torch.randint(0, 9, (500,), generator=g)
    measure = TokenMoments(2, 12, backend=backend).update(X[:, :200], ids[:200]).update(X[:, 200:], ids[200:])
    _check_against_brute(measure.result(), X.double().numpy(), ids.numpy(), rtol=1e-11)


def test_single_occurrence_single_type_and_d1():
    measure = TokenMoments(1, 1)
    measure.update(np.array([[[2.5]]], dtype=np.float32), np.array([42]))
    r = measure.result()
    assert r.token_ids.tolist() == [42] and r.n.tolist() == [1]
    assert r.q[0, 0] == pytest.approx(6.25) and r.m[0, 0] == pytest.approx(6.25) and r.v[0, 0] == 0.0


def test_stability_offset_1e4_noise_1e2():
    """Offset of norm 1e4 plus noise 1e-2: V to 1e-8 relative of a float64 two-pass (issue #2).
    The study's float32 running-mean loop is off by ~20 % here; raw sums lose everything."""
    rng = np.random.default_rng(7)
    d = 384
    offset = rng.normal(size=d)
    offset *= 1e4 / np.linalg.norm(offset)
    measure = TokenMoments(1, d)
    parts = []
    for _ in range(5):
        X = (offset + rng.normal(size=(2000, d)) * 1e-2).astype(np.float32)[None]
        ids = rng.integers(0, 15, 2000)
        measure.update(X, ids)
        parts.append((X, ids))
    X = np.concatenate([p[0] for p in parts], 1).astype(np.float64)
    ids = np.concatenate([p[1] for p in parts])
    res = measure.result()
    ref = brute.per_type(X, ids)
    worst = max(abs(res.v[0, k] - ref[int(t)][4][0]) / ref[int(t)][4][0] for k, t in enumerate(res.token_ids))
    assert worst < 1e-8
    # the study's Algorithm 1 style (float32 running mean and mean squared norm, V = Q - M) fails
    t0 = int(res.token_ids[0])
    x = X[0, ids == t0].astype(np.float32)
    mu, q = np.zeros(d, np.float32), np.float32(0)
    for i, row in enumerate(x, start=1):
        mu += (row - mu) / np.float32(i)
        q += (np.float32(row @ row) - q) / np.float32(i)
    study_v = float(q - mu @ mu)
    assert abs(study_v - ref[t0][4][0]) / ref[t0][4][0] > 1e-2


@pytest.mark.parametrize("backend", BACKENDS)
def test_merge_equals_one_pass_in_any_order(backend):
    rng = np.random.default_rng(11)
    L, d = 2, 6
    shards = []
    for s in range(4):
        N = 50 + 10 * s
        X = rng.normal(size=(L, N, d)) * (s + 1) + 100
        ids = rng.integers(0, 8 + 3 * s, N) * 5
        shards.append((X, ids))
    whole = TokenMoments(L, d, backend=backend)
    for X, ids in shards:
        whole.update(X, ids)
    ref = whole.result()
    for perm in itertools.permutations(range(4)):
        measures = [TokenMoments(L, d, backend=backend).update(*shards[i]) for i in perm]
        merged = measures[0]
        for a in measures[1:]:
            assert merged.merge(a) is merged
        r = merged.result()
        assert np.array_equal(r.token_ids, ref.token_ids) and np.array_equal(r.n, ref.n)
        for name in ("mean", "q", "m", "v"):
            np.testing.assert_allclose(getattr(r, name), getattr(ref, name), rtol=1e-12, atol=1e-12)
        assert merged.n_embeddings == whole.n_embeddings


@pytest.mark.parametrize("backend", BACKENDS)
def test_update_on_rows_equals_brute_force_of_those_rows(backend):
    """``update(X, ids, rows=r)`` over batches equals the two-pass brute force of the selected
    embeddings only, and is the same arithmetic as an update on the gathered copy (bit for bit)."""
    rng = np.random.default_rng(5)
    L, d = 3, 7
    kept_X, kept_ids = [], []
    sub = TokenMoments(L, d, backend=backend)
    copied = TokenMoments(L, d, backend=backend)
    for b in range(3):
        N = 40 + 7 * b
        X = (rng.normal(size=(L, N, d)) * 3 + 50).astype(np.float32)
        ids = rng.integers(0, 9, N) * 3
        rows = np.flatnonzero(rng.random(N) < 0.45)
        sub.update(X, ids, rows=torch.from_numpy(rows))
        copied.update(X[:, rows], ids[rows])
        kept_X.append(X[:, rows])
        kept_ids.append(ids[rows])
    assert sub.n_embeddings == copied.n_embeddings == sum(i.size for i in kept_ids)
    _check_against_brute(sub.result(), np.concatenate(kept_X, 1), np.concatenate(kept_ids), rtol=1e-12)
    a, b = sub.result(), copied.result()
    for name in ("n", "mean", "q", "m", "v"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_row_sq_matches_float64_brute_force():
    from normvar_core.pipeline.measures.layerview import row_sq

    rng = np.random.default_rng(2)
    for dtype in (torch.float32, torch.float64):
        x = torch.from_numpy(rng.normal(size=(57, 33)) * 1e3).to(dtype)
        ref = (x.numpy().astype(np.float64) ** 2).sum(1)
        got = row_sq(x)
        assert got.dtype == torch.float64
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-13)


def test_state_dict_round_trip_through_npz_without_pickle():
    rng = np.random.default_rng(5)
    measure = TokenMoments(3, 4, layer_index=[0, 2, 4])
    measure.update(rng.normal(size=(3, 100, 4)), rng.integers(0, 30, 100))
    buf = io.BytesIO()
    np.savez(buf, **measure.state_dict())
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as z:
        back = TokenMoments.from_state_dict({k: z[k] for k in z.files})
    more_X, more_ids = rng.normal(size=(3, 60, 4)), rng.integers(0, 40, 60)
    measure.update(more_X, more_ids)
    back.update(more_X, more_ids)
    a, b = measure.result(), back.result()
    assert np.array_equal(a.token_ids, b.token_ids) and a.layer_index.tolist() == [0, 2, 4]
    for name in ("mean", "q", "m", "v"):
        assert np.array_equal(getattr(a, name), getattr(b, name))


def test_float32_mean_storage_halves_memory_and_stays_close():
    rng = np.random.default_rng(2)
    X, ids = rng.normal(size=(2, 3000, 16)) + 3, rng.integers(0, 50, 3000)
    a64 = TokenMoments(2, 16).update(X, ids).result()
    a32 = (
        TokenMoments(2, 16, mean_dtype="float32")
        .update(X[:, :1500], ids[:1500])
        .update(X[:, 1500:], ids[1500:])
        .result()
    )
    assert a32.mean.dtype == np.float32 and a32.mean.nbytes * 2 == a64.mean.nbytes
    np.testing.assert_allclose(a32.v, a64.v, rtol=1e-5)
    np.testing.assert_allclose(a32.q, a32.m + a32.v, rtol=1e-12)


def test_rejects_bad_shapes_and_ids():
    measure = TokenMoments(2, 3)
    with pytest.raises(ValueError):
        measure.update(np.zeros((1, 4, 3)), np.zeros(4, dtype=int))
    with pytest.raises(ValueError):
        measure.update(np.zeros((2, 4, 3)), np.zeros(5, dtype=int))
    with pytest.raises(ValueError):
        measure.update(np.zeros((2, 1, 3)), np.array([-1]))
    with pytest.raises(TypeError):
        measure.update(np.zeros((2, 1, 3), dtype=np.int32), np.array([1]))


# ----------------------------------------------------------------------------- corpus level (§4)
@st.composite
def corpora(draw):
    L = draw(st.integers(1, 3))
    d = draw(st.integers(1, 6))
    n_types = draw(st.integers(1, 150))  # > 64 exercises the block prefix sums
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    counts = rng.zipf(1.6, n_types).clip(1, 60)
    ids = np.repeat(np.arange(n_types) * 3, counts)
    X = rng.normal(size=(L, ids.size, d)) * rng.uniform(0.5, 3) + rng.normal(size=(L, 1, d)) * 20
    n_min = draw(st.sampled_from([1, 2, 3, 5]))
    n_max = draw(st.sampled_from([1, 4, 10, 60, np.inf]))
    return X, ids, n_min, n_max


@settings(max_examples=60, deadline=None)
@given(data=corpora())
def test_corpus_band_matches_brute_force(data):
    X, ids, n_min, n_max = data
    res = TokenMoments(X.shape[0], X.shape[2]).update(X, ids).result()
    df = res.corpus(n_min, n_max)
    counts = dict(zip(*np.unique(ids, return_counts=True)))
    keep = np.array([n_min <= counts[t] <= n_max for t in ids])
    if not keep.any():
        assert (df["n"] == 0).all() and df["q"].isna().all()
        return
    ref = brute.corpus(X[:, keep], ids[keep])
    assert (df["n"] == keep.sum()).all()
    for col in ("q", "m", "v", "v_w", "v_b"):
        np.testing.assert_allclose(df[col], ref[col], rtol=1e-9, atol=1e-9 * ref["q"].max())
    # eqs. 9 and 13 hold to 1e-10 relative
    np.testing.assert_allclose(df["v"], df["v_w"] + df["v_b"], rtol=1e-10)
    np.testing.assert_allclose(df["q"], df["m"] + df["v_w"] + df["v_b"], rtol=1e-10)


def test_corpus_identity_at_decoder_magnitudes():
    """Q ~ 1e9 with a common offset (massive activations): eq. 13 still to 1e-10."""
    rng = np.random.default_rng(4)
    d = 32
    ids = np.repeat(np.arange(300), rng.integers(1, 40, 300))
    X = (rng.normal(size=(1, ids.size, d)) * 50 + 3e4 / np.sqrt(d)).astype(np.float32)
    res = TokenMoments(1, d).update(X, ids).result()
    df = res.corpus(2, 30)
    np.testing.assert_allclose(df["q"], df["m"] + df["v_w"] + df["v_b"], rtol=1e-10)
    keep = np.isin(ids, res.token_ids[res.band(2, 30)])
    ref = brute.corpus(X[:, keep], ids[keep])
    np.testing.assert_allclose(df["v_b"], ref["v_b"], rtol=1e-6)
    np.testing.assert_allclose(df["v_w"], ref["v_w"], rtol=1e-9)


# ----------------------------------------------------------------------------- the registered state
CHECKPOINT_KEYS = ["ids", "n", "mean", "s", "layer_index", "n_embeddings"]  # normvar-checkpoint-3's per-type state


class _LayerBlocks:
    """A reader (``state.DictReader``'s interface) that hands out no array of 3+ dimensions whole: the
    Ray driver's pieces, one layer block at a time."""

    def __init__(self, arrays):
        self.arrays = arrays

    def get(self, key):
        a = np.asarray(self.arrays[key])
        assert a.ndim < 3, f"the merge read {key} {a.shape} whole instead of layer by layer"
        return a

    def blocks(self, key):
        yield from np.asarray(self.arrays[key])

    def has(self, key):
        return key in self.arrays


def _expected_state(X, ids, layer_index, mean_dtype):
    """The checkpoint-3 arrays from first principles (float64 two-pass brute force), types by id."""
    ref = brute.per_type(X, ids)
    types = sorted(ref)
    n = np.array([ref[t][0] for t in types], np.int64)
    return {
        "ids": np.array(types, np.int64),
        "n": n,
        "mean": np.stack([ref[t][1] for t in types], 1).astype(mean_dtype),
        "s": np.stack([ref[t][4] for t in types], 1) * n,  # S_t = n_t V(X_t) (eq. 6)
        "layer_index": np.asarray(layer_index, np.int64),
        "n_embeddings": np.array([ids.size], np.int64),
    }


def _assert_state(sd, want, rtol):
    assert list(sd) == CHECKPOINT_KEYS
    sd = TokenMoments.sorted_rows(sd)
    for k in CHECKPOINT_KEYS:
        got = np.asarray(sd[k])
        assert got.dtype == want[k].dtype and got.shape == want[k].shape, (k, got.dtype, got.shape, want[k].shape)
        if k in ("mean", "s"):
            np.testing.assert_allclose(got, want[k], rtol=rtol, atol=rtol * 1e3, err_msg=k)
        else:
            assert np.array_equal(got, want[k]), k


@pytest.mark.parametrize(
    "backend,registered,mean_dtype",
    [("numba", False, "float64"), ("torch", False, "float64"), ("torch", True, "float64"), ("numba", False, "float32")],
)
def test_registered_state_keeps_the_checkpoint_format(backend, registered, mean_dtype):
    """TokenMoments through the registered state (``state.Stateful``): state_dict holds the checkpoint-3
    keys, in order, with their dtypes, the seen types' rows only (registered types never seen hold no row),
    and values equal to the float64 brute force; state_spec describes it; the layer keys are the means,
    S_t and the layer index; two halves merged through a dict or one layer block at a time equal the whole;
    a load replaces a larger state (no row of it left behind); a device move keeps the state."""
    rng = np.random.default_rng(11)
    L, d, layers = 3, 5, [0, 2, 5]
    parts = [
        ((rng.normal(size=(L, N, d)) * 2 + 40).astype(np.float32), rng.integers(0, 20, N) * 7 + 3)
        for N in (30, 41, 52, 63)
    ]
    rtol = 1e-12 if mean_dtype == "float64" else 1e-6

    def fed(batches):
        measure = TokenMoments(L, d, layer_index=layers, backend=backend, mean_dtype=mean_dtype)
        if registered:
            measure.register(np.arange(0, 25) * 7 + 3)  # 25 planned types, some never seen
        for X, ids in batches:
            measure.update(X, ids)
        return measure

    def truth(batches):
        X = np.concatenate([p[0] for p in batches], 1)
        return _expected_state(X, np.concatenate([p[1] for p in batches]), layers, mean_dtype)

    whole, a, b = fed(parts), fed(parts[:2]), fed(parts[2:])
    _assert_state(whole.state_dict(), truth(parts), rtol)
    _assert_state(a.state_dict(), truth(parts[:2]), rtol)
    for measure in (whole, a):
        held = measure.state_dict()
        assert measure.state_spec() == {k: (v.shape, v.dtype) for k, v in held.items()}
        assert measure.layer_keys() == {"mean", "s", "layer_index"}
    for merged in (
        fed(parts[:2]).merge(b),
        fed([]).merge_from(_LayerBlocks(a.state_dict())).merge_from(_LayerBlocks(b.state_dict())),
    ):
        _assert_state(merged.state_dict(), truth(parts), rtol)
    loaded = fed(parts)  # holds every type: the load must leave none of its rows behind
    loaded.load_state_dict(a.state_dict())
    loaded.update(*parts[2]).update(*parts[3])
    _assert_state(loaded.state_dict(), truth(parts), rtol)
    restored = TokenMoments.from_state_dict(a.state_dict(), backend=backend)
    _assert_state(restored.update(*parts[2]).update(*parts[3]).state_dict(), truth(parts), rtol)
    moved = fed(parts[:2])
    assert moved.to("cpu") is moved
    _assert_state(moved.update(*parts[2]).update(*parts[3]).state_dict(), truth(parts), rtol)
    other = TokenMoments(L, d, layer_index=[0, 1, 2], backend=backend, mean_dtype=mean_dtype).update(*parts[0])
    with pytest.raises(ValueError, match="layer_index"):  # another run's layers: refused, not pooled
        fed(parts[:1]).merge(other)
