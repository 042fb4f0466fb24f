"""batches.make_batches / extract: special tokens, both padding sides against a per-sentence
unpadded forward, exclusion counts, truncation, batching, OOM detection."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError
from normvar_core.pipeline.batches import Batch, extract, is_oom, make_batches
from normvar_core.pipeline.encoding import wrap_tokens
from normvar_core.pipeline.models import load_model

SENTS = [
    "Call me Ishmael.",
    "It was the best of times, it was the worst of times.",
    "A",
    "Some years ago, never mind how long precisely, having little or no money in my purse.",
    "Hello world.",
    "It is a truth universally acknowledged.",
]
WRAP = {  # kind: (first token, last token or None when the tokenizer adds only BOS)
    "bert": ("[CLS]", "[SEP]"),
    "roberta": ("<s>", "</s>"),
    "gpt2": ("<|endoftext|>", "<|endoftext|>"),
    "llama": ("<s>", None),
}


@pytest.fixture(scope="module")
def loaded(tiny_models):
    return {k: load_model(RunConfig(model=str(p))) for k, p in tiny_models.items()}


def rows(batch: Batch):
    """Per row: the unpadded ids and special flags (for either padding side)."""
    for r in range(len(batch)):
        m = batch.attention_mask[r].bool()
        yield batch.input_ids[r][m], batch.special_mask[r][m]


def single_forward(lm, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        hs = lm.model(input_ids=ids[None], output_hidden_states=True).hidden_states
    return torch.stack([h[0] for h in hs])  # (L, n, d)


@pytest.mark.parametrize("kind", list(WRAP))
def test_special_tokens(loaded, kind):
    lm = loaded[kind]
    batches, n_trunc = make_batches(SENTS, lm.tokenizer, max_length=lm.info.max_length)
    assert n_trunc == 0
    first, last = WRAP[kind]
    seen = 0
    for b in batches:
        for (ids, sp), i in zip(rows(b), b.indices):
            toks = lm.tokenizer.convert_ids_to_tokens(ids.tolist())
            assert toks[0] == first
            plain = lm.tokenizer(SENTS[i], add_special_tokens=False)["input_ids"]
            if last is None:
                assert ids[1:].tolist() == plain and sp.tolist() == [True] + [False] * len(plain)
            else:
                assert toks[-1] == last and ids[1:-1].tolist() == plain
                assert sp.tolist() == [True] + [False] * len(plain) + [True]
            seen += 1
    assert seen == len(SENTS)
    assert (wrap_tokens(lm.tokenizer)[0] is not None) == (kind == "gpt2")


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("kind", list(WRAP))
def test_extract_equals_unpadded_forward(loaded, kind, side, monkeypatch):
    lm = loaded[kind]
    monkeypatch.setattr(lm.tokenizer, "padding_side", side)
    batches, _ = make_batches(SENTS, lm.tokenizer, max_length=64, max_tokens=60)
    assert len(batches) >= 2 and any(b.attention_mask.min() == 0 for b in batches)  # real padding
    for b in batches:
        assert b.padding_side == side
        if side == "left":
            assert bool((b.attention_mask[:, -1] == 1).all())
        states, token_ids = extract(lm, b)
        assert states.shape[:2] == (3, b.n_tokens) and token_ids.dtype == torch.int64
        off = 0
        for ids, _ in rows(b):
            ref = single_forward(lm, ids)
            n = len(ids)
            torch.testing.assert_close(states[:, off : off + n], ref, atol=1e-5, rtol=1e-5)
            assert torch.equal(token_ids[off : off + n], ids)
            off += n
        assert off == len(token_ids)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("kind", list(WRAP))
def test_exclusion_counts(loaded, kind, side, monkeypatch):
    lm = loaded[kind]
    monkeypatch.setattr(lm.tokenizer, "padding_side", side)
    batches, _ = make_batches(SENTS, lm.tokenizer, max_length=64, max_tokens=60)
    n_special = 1 if kind == "llama" else 2
    for b in batches:
        total = b.n_tokens
        full, _ = extract(lm, b)
        s, ids_s = extract(lm, b, exclude_special=True)
        p, ids_p = extract(lm, b, exclude_position0=True)
        sp, _ = extract(lm, b, exclude_special=True, exclude_position0=True)
        assert s.shape[1] == total - n_special * len(b)
        assert p.shape[1] == total - len(b)
        assert sp.shape[1] == total - n_special * len(b)  # position 0 is a special token here
        want_p, want_s, want_full = [], [], []
        for ids, spm in rows(b):
            want_p.append(ids[1:])
            want_s.append(ids[~spm])
            want_full.append(ids)
        assert torch.equal(ids_p, torch.cat(want_p)) and torch.equal(ids_s, torch.cat(want_s))
        keep_p = torch.cat([torch.arange(len(x)) != 0 for x in want_full])
        torch.testing.assert_close(p, full[:, keep_p], atol=0, rtol=0)


def test_position0_without_special_tokens(loaded, monkeypatch):
    """With wrapping off, GPT-2's position 0 is the first word (as for SmolLM2)."""
    lm = loaded["gpt2"]
    monkeypatch.setattr(lm.tokenizer, "padding_side", "left")
    batches, _ = make_batches(SENTS, lm.tokenizer, max_length=64, wrap="none")
    b = batches[0]
    assert not b.special_mask.any()
    _, ids = extract(lm, b, exclude_position0=True)
    assert torch.equal(ids, torch.cat([x[1:] for x, _ in rows(b)]))
    assert extract(lm, b, exclude_special=True)[0].shape[1] == b.n_tokens


