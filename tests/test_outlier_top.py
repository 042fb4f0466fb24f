"""The outliers' top activations: the prefilter (``_contenders``) leaves the TOP_K distinct (token, position,
dim) keys exactly as the full candidate set gives them — checked against the unfiltered ``_distinct`` and an
independent pandas brute force, on candidate sets built to be hard: few keys repeated across many sentences
(as position 0's outlier dimensions are), exact ties at the threshold, NaN rows, fewer keys than TOP_K."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from normvar_core.pipeline.accumulators.outliers import TOP_K, OutlierAccumulator as O


def _candidates(rng, n, n_tokens, n_pos, n_dims, n_values):
    vals = rng.integers(-n_values, n_values + 1, n).astype(float) / 4  # few distinct values: many exact ties
    t = np.stack([vals, rng.integers(0, n_dims, n), rng.integers(0, n_tokens, n),
                  rng.integers(0, 50, n), rng.integers(0, n_pos, n)], axis=1).astype(float)
    t[rng.random(n) < 0.01, 0] = np.nan
    return t


def _brute(t: np.ndarray) -> np.ndarray:
    """Each key at its largest |value| (ties: smallest sentence, position, dim), the TOP_K largest keys."""
    df = pd.DataFrame(t, columns=["v", "dim", "tok", "sent", "pos"]).dropna()
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
        assert len(O._contenders(t)) < len(t) or len(t) <= TOP_K   # it does filter
