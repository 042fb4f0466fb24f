"""Corpus shares (the Ray executor's tokenization, without Ray): the encodings of contiguous shares,
merged in share order, equal the encoding of the whole sentence list — ids, special flags, lengths,
truncations, and for word runs the word types renumbered by first appearance — so the plan built from
them is the local plan; the plan sent to workers as plain arrays has the driver's batches and samples."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from corpus_files import corpus_lines, write_corpus

from normvar_core.config import RunConfig
from normvar_core.pipeline import encoding as E
from normvar_core.pipeline.corpus.shares import (
    encoded_arrays,
    merge_encoded,
    pack_strings,
    split_shares,
    unpack_strings,
)
from normvar_core.pipeline.execute.plan_payload import plan_from_payload, plan_payload
from normvar_core.pipeline.run_plan import corpus_of, make_plan

SENTENCES = [
    "The old man looked at the sea.",
    "Émile's café — naïve, façade!",
    "a",
    "the the the the the",
    "Line with\nan inner newline from a table cell",
    "He said: «nothing» and left.",
    "x " * 40,
    "Unrelated words appear here once",
    "the sea, the sea",
    "Zwölf Boxkämpfer jagen Viktor.",
]


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
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_models["bert"])
    cfg = RunConfig(samples_per_token=3, id_sample=20, batch_size=3)
    corpus = corpus_of(SENTENCES * 3)
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


@pytest.mark.parametrize("fmt", [".txt.gz", ".jsonl", ".parquet"])
def test_actor_phases_on_byte_ranges_give_the_local_corpus_and_encoding(tiny_models, tmp_path, fmt):
    """The Ray actors' corpus phases called directly (``ray_corpus.RangeState``, ``actor_keep``), the
    driver's merge after them: the local ``CorpusText`` and the whole list's encoding — also when an
    actor lost its state between phases (a fresh ``RangeState`` given only phase 3)."""
    from transformers import AutoTokenizer

    from normvar_core.pipeline.corpus import ranges as R
    from normvar_core.pipeline.corpus.read import load_sentences
    from normvar_core.pipeline.execute.ray_corpus import RangeState, actor_keep

    tok = AutoTokenizer.from_pretrained(tiny_models["bert"])
    path = write_corpus(tmp_path / f"c{fmt}", fmt, corpus_lines(120, seed=9))
    cfg = RunConfig(
        corpus=str(path),
        sample_frac=0.7,
        seed=11,
        max_sentences=30,
        max_words=11,
        unit="word",
        text_column="text" if fmt != ".txt.gz" else None,
    )
    want = load_sentences(cfg)
    whole = E.encode_sentences(want.sentences, tok, max_length=12, unit="word")
    for k in (1, 3, 5):
        cut = R.cut_ranges(cfg, k)
        shares = R.shares_of(cut)
        states = [RangeState(cfg) for _ in shares]
        infos = [st.parse(s, cfg.text_column) for st, s in zip(states, shares)]
        skips = R.skips([i["n_nonempty"] for i in infos])
        picked = [len(st.selection(s, cfg.text_column, sk).kept) for st, s, sk in zip(states, shares, skips)]
        rooms = R.rooms(cfg, picked)
        states[-1] = RangeState(cfg)  # the last actor restarted: phase 3 recomputes phases 1 and 2
        parts = [
            actor_keep(cfg, st.selection(s, cfg.text_column, sk), r, tok, 12, prior_cpu_s=st.cpu_s)
            for st, s, sk, r in zip(states, shares, skips, rooms)
        ]
        for st, p in zip(states, parts):  # an actor's CPU: its parse + selection, then keep + tokenize
            assert st.cpu_s > 0 and p["read_cpu_s"] >= st.cpu_s + p["cpu_s"] - 1e-9
        for p in parts:
            p["sentences"] = unpack_strings({"utf8": p["kept_utf8"], "ends": p["kept_ends"]})
        got = R.merge_selections(
            cfg, cut, parts, n_not_text=sum(i["n_not_text"] for i in infos), column=cfg.text_column
        )
        assert got.sentences == want.sentences and got.n_capped == want.n_capped > 0
        assert (got.n_read, got.n_sampled_out, got.n_too_long, got.sha256) == (
            want.n_read,
            want.n_sampled_out,
            want.n_too_long,
            want.sha256,
        )
        enc = merge_encoded(parts)
        for f in ("ids", "special", "starts", "lengths", "word_type", "word_occ"):
            np.testing.assert_array_equal(getattr(enc, f), getattr(whole, f), err_msg=f)
        assert enc.words == whole.words and enc.n_truncated == whole.n_truncated
