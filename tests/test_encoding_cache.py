"""The kept tokenization (``encoding_cache``): a second plan reads exactly the arrays a fresh tokenization gives
(and so the same counts, picks and TwoNN sample), a damaged or foreign entry is ignored and written anew, nothing
is ever unpickled, and a key changes with the sentences, the tokenizer's definition and ``max_length``."""

from __future__ import annotations

import gzip
import itertools

import numpy as np
import pytest

from normvar_core.config import RunConfig
from normvar_core.datadir import DEFAULT_CORPUS
from normvar_core.pipeline import encoding as E
from normvar_core.pipeline import encoding_cache as C
from normvar_core.pipeline.run_plan import corpus_of, make_plan


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        lines = [line.strip() for line in itertools.islice(fh, 300) if line.strip()]
    return lines[:200] + [" ".join(lines[200:215]), "A", "Ünïcödé — “quoted” naïve café."]


@pytest.fixture(scope="module")
def tok(minilm_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(minilm_path))


def _same_encoding(a: E.Encoded, b: E.Encoded) -> None:
    for f in ("ids", "special", "starts", "lengths"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f
    assert a.n_truncated == b.n_truncated


def _entries(folder):
    return sorted(folder.glob(f"*{C.SUFFIX}"))


def test_the_kept_tokenization_is_the_fresh_one(sentences, tok, tmp_path, monkeypatch):
    fresh = E.encode_sentences(sentences, tok, max_length=24)
    assert fresh.n_truncated >= 1
    first = C.encode_cached(sentences, tok, max_length=24, unit="token", folder=tmp_path)
    _same_encoding(first, fresh)
    (entry,) = _entries(tmp_path)
    calls = []
    monkeypatch.setattr(C, "encode_sentences", lambda *a, **k: calls.append(1))
    again = C.encode_cached(sentences, tok, max_length=24, unit="token", folder=tmp_path)
    assert calls == []  # read back, not tokenized
    _same_encoding(again, fresh)
    assert not list(tmp_path.glob("*.tmp"))  # published by os.replace, no temporary left


def test_a_plan_from_the_kept_tokenization_is_the_same_plan(sentences, tok, tmp_path):
    cfg = RunConfig(model="minilm", max_length=24, exclude_position0=True, samples_per_token=3, id_sample=300)
    corpus = corpus_of(sentences, name="t", sha256="x")
    plain = make_plan(cfg, corpus, tok, num_hidden_states=7, max_length=512)
    cold = make_plan(cfg, corpus, tok, num_hidden_states=7, max_length=512, cache=tmp_path)
    warm = make_plan(cfg, corpus, tok, num_hidden_states=7, max_length=512, cache=tmp_path)
    assert len(_entries(tmp_path)) == 1
    for p in (cold, warm):
        assert np.array_equal(p.token_ids, plain.token_ids) and np.array_equal(p.counts, plain.counts)
        assert p.tokens == plain.tokens and p.fingerprint() == plain.fingerprint()
        for a, b in ((p.samples, plain.samples), (p.uniform, plain.uniform)):
            for f in ("token_ids", "i", "batch", "sentence", "offset", "char_start", "char_end"):
                assert np.array_equal(getattr(a, f), getattr(b, f)), f


@pytest.mark.parametrize(
    "damage",
    ["truncated", "garbage", "empty", "wrong_lengths", "pickled_object"],
)
def test_a_damaged_entry_is_ignored_and_written_anew(sentences, tok, tmp_path, damage):
    fresh = C.encode_cached(sentences, tok, max_length=24, unit="token", folder=tmp_path)
    (entry,) = _entries(tmp_path)
    raw = entry.read_bytes()
    if damage == "truncated":
        entry.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        entry.write_bytes(b"\x00not a zip" * 100)
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "wrong_lengths":  # a whole file whose arrays do not fit these sentences
        with open(entry, "wb") as fh:
            np.savez(fh, ids=np.arange(5), special=np.zeros(5, bool), lengths=np.array([5]), n_truncated=np.int64(0))
    else:  # an object array (it would need pickle): refused by allow_pickle=False, never loaded
        with open(entry, "wb") as fh:
            np.savez(
                fh,
                ids=np.array([object()], dtype=object),
                special=np.zeros(1, bool),
                lengths=np.array([1]),
                n_truncated=np.int64(0),
            )
    assert C.read_entry(entry, len(sentences)) is None
    again = C.encode_cached(sentences, tok, max_length=24, unit="token", folder=tmp_path)
    _same_encoding(again, fresh)
    assert C.read_entry(entry, len(sentences)) is not None  # written anew


def test_the_key_follows_what_the_arrays_depend_on(sentences, tok, minilm_path):
    from transformers import AutoTokenizer

    key = C.cache_key(sentences, tok, max_length=24)
    assert key == C.cache_key(list(sentences), AutoTokenizer.from_pretrained(str(minilm_path)), max_length=24)
    assert key != C.cache_key(sentences, tok, max_length=25)
    assert key != C.cache_key(sentences[:-1], tok, max_length=24)
    assert key != C.cache_key([*sentences[:-1], sentences[-1] + " "], tok, max_length=24)
    assert key != C.cache_key(["ab", "c"], tok, max_length=24) != C.cache_key(["a", "bc"], tok, max_length=24)
    other = AutoTokenizer.from_pretrained(str(minilm_path))
    other.add_tokens(["zzqx"])  # another vocabulary: another tokenizer definition
    assert key != C.cache_key(sentences, other, max_length=24)


def test_word_runs_slow_tokenizers_and_no_folder_are_not_kept(sentences, tok, tmp_path):
    C.encode_cached(sentences, tok, max_length=24, unit="word", folder=tmp_path)
    C.encode_cached(sentences, tok, max_length=24, unit="token", folder=None)
    assert _entries(tmp_path) == []

    class Slow:
        is_fast = False

    assert C.cache_key(sentences, Slow(), max_length=24) is None


def test_an_unwritable_folder_only_costs_the_tokenization(sentences, tok, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("in the way")
    enc = C.encode_cached(sentences, tok, max_length=24, unit="token", folder=blocked / "tokenized")
    _same_encoding(enc, E.encode_sentences(sentences, tok, max_length=24))


def test_at_most_keep_entries(sentences, tok, tmp_path, monkeypatch):
    monkeypatch.setattr(C, "KEEP", 2)
    for k in range(4):
        C.encode_cached(sentences[: 10 + k], tok, max_length=24, unit="token", folder=tmp_path)
    assert len(_entries(tmp_path)) == 2


def test_a_link_or_a_fifo_at_an_entry_or_its_temporary_name_is_never_followed(sentences, tok, tmp_path):
    """A symbolic link or a FIFO where an entry (or the temporary name it is written under) stands: read as no entry
    at once (a FIFO is not waited on), the link replaced by the entry itself, its target untouched."""
    import os

    first = tmp_path / "first"
    fresh = C.encode_cached(sentences, tok, max_length=24, unit="token", folder=first)
    (entry,) = _entries(first)
    other = tmp_path / "another-program.db"
    other.write_bytes(b"not normvar's")
    folder = tmp_path / "kept"
    folder.mkdir()
    link = folder / entry.name
    link.symlink_to(other)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert C.read_entry(link, len(sentences)) is None and C.read_entry(fifo, len(sentences)) is None
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")  # the name write_entry publishes through
    tmp.symlink_to(other)
    _same_encoding(C.encode_cached(sentences, tok, max_length=24, unit="token", folder=folder), fresh)
    assert other.read_bytes() == b"not normvar's" and tmp.is_symlink()  # neither written through nor removed
    assert link.is_symlink()  # the temporary name was taken: nothing published
    tmp.unlink()
    C.encode_cached(sentences, tok, max_length=24, unit="token", folder=folder)
    assert not link.is_symlink() and C.read_entry(link, len(sentences)) is not None
    assert other.read_bytes() == b"not normvar's"
