"""The plan's counts and picks read from the flat encoding (``flat_counts.counted_chunks``) equal those read batch
by batch from the padded batches (``counted_mask``), for either padding side, every exclusion and any chunk size."""

from __future__ import annotations

import gzip
import itertools

import numpy as np
import pytest

from normvar_core.datadir import DEFAULT_CORPUS
from normvar_core.pipeline import flat_counts as F
from normvar_core.pipeline import sample_plan as S
from normvar_core.pipeline.batches import PaddedBatches, make_batches

EXCL = [dict(exclude_special=a, exclude_position0=b) for a in (False, True) for b in (False, True)]


@pytest.fixture(scope="module")
def batches(minilm_path) -> PaddedBatches:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(minilm_path))
    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        lines = [line.strip() for line in itertools.islice(fh, 400) if line.strip()]
    out, _ = make_batches(lines[:300] + [" ".join(lines[300:310])], tok, max_length=24, max_tokens=300)
    assert isinstance(out, PaddedBatches) and len(out) > 5
    return out


def _same(a: S.SamplePlan, b: S.SamplePlan) -> None:
    for f in ("token_ids", "i", "batch", "sentence", "offset"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert a.by_batch.keys() == b.by_batch.keys()


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("excl", EXCL)
@pytest.mark.parametrize("chunk", [1, 97, None])
def test_flat_reading_equals_the_padded_batches(batches, side, excl, chunk, monkeypatch):
    flat = PaddedBatches(batches.enc, batches.groups, batches.pad_id, side)
    built = list(flat)  # a list of Batch: read batch by batch (counted_mask), as before
    assert F.counted_chunks(built, **excl) is None and F.counted_chunks(flat, **excl) is not None
    if chunk is not None:
        monkeypatch.setattr(F, "CHUNK_TOKENS", chunk)
    ids, n = S.count_tokens(flat, **excl)
    ids_b, n_b = S.count_tokens(built, **excl)
    assert np.array_equal(ids, ids_b) and np.array_equal(n, n_b) and n.sum() > 0
    chosen = np.union1d(ids[np.argsort(-n, kind="stable")[:30]], ids[n == 1][:10])
    for budget in (7, None):
        _same(
            S.plan_samples(flat, chosen, per_token=3, seed=5, budget=budget, **excl),
            S.plan_samples(built, chosen, per_token=3, seed=5, budget=budget, **excl),
        )
    for size in (1, 250, 10**6):
        _same(S.plan_uniform(flat, size=size, seed=2, **excl), S.plan_uniform(built, size=size, seed=2, **excl))


def test_token_counts_and_the_largest_batch_without_building_them(batches):
    want = [int(b.attention_mask.sum()) for b in batches]
    assert batches.token_counts().tolist() == want
    assert batches.token_counts().tolist() == want  # kept, and a copy each time
    from normvar_core.pipeline.memory.terms import largest_batch

    built = list(batches)
    assert largest_batch(batches) == largest_batch(built)  # vectorised, and a scan over the built batches
    assert largest_batch(batches)[0] * largest_batch(batches)[1] == max(b.input_ids.numel() for b in built)
    empty = PaddedBatches(batches.enc, [], batches.pad_id, "right")
    assert empty.token_counts().size == 0 and S.count_tokens(empty, **EXCL[0])[0].size == 0
