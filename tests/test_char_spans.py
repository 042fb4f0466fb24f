"""Each sampled token's character span (sample_plan.char_spans, vectorized over the picks) against a
per-pick reading of the fast tokenizer's own offsets and word spans, on real tokenizers (MiniLM's WordPiece
and the tiny byte-level / Metaspace BPE ones): positions 0 and past the end, special tokens, wrapped runs."""

import numpy as np
import pytest

from normvar_core.pipeline.sample_plan import SamplePlan, char_spans

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world!",
    "",
    "Unbelievably, tokenization splits words: re-entry, naïve café.",
    "a b c d e f g",
]


def _reference(plan, tokenizer, wrapped, words):
    """The spans read pick by pick from tokenizer(sentence) (the definition the dashboard relies on)."""
    start, end = np.full(plan.size, -1), np.full(plan.size, -1)
    for k in range(plan.size):
        enc = tokenizer([SENTENCES[plan.sentence[k]]], add_special_tokens=True, return_offsets_mapping=True)
        offs, p = enc["offset_mapping"][0], int(plan.offset[k]) - (1 if wrapped else 0)
        if 0 <= p < len(offs) and offs[p][1] > offs[p][0]:
            start[k], end[k] = offs[p]
            w = enc.word_ids(0)[p] if words else None
            if w is not None:
                start[k], end[k] = enc.word_to_chars(0, w)
    return start, end


def _plan(rng, n):
    sentence = rng.integers(0, len(SENTENCES), n)
    offset = rng.integers(0, 20, n)  # past the end of the shorter sentences too
    zeros = np.zeros(n, np.int64)
    return SamplePlan(zeros, zeros.astype(np.int32), zeros, sentence, offset)


@pytest.mark.parametrize("kind", ["minilm", "roberta", "llama"])
@pytest.mark.parametrize("wrapped", [False, True])
@pytest.mark.parametrize("words", [False, True])
def test_spans_equal_the_tokenizers_own(kind, wrapped, words, tiny_models, minilm_path):
    import transformers as T

    tokenizer = T.AutoTokenizer.from_pretrained(minilm_path if kind == "minilm" else tiny_models[kind])
    assert tokenizer.is_fast
    plan = _plan(np.random.default_rng(len(kind) + 2 * wrapped + words), 300)
    char_spans(plan, SENTENCES, tokenizer, wrapped=wrapped, words=words)
    start, end = _reference(plan, tokenizer, wrapped, words)
    np.testing.assert_array_equal(plan.char_start, start)
    np.testing.assert_array_equal(plan.char_end, end)
    assert (start >= 0).sum() > 100 and (start < 0).sum() > 10  # both kinds of pick were drawn


def test_the_plan_leaves_the_spans_unknown_at_the_same_bytes(minilm_path):
    """``make_plan(spans=False)`` (``normvar plan``): the same plan but for the spans, -1 in arrays of the same size
    and dtype, so the plan's bytes (``memory.terms.plan_bytes``) are the same."""
    from transformers import AutoTokenizer

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.memory.terms import plan_bytes
    from normvar_core.pipeline.run_plan import corpus_of, make_plan

    tok = AutoTokenizer.from_pretrained(str(minilm_path))
    corpus = corpus_of([s for s in SENTENCES if s] * 20)
    cfg = RunConfig(model="minilm", samples_per_token=3)
    full = make_plan(cfg, corpus, tok, num_hidden_states=7, max_length=64)
    bare = make_plan(cfg, corpus, tok, num_hidden_states=7, max_length=64, spans=False)
    assert full.samples.size > 0 and (full.samples.char_start >= 0).any()
    for a, b in ((full.samples.char_start, bare.samples.char_start), (full.samples.char_end, bare.samples.char_end)):
        assert b.dtype == a.dtype and b.shape == a.shape and (b == -1).all()
    assert np.array_equal(full.samples.offset, bare.samples.offset) and plan_bytes(full) == plan_bytes(bare)