@pytest.mark.parametrize("kind", ["bert", "gpt2", "llama"])
def test_truncation(loaded, kind):
    lm = loaded[kind]
    full, _ = make_batches(SENTS, lm.tokenizer, max_length=64)
    lengths = {int(i): len(ids) for b in full for (ids, _), i in zip(rows(b), b.indices)}
    batches, n_trunc = make_batches(SENTS, lm.tokenizer, max_length=6)
    assert n_trunc == sum(n > 6 for n in lengths.values()) and n_trunc >= 3
    first, last = WRAP[kind]
    for b in batches:
        assert b.input_ids.shape[1] <= 6
        for (ids, sp), i in zip(rows(b), b.indices):
            assert len(ids) == min(lengths[int(i)], 6)
            toks = lm.tokenizer.convert_ids_to_tokens(ids.tolist())
            assert toks[0] == first and (last is None or toks[-1] == last)
            if lengths[int(i)] > 6:  # the content is cut, the specials are kept
                n_sp = 1 if last is None else 2
                plain = lm.tokenizer(SENTS[i], add_special_tokens=False)["input_ids"]
                assert ids[1 : 1 + 6 - n_sp].tolist() == plain[: 6 - n_sp]
                assert int(sp.sum()) == n_sp


def test_batching_order_budget_and_determinism(loaded):
    tok = loaded["bert"].tokenizer
    sents = SENTS * 7
    a, _ = make_batches(sents, tok, max_length=64, max_tokens=80)
    b, _ = make_batches(sents, tok, max_length=64, max_tokens=80)
    order = np.concatenate([x.indices for x in a])
    assert sorted(order.tolist()) == list(range(len(sents)))
    assert np.array_equal(order, np.concatenate([x.indices for x in b]))
    lens = np.concatenate([x.attention_mask.sum(1).numpy() for x in a])
    assert np.all(np.diff(lens) <= 0)  # longest first
    # stable: equal sentences keep their input order
    for s in range(len(SENTS)):
        pos = [int(i) for i in order if int(i) % len(SENTS) == s]
        assert pos == sorted(pos)
    for x in a:
        assert len(x) == 1 or x.input_ids.numel() <= 80
        assert x.input_ids.shape[1] == int(x.attention_mask.sum(1).max())  # no all-pad column
    fixed, _ = make_batches(sents, tok, max_length=64, batch_size=5)
    assert [len(x) for x in fixed] == [5] * 8 + [2]
    assert make_batches([], tok, max_length=64) == ([], 0)


