"""Tokenization in chunks: the plan (batches, counts, samples, TwoNN sample) is exactly the one of a
tokenization of the whole corpus at once, whatever the chunk boundaries; checked on the real MiniLM
tokenizer (and a GPT-2 style wrap) against per-sentence tokenizer calls."""

from __future__ import annotations

import gzip
import itertools

import numpy as np
import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.datadir import DEFAULT_CORPUS
from normvar_core.pipeline import encoding as E
from normvar_core.pipeline import sample_plan as S
from normvar_core.pipeline.batches import counted_mask, make_batches
from normvar_core.pipeline.encoding import encode_sentences
from normvar_core.pipeline.run_plan import corpus_of, make_plan


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        lines = [line.strip() for line in itertools.islice(fh, 600) if line.strip()]
    # a long one (truncated at max_length=24), a one-character one, non-ASCII
    return lines[:150] + [" ".join(lines[150:160]), "A", "Ünïcödé — “quoted” naïve café."] + lines[160:310]


@pytest.fixture(scope="module")
def minilm_tok(minilm_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(minilm_path))


def per_sentence(sentences, tok, max_length):
    """Ground truth: each sentence tokenized by its own tokenizer call, truncated by hand."""
    ids, sp, trunc = [], [], 0
    for s in sentences:
        e = tok(s, add_special_tokens=True, return_special_tokens_mask=True)
        i, m = list(e["input_ids"]), list(e["special_tokens_mask"])
        if len(i) > max_length:  # BERT: keep [CLS] ... [SEP]
            i, m = i[: max_length - 1] + i[-1:], m[: max_length - 1] + m[-1:]
            trunc += 1
        ids.append(i)
        sp.append(m)
    return ids, sp, trunc


CHUNKS = (1, 2, 7, 64, 299, 302, 303, 10_000)  # 303 sentences: one short of, exactly, and past the end


@pytest.mark.parametrize("chunk", CHUNKS)
def test_encoded_equals_per_sentence_tokenization(sentences, minilm_tok, chunk):
    assert len(sentences) == 303
    ids, sp, trunc = per_sentence(sentences, minilm_tok, 24)
    enc = encode_sentences(sentences, minilm_tok, max_length=24, chunk=chunk)
    assert enc.n_truncated == trunc >= 1
    assert enc.lengths.tolist() == [len(x) for x in ids]
    assert enc.ids.tolist() == [t for x in ids for t in x]
    assert enc.special.tolist() == [bool(t) for x in sp for t in x]
    assert enc.starts.tolist() == np.concatenate([[0], np.cumsum(enc.lengths)[:-1]]).tolist()


