"""The outliers' top activations: the prefilter (``_contenders``) leaves the TOP_K distinct (token, position,
dim) keys exactly as the full candidate set gives them — checked against the unfiltered ``_distinct`` and an
independent pandas brute force, on candidate sets built to be hard: few keys repeated across many sentences
(as position 0's outlier dimensions are), exact ties at the threshold, NaN rows, fewer keys than TOP_K."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures.outliers import TOP_K
from normvar_core.pipeline.measures.outliers import OutlierMeasure as O
from normvar_core.pipeline.run_plan import synthetic_plan


def _candidates(rng, n, n_tokens, n_pos, n_dims, n_values):
    vals = rng.integers(-n_values, n_values + 1, n).astype(float) / 4  # few distinct values: many exact ties
    t = np.stack(
        [
            vals,
            rng.integers(0, n_dims, n),
            rng.integers(0, n_tokens, n),
            rng.integers(0, 50, n),
            rng.integers(0, n_pos, n),
        ],
        axis=1,
    ).astype(float)
    t[rng.random(n) < 0.01, 0] = np.nan
    return t


def _brute(t: np.ndarray) -> np.ndarray:
    """Each key at its largest finite |value| (ties: smallest sentence, position, dim), the TOP_K largest keys."""
    df = pd.DataFrame(t, columns=["v", "dim", "tok", "sent", "pos"])
    df = df[np.isfinite(df["v"])]  # NaN and ±inf are no activations
    df["a"] = -df["v"].abs()
    df = df.sort_values(["a", "sent", "pos", "dim"], kind="mergesort")
    df = df.drop_duplicates(["tok", "pos", "dim"], keep="first").head(TOP_K)
    out = df[["v", "dim", "tok", "sent", "pos"]].to_numpy()
    return np.concatenate([out, np.full((TOP_K - len(out), 5), np.nan)]) if len(out) < TOP_K else out


@pytest.mark.parametrize("seed", range(40))
def test_prefiltered_top_equals_the_full_candidate_set(seed):
    rng = np.random.default_rng(seed)
    shape = [(4000, 3, 2, 6, 5), (20000, 40, 30, 50, 200), (300, 2, 2, 3, 2), (15, 5, 5, 5, 3)][seed % 4]
    t = _candidates(rng, *shape)
    full = O._distinct(t)
    fast = O._distinct(O._contenders(t))
    np.testing.assert_array_equal(fast, full)
    np.testing.assert_array_equal(fast, _brute(t))
    if np.isfinite(full[:, 0]).sum() == TOP_K:
        assert len(O._contenders(t)) < len(t) or len(t) <= TOP_K  # it does filter


def _batches(rng, d, n_batches, dtype, max_sentences=6):
    """Hidden states of 3 layers, batch by batch: few tokens and short sentences (keys repeat across
    sentences), values in steps of 1/4 (exact ties, values equal to the running threshold), a few
    dimensions that carry large values at position 0, NaN and inf now and then, layer 1 all zeros."""
    sent = 0
    for b in range(n_batches):
        lens = rng.integers(1, 5, rng.integers(1, max_sentences))
        pos = np.concatenate([np.arange(k) for k in lens])
        sid = np.repeat(np.arange(sent, sent + len(lens)), lens)
        sent += len(lens)
        tok = np.where(pos == 0, 0, rng.integers(1, 4, len(pos)))
        x = rng.integers(-8, 9, (3, len(pos), d)) / 4
        x[:, pos == 0, : max(1, d // 4)] *= rng.integers(1, 4)
        x[1] = 0.0
        if b % 5 == 3:
            x[2, rng.integers(0, len(pos)), rng.integers(0, d)] = np.nan
        if b % 7 == 0:
            x[0, rng.integers(0, len(pos)), rng.integers(0, d, 25)] = np.inf  # a row of inf: no finite keys
        yield StateBatch(
            index=b,
            states=torch.as_tensor(x, dtype=dtype),
            token_ids=torch.as_tensor(tok),
            sentence_ids=torch.as_tensor(sid),
            positions=torch.as_tensor(pos),
        )


def _accumulator(d, threshold):
    cfg = RunConfig(model="gaussian")
    plan = synthetic_plan(cfg, n_sentences=4, vocab_size=5, layers=[0, 1, 2])
    measure = O(RunContext(cfg=cfg, layers=[0, 1, 2], dim=d, device=torch.device("cpu"), plan=plan, tokens=plan.tokens))
    measure.use_threshold = threshold
    return measure


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("d", [1, 3, 8, 30])
@pytest.mark.parametrize("seed", range(3))
def test_running_threshold_equals_row_top_and_brute_force(seed, d, dtype):
    """Batch after batch, the measure with the running threshold (entries with |h| >= the kept
    TOP_K-th |value|; a numba pass on the CPU for float32/64, torch for float16) keeps the same ``top``
    and ``max_abs`` as the one with every batch through the row-wise top-k, and both equal a pandas
    brute force over every entry so far (max_abs: numpy's NaN-propagating max of |h|)."""
    _check_against_row_top_and_brute_force(np.random.default_rng(seed), d, dtype, 40, 6)


def test_running_threshold_with_batches_larger_than_the_sample():
    """Batches of ~500 embeddings: the first batch's threshold comes from its SAMPLE_ROWS = 256 rows
    of largest ‖x‖² (and the kept top, once there is one), the same exact top."""
    _check_against_row_top_and_brute_force(np.random.default_rng(7), 30, torch.float32, 6, 250)


def _check_against_row_top_and_brute_force(rng, d, dtype, n_batches, max_sentences):
    on, off = _accumulator(d, True), _accumulator(d, False)
    entries = []
    for sb in _batches(rng, d, n_batches, dtype, max_sentences):
        x = sb.states.to(torch.float64).numpy().copy()
        on.update(sb)
        off.update(sb)
        np.testing.assert_array_equal(sb.states.to(torch.float64).numpy(), x)  # the batch is read, never changed
        n = x.shape[1]
        entries.append(
            np.stack(
                [x, np.broadcast_to(np.arange(d), x.shape)]
                + [np.broadcast_to(v.numpy()[:, None], x.shape) for v in (sb.token_ids, sb.sentence_ids, sb.positions)],
                axis=-1,
            ).reshape(3, n * d, 5)
        )
        np.testing.assert_array_equal(on.top, off.top)
        np.testing.assert_array_equal(on.max_abs.numpy(), off.max_abs.numpy())
        assert on.top.shape == (3, TOP_K, 5)
    every = np.concatenate(entries, axis=1)
    for l in range(3):
        np.testing.assert_array_equal(on.top[l], _brute(every[l]))
    np.testing.assert_array_equal(on.max_abs.numpy(), np.abs(every[:, :, 0].reshape(3, -1, d)).max(1))
    assert np.isnan(on.max_abs[2].numpy()).any() and (on.max_abs[1] == 0).all()
    full = np.isfinite(on.top[:, :, 0]).all()  # TOP_K finite keys kept: later batches ran through the threshold
    assert full if d >= 8 else not full if d == 1 else True  # d = 1: 10 (token, position) keys only