def test_split_and_layers(loaded):
    lm = loaded["llama"]
    (b, *_), _ = make_batches(SENTS, lm.tokenizer, max_length=64, batch_size=6)
    full, ids = extract(lm, b)
    h1, h2 = b.split()
    s1, i1 = extract(lm, h1)
    s2, i2 = extract(lm, h2)
    torch.testing.assert_close(torch.cat([s1, s2], 1), full, atol=1e-5, rtol=1e-5)
    assert torch.equal(torch.cat([i1, i2]), ids)
    sub, _ = extract(lm, b, layers=[0, 2])
    assert torch.equal(sub, full[[0, 2]])
    with pytest.raises(NormvarError, match="out of range"):
        extract(lm, b, layers=[3])


def test_minilm_batches_match_single_forward(minilm_path):
    lm = load_model(RunConfig(model="minilm"))
    batches, _ = make_batches(SENTS, lm.tokenizer, max_length=lm.info.max_length, max_tokens=64)
    for b in batches:
        states, _ = extract(lm, b, exclude_special=True)
        off = 0
        for ids, sp in rows(b):
            ref = single_forward(lm, ids)[:, ~sp]
            torch.testing.assert_close(states[:, off : off + ref.shape[1]], ref, atol=1e-5, rtol=1e-5)
            off += ref.shape[1]
        assert states.shape == (7, off, 384)


def test_is_oom():
    assert is_oom(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert is_oom(
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp] DefaultCPUAllocator: not enough memory: "
            "you tried to allocate 1 bytes. out of memory"
        )
    )
    assert is_oom(RuntimeError("MPS backend out of memory"))
    assert is_oom(MemoryError())
    assert not is_oom(RuntimeError("shape mismatch"))
    assert not is_oom(ValueError("out of memory"))


def test_a_batch_holds_whole_sentences_in_position_order():
    """The per-sentence contract (``StateBatch.sentence_runs``): over a plan's batches, and over the halves of a
    batch split for memory, every sentence's counted positions are one run of consecutive rows, in position order,
    in exactly one batch, as many as the plan counts for it."""
    from normvar_core.pipeline.batches import counted_mask
    from normvar_core.pipeline.contracts import StateBatch
    from normvar_core.pipeline.run_plan import synthetic_plan
    from normvar_core.pipeline.sources import GaussianSource, positions_of

    cfg = RunConfig(model="gaussian")
    plan = synthetic_plan(cfg, n_sentences=50, vocab_size=20, layers=[0], batch_size=7)
    source = GaussianSource(dim=4, layers=[0], seed=1)
    seen: dict[int, int] = {}

    def check(batch: StateBatch) -> None:
        starts, counts = batch.sentence_runs()
        assert int(counts.sum()) == batch.size and len(starts) == len(set(batch.sentence_ids.tolist()))
        for a, c in zip(starts.tolist(), counts.tolist()):
            sid = batch.sentence_ids[a : a + c]
            assert (sid == sid[0]).all() and (torch.diff(batch.positions[a : a + c]) > 0).all()
            assert int(sid[0]) not in seen
            seen[int(sid[0])] = c

    for batch in source.batches(plan, 0, plan.n_batches):
        check(batch)
    per_sentence = dict(seen)
    assert sorted(seen) == list(range(50))
    for b in [b for b in plan.batches if len(b) > 1]:  # the halves of an out-of-memory retry: the same sentences, whole
        seen.clear()
        for half in b.split():
            sent, pos = positions_of(half, counted_mask(half, **plan.exclusions))
            check(StateBatch(index=0, states=None, token_ids=sent, sentence_ids=sent, positions=pos))
        assert seen == {s: per_sentence[s] for s in seen}
