"""A very long sentence (a 10 MB line with ``--max-words 0``) is tokenized from a prefix of whole words, never
whole, for a model that keeps ``max_length`` tokens: the encoded ids, special flags, truncation count equal those of the
whole sentence tokenized (the path with the cut switched off), for
a WordPiece, a byte-level BPE and a SentencePiece tokenizer, with spaces, punctuation and non-ASCII text."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoTokenizer

from normvar_core.pipeline import encoding
from normvar_core.pipeline.encoding import encode_sentences, word_prefix


def _long(seed: int, words: int) -> str:
    rng = np.random.default_rng(seed)
    vocab = ["the", "cat", "sat", "naïve", "über", "mat,", "(a)", "dog.", "日本語", "x" * 150, "ok", "–"]
    seps = [" ", "  ", "\t", " \n "]
    return "".join(
        vocab[i] + seps[j] for i, j in zip(rng.integers(0, len(vocab), words), rng.integers(0, len(seps), words))
    )


@pytest.mark.parametrize("kind", ["bert", "gpt2", "llama"])
@pytest.mark.parametrize("max_length", [8, 64])
def test_a_long_sentence_encodes_as_the_whole_sentence_does(tiny_models, monkeypatch, kind, max_length):
    tok = AutoTokenizer.from_pretrained(tiny_models[kind])
    sentences = [_long(1, 20_000), "a short one.", _long(2, 5_000), "tiny " * 300]
    assert all(word_prefix(s, max_length) is s for s in sentences[1:2])
    assert len(word_prefix(sentences[0], max_length)) < len(sentences[0]) // 100
    cut = encode_sentences(sentences, tok, max_length=max_length)
    monkeypatch.setattr(encoding, "LONG_CHARS", 10**12)  # the whole sentences tokenized
    whole = encode_sentences(sentences, tok, max_length=max_length)
    for field in ("ids", "special", "starts", "lengths"):
        np.testing.assert_array_equal(getattr(cut, field), getattr(whole, field), err_msg=field)
    assert cut.n_truncated == whole.n_truncated >= 3


def test_a_prefix_that_falls_short_gives_way_to_the_whole_sentence(tiny_models):
    tok = AutoTokenizer.from_pretrained(tiny_models["bert"])
    odd = "\u200b " * 5000 + "word " * 40  # zero-width words: no token each, so the prefix holds too few
    assert len(tok(word_prefix(odd, 16))["input_ids"]) <= 16
    enc = encode_sentences([odd], tok, max_length=16)
    full = tok(odd)["input_ids"]
    assert enc.lengths[0] == 16 and enc.n_truncated == 1
    assert list(enc.ids[:15]) == full[:15] and enc.ids[15] == full[-1]
