"""Corpus shares (the Ray executor's tokenization, without Ray): the encodings of contiguous shares,
merged in share order, equal the encoding of the whole sentence list — ids, special flags, lengths,
truncations, and for word runs the word types renumbered by first appearance — so the plan built from
them is the local plan; the plan sent to workers as plain arrays has the driver's batches and samples."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline import encoding as E
from normvar_core.pipeline.corpus.shares import (encoded_arrays, merge_encoded, pack_strings, split_shares,
                                                 unpack_strings)
from normvar_core.pipeline.plan import make_plan
from normvar_core.pipeline.execute.plan_payload import plan_from_payload, plan_payload

SENTENCES = ["The old man looked at the sea.", "Émile's café — naïve, façade!", "a", "the the the the the",
             "Line with\nan inner newline from a table cell", "He said: «nothing» and left.", "x " * 40,
             "Unrelated words appear here once", "the sea, the sea", "Zwölf Boxkämpfer jagen Viktor."]


def _shares_encoded(sentences, tok, k, **kw):
    parts = [encoded_arrays(E.encode_sentences(unpack_strings(s), tok, **kw)) for s in split_shares(sentences, k)]
    return merge_encoded(parts)


def test_pack_roundtrip_and_contiguous_shares():
    assert unpack_strings(pack_strings(SENTENCES)) == SENTENCES
    for k in (1, 2, 3, 7, 10, 50):
        shares = split_shares(SENTENCES, k)
        assert len(shares) == min(k, len(SENTENCES))
        assert [int(s["first"]) for s in shares] == sorted(int(s["first"]) for s in shares)
        assert sum((unpack_strings(s) for s in shares), []) == SENTENCES


@pytest.mark.parametrize("unit", ["token", "word"])
def test_merged_shares_equal_the_whole_encoding(tiny_models, unit):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_models["bert"])
    whole = E.encode_sentences(SENTENCES, tok, max_length=12, unit=unit)
    assert whole.n_truncated > 0
    for k in (2, 3, 10):
        got = _shares_encoded(SENTENCES, tok, k, max_length=12, unit=unit)
        for f in ("ids", "special", "starts", "lengths"):
            np.testing.assert_array_equal(getattr(got, f), getattr(whole, f), err_msg=f)
        assert got.n_truncated == whole.n_truncated
        if unit == "word":
            np.testing.assert_array_equal(got.word_type, whole.word_type)
            np.testing.assert_array_equal(got.word_occ, whole.word_occ)
            assert got.words == whole.words


def test_plan_from_shares_and_its_payload_equal_the_local_plan(tiny_models):
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_models["bert"])
    cfg = RunConfig(samples_per_token=3, id_sample=20, batch_size=3)
    corpus = SimpleNamespace(sentences=SENTENCES * 3)
    kw = dict(num_hidden_states=3, max_length=16)
    local = make_plan(cfg, corpus, tok, **kw)
    shared = make_plan(cfg, corpus, tok, **kw, encode=lambda s, **k: _shares_encoded(s, tok, 4, **k))
    sent = plan_from_payload(cfg, plan_payload(shared))
    for p in (shared, sent):
        np.testing.assert_array_equal(p.token_ids, local.token_ids)
        np.testing.assert_array_equal(p.counts, local.counts)
        assert p.n_batches == local.n_batches and p.layers == local.layers
        for a, b in zip(p.batches, local.batches):
            assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.attention_mask, b.attention_mask)
            assert torch.equal(a.special_mask, b.special_mask) and np.array_equal(a.indices, b.indices)
        for name in ("samples", "uniform"):
            x, y = getattr(p, name), getattr(local, name)
            assert x.size == y.size > 0
            for f in ("token_ids", "i", "batch", "sentence", "offset"):
                np.testing.assert_array_equal(getattr(x, f), getattr(y, f))
            assert x.by_batch.keys() == y.by_batch.keys()
    assert shared.tokens == local.tokens and shared.n_truncated == local.n_truncated