def assert_same_batches(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.array_equal(x.indices, y.indices) and x.padding_side == y.padding_side
        for f in ("input_ids", "attention_mask", "special_mask"):
            assert torch.equal(getattr(x, f), getattr(y, f)), f


def assert_same_sample_plan(a: S.SamplePlan, b: S.SamplePlan):
    for f in ("token_ids", "i", "batch", "sentence", "offset", "char_start", "char_end"):
        va, vb = getattr(a, f), getattr(b, f)
        assert (va is None and vb is None) or np.array_equal(va, vb), f
    assert a.by_batch.keys() == b.by_batch.keys()
    assert all(np.array_equal(a.by_batch[k], b.by_batch[k]) for k in a.by_batch)


def test_plan_is_the_same_for_every_chunking(sentences, minilm_tok, monkeypatch):
    cfg = RunConfig(model="minilm", max_length=24, exclude_position0=True, samples_per_token=3, id_sample=500)
    corpus = corpus_of(sentences, name="t", sha256="x")
    plans = {}
    for chunk in (1, 7, 302, 303, 10_000):
        monkeypatch.setattr(E, "TOKENIZE_CHUNK", chunk)
        plans[chunk] = make_plan(cfg, corpus, minilm_tok, num_hidden_states=7, max_length=512)
    ref = plans[10_000]  # the whole corpus in one tokenizer call, as before
    assert ref.n_truncated >= 1 and ref.samples.size > 0 and ref.uniform.size == 500
    for p in plans.values():
        assert_same_batches(p.batches, ref.batches)
        assert p.n_truncated == ref.n_truncated
        assert np.array_equal(p.token_ids, ref.token_ids) and np.array_equal(p.counts, ref.counts)
        assert p.tokens == ref.tokens
        assert p.fingerprint() == ref.fingerprint()
        assert_same_sample_plan(p.samples, ref.samples)
        assert_same_sample_plan(p.uniform, ref.uniform)


@pytest.mark.parametrize(
    "excl", [dict(exclude_special=False, exclude_position0=False), dict(exclude_special=True, exclude_position0=True)]
)
def test_streamed_counts_equal_a_count_of_every_id(sentences, minilm_tok, excl):
    batches, _ = make_batches(sentences, minilm_tok, max_length=24, max_tokens=200)
    every = torch.cat([b.input_ids[counted_mask(b, **excl)] for b in batches]).numpy()
    uniq, n = np.unique(every, return_counts=True)
    ids, counts = S.count_tokens(batches, **excl)
    assert np.array_equal(ids, uniq) and np.array_equal(counts, n)
    assert S.count_tokens([], **excl)[0].size == 0


def test_wrapped_tokenizer_chunked(tiny_models, sentences):
    """GPT-2 style wrap (<|endoftext|> on both ends) and left/right padding survive chunking."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_models["gpt2"]))
    assert E.wrap_tokens(tok)[0] is not None
    whole, nt = make_batches(sentences, tok, max_length=20, chunk=10_000)
    for chunk in (1, 5, 302):
        part, nt2 = make_batches(sentences, tok, max_length=20, chunk=chunk)
        assert nt2 == nt >= 1
        assert_same_batches(part, whole)


@pytest.mark.parametrize(
    "excl", [dict(exclude_special=False, exclude_position0=False), dict(exclude_special=True, exclude_position0=True)]
)
def test_sample_plan_is_the_same_for_every_scan_budget(sentences, minilm_tok, excl):
    """plan_samples scans the chosen types in groups (bounded memory): the picks equal one pass over
    every occurrence (budget above the total), and a brute force over the rows in sentence order."""
    batches, _ = make_batches(sentences, minilm_tok, max_length=24, max_tokens=300)
    ids, n = S.count_tokens(batches, **excl)
    chosen = ids[np.argsort(-n, kind="stable")[:40]]
    chosen = np.union1d(chosen, ids[n == 1][:15])  # frequent and singleton types
    whole = S.plan_samples(batches, chosen, per_token=4, seed=3, budget=10**12, **excl)
    assert whole.size == sum(min(4, int(c)) for t, c in zip(ids, n) if t in set(chosen.tolist()))
    for budget in (1, 5, 97, int(n.sum()) // 3):
        assert_same_sample_plan(S.plan_samples(batches, chosen, per_token=4, seed=3, budget=budget, **excl), whole)
    # brute force: every occurrence listed by (type, sentence, offset) from the batches' rows
    occ = []
    for bi, b in enumerate(batches):
        m = counted_mask(b, **excl)
        for r in range(len(b)):
            first = int(torch.nonzero(b.attention_mask[r])[0])
            for c in torch.nonzero(m[r]).reshape(-1).tolist():
                t = int(b.input_ids[r, c])
                if t in set(chosen.tolist()):
                    occ.append((t, int(b.indices[r]), c - first, bi))
    occ.sort()
    rng = np.random.default_rng(3)
    want = []
    for _t, grp in itertools.groupby(occ, key=lambda o: o[0]):
        grp = list(grp)
        k = min(4, len(grp))
        pick = np.sort(rng.choice(len(grp), size=k, replace=False)) if k < len(grp) else range(len(grp))
        want += [grp[p] for p in pick]
    got = list(zip(whole.token_ids.tolist(), whole.sentence.tolist(), whole.offset.tolist(), whole.batch.tolist()))
    assert got == want
