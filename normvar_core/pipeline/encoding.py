"""Sentences → flat token ids: every sentence tokenized once with the model's special tokens, kept as flat
arrays (``Encoded``: 9 bytes a token, no Python objects).

``encode_sentences`` tokenizes ``TOKENIZE_CHUNK`` sentences per tokenizer call with the model's own
special tokens (BERT [CLS]…[SEP], RoBERTa <s>…</s>, Llama/Gemma BOS as the tokenizer adds it; a
tokenizer that adds none but has BOS/EOS — GPT-2 — is wrapped as <|endoftext|>…<|endoftext|>, as in
the study's App. B) and truncates to ``max_length`` keeping the special tokens; ``unit="word"`` also
gives App. J's words (``word_units``). ``batches.batches_from`` cuts the padded batches from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from normvar_core.errors import NormvarError


def wrap_tokens(tokenizer) -> tuple[int | None, int | None]:
    """(bos, eos) ids to add around each sentence, or (None, None).

    Wrapped: a tokenizer that adds no special token itself and has one document separator
    (bos == eos, or only one of them) — GPT-2's <|endoftext|> on both ends, as the study does.
    Not wrapped: tokenizers that add their own (BERT, RoBERTa, Llama/Gemma BOS), and those
    whose distinct bos/eos are chat-turn markers (SmolLM2-Instruct: <|im_start|>/<|im_end|>),
    which keep their own behaviour (no BOS: the first word is position 0). An encoder-decoder's
    decoder stack (``tokenizer.normvar_decoder_start`` set by ``encdec.select_stack``): (start, None),
    the start token before the tokenizer's own encoding."""
    start = getattr(tokenizer, "normvar_decoder_start", None)
    if start is not None:  # an encoder-decoder's decoder stack: [start] + the sentence (pipeline/models/encdec.py)
        return int(start), None
    probe = "a"
    with_sp = tokenizer(probe, add_special_tokens=True)["input_ids"]
    without = tokenizer(probe, add_special_tokens=False)["input_ids"]
    if len(with_sp) != len(without):
        return None, None
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    if bos is None and eos is None:
        return None, None
    if bos is not None and eos is not None and bos != eos:
        return None, None
    sep = bos if bos is not None else eos
    return sep, sep


TOKENIZE_CHUNK = 4096
"""Sentences tokenized per tokenizer call by ``make_batches``: the tokenizer's Python lists exist for
one chunk at a time; the whole corpus is held only as flat int64 ids + uint8 special flags."""


@dataclass
class Encoded:
    """Every sentence's model input, flat: sentence i is ``ids[starts[i]:starts[i] + lengths[i]]``
    (wrapped and truncated), ``special`` its special-token flags. 9 bytes a token, no Python objects."""

    ids: np.ndarray
    special: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    n_truncated: int
    word_type: np.ndarray | None = None
    """Word runs: per token, its word's type id (an index into ``words``), -1 outside counted words."""
    word_occ: np.ndarray | None = None
    words: list[str] | None = None
    """Word runs: the word types' strings, in order of first appearance in the corpus."""


def encode_sentences(
    sentences: Sequence[str],
    tokenizer,
    *,
    max_length: int,
    wrap: str = "auto",
    chunk: int | None = None,
    unit: str = "token",
) -> Encoded:
    """Tokenize ``sentences`` ``chunk`` at a time (with the model's special tokens; wrapped as
    ``wrap_tokens`` says; over ``max_length`` truncated keeping the special tokens) into flat arrays.
    Each sentence is encoded on its own, so any chunk size gives the same arrays. ``unit="word"``:
    also the words of App. J (``word_units``)."""
    from itertools import chain

    bos, eos = wrap_tokens(tokenizer) if wrap == "auto" else (None, None)
    n = len(sentences)
    lengths = np.zeros(n, np.int64)
    id_parts: list[np.ndarray] = []
    sp_parts: list[np.ndarray] = []
    n_truncated = 0
    chunk = max(1, int(chunk or TOKENIZE_CHUNK))
    words: dict[str, int] | None = {} if unit == "word" else None
    if words is not None and not getattr(tokenizer, "is_fast", False):
        raise NormvarError(
            "--unit word needs a fast tokenizer (its word ids); this model's tokenizer is slow",
            fix="use --unit token, or a model with a tokenizer.json",
        )
    wt_parts: list[np.ndarray] = []
    wo_parts: list[np.ndarray] = []
    for a in range(0, n, chunk):
        part = list(sentences[a : a + chunk])
        cut = [s if words is not None else word_prefix(s, max_length) for s in part]
        enc = None if words is not None else _rust_encode(tokenizer, cut)
        if enc is None:
            enc = tokenizer(
                cut,
                add_special_tokens=True,
                return_special_tokens_mask=True,
                return_attention_mask=False,
                truncation=False,
                verbose=False,
                return_offsets_mapping=words is not None,
            )
        seqs, specs = [], []
        for r, (ids, sp) in enumerate(zip(enc["input_ids"], enc["special_tokens_mask"])):
            if cut[r] is not part[r] and len(ids) <= max_length:  # the prefix fell short: the whole sentence
                whole = tokenizer(part[r], add_special_tokens=True, return_special_tokens_mask=True, verbose=False)
                ids, sp = whole["input_ids"], whole["special_tokens_mask"]
            wid = word_units(enc, r, part[r], words) if words is not None else None
            if bos is not None:
                tail = [] if eos is None else [eos]
                ids, sp = [bos, *ids, *tail], [1, *sp, *([1] * len(tail))]
                wid = None if wid is None else ([(-1, -1)] + wid + [(-1, -1)] * len(tail))
            if len(ids) > max_length:
                if wid is not None:
                    wid = _truncate_words(wid, sp, max_length)
                ids, sp = _truncate(ids, sp, max_length)
                n_truncated += 1
            seqs.append(ids)
            specs.append(sp)
            if wid is not None:
                wt_parts.append(np.asarray([w for w, _ in wid], np.int64))
                wo_parts.append(np.asarray([o for _, o in wid], np.int64))
        del enc
        lengths[a : a + len(seqs)] = [len(x) for x in seqs]
        total = int(lengths[a : a + len(seqs)].sum())
        id_parts.append(np.fromiter(chain.from_iterable(seqs), np.int64, count=total))
        sp_parts.append(np.fromiter(chain.from_iterable(specs), np.uint8, count=total))
    starts = np.zeros(n, np.int64)
    if n:
        np.cumsum(lengths[:-1], out=starts[1:])
    ids = np.concatenate(id_parts) if id_parts else np.zeros(0, np.int64)
    del id_parts
    special = np.concatenate(sp_parts).astype(bool) if sp_parts else np.zeros(0, bool)
    if words is None:
        return Encoded(ids, special, starts, lengths, n_truncated)
    e = np.zeros(0, np.int64)
    return Encoded(
        ids,
        special,
        starts,
        lengths,
        n_truncated,
        word_type=np.concatenate(wt_parts) if wt_parts else e,
        word_occ=np.concatenate(wo_parts) if wo_parts else e,
        words=list(words),
    )


def _rust_encode(tokenizer, texts: list[str], offsets: bool = False) -> Any:
    """``tokenizer(texts, add_special_tokens=True, return_special_tokens_mask=True, truncation=False)``'s ids and
    special-token masks read straight from the Rust tokenizer's encodings (a third of the CPU time less: no
    per-sentence dict of Python lists, no attention mask); None where that call may do more than the Rust encode
    (a tokenizer class with its own ``__call__`` or ``_encode_plus``; a slow tokenizer). The ordinary call is made
    on the first text first (it sets the Rust tokenizer's truncation, padding and special-token splitting as it
    always does), and must give the same ids and mask as the direct encode, else None. ``offsets``: with the
    ``offset_mapping`` too (``return_offsets_mapping=True``)."""
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:  # another transformers layout: the ordinary call
        return None
    cls = type(tokenizer)
    if (
        not texts
        or not isinstance(tokenizer, TokenizersBackend)
        or cls.__call__ is not PreTrainedTokenizerBase.__call__
        or cls._encode_plus is not TokenizersBackend._encode_plus
    ):
        return None
    kw = dict(add_special_tokens=True, return_special_tokens_mask=True, return_attention_mask=False, verbose=False)
    probe = tokenizer(texts[:1], truncation=False, **kw)
    backend: Any = tokenizer._tokenizer
    if backend.truncation is not None or backend.padding is not None:
        return None
    encode = backend.encode_batch if offsets else getattr(backend, "encode_batch_fast", None) or backend.encode_batch
    out = encode(texts, add_special_tokens=True)
    ids = [e.ids for e in out]
    special = [e.special_tokens_mask for e in out]
    if ids[0] != list(probe["input_ids"][0]) or special[0] != list(probe["special_tokens_mask"][0]):
        return None
    if offsets:
        return {"input_ids": ids, "special_tokens_mask": special, "offset_mapping": [e.offsets for e in out]}
    return {"input_ids": ids, "special_tokens_mask": special}


rust_encode = _rust_encode


def word_units(enc, row: int, sentence: str, words: dict[str, int]) -> list[tuple[int, int]]:
    """App. J's words of one encoded sentence: per token (word type, word index in the sentence), or
    (-1, -1) for special tokens. A word is the fast tokenizer's word id; its type is its text, the
    sentence's characters from its first token's start to its last token's end (new types get the
    next id of ``words``, so ids follow first appearance and do not depend on chunking)."""
    wids = enc.word_ids(row)
    offs = enc["offset_mapping"][row]
    span: dict[int, list[int]] = {}
    for w, (s0, s1) in zip(wids, offs):
        if w is not None:
            sp = span.setdefault(w, [s0, s1])
            sp[0], sp[1] = min(sp[0], s0), max(sp[1], s1)
    out = []
    for w in wids:
        if w is None:
            out.append((-1, -1))
            continue
        text = sentence[span[w][0] : span[w][1]]
        out.append((words.setdefault(text, len(words)), int(w)))
    return out


LONG_CHARS = 32
"""A sentence over ``LONG_CHARS * max_length`` characters is tokenized from a prefix (``word_prefix``)."""


def word_prefix(sentence: str, max_length: int) -> str:
    """``sentence`` itself, or — when it is over ``LONG_CHARS * max_length`` characters — its first
    ``max_length + 1`` whitespace words: a tokenizer splits at whitespace first, so the tokens of those words are
    the first tokens of the whole sentence, and more than ``max_length`` of them means the truncation keeps the
    same ones (``encode_sentences`` checks the count and tokenizes the whole sentence when the prefix falls
    short). A 10 MB line is never tokenized whole for a model that keeps 64 tokens."""
    if len(sentence) <= LONG_CHARS * max_length:
        return sentence
    import re

    end = 0
    for i, m in enumerate(re.finditer(r"\S+", sentence)):
        end = m.end()
        if i >= max_length:
            return sentence[:end]
    return sentence


def _truncate_words(wid: list[tuple[int, int]], sp: list[int], max_length: int) -> list[tuple[int, int]]:
    """The words of a truncated sentence (``_truncate``'s cut): a word cut by the truncation is dropped
    (its tokens get (-1, -1)), never half-pooled."""
    kept = _truncate([i for i in range(len(wid))], sp, max_length)[0]
    out = [wid[k] for k in kept]
    kept_set = set(kept)
    cut = {wid[k][1] for k in range(len(wid)) if k not in kept_set and wid[k][1] >= 0}
    return [(-1, -1) if o in cut else (w, o) for w, o in out]


def _truncate(ids: list[int], sp: list[int], max_length: int) -> tuple[list[int], list[int]]:
    """Cut the content, keep the leading and trailing special tokens (as HF truncation does)."""
    lead = 0
    while lead < len(sp) and sp[lead]:
        lead += 1
    trail = 0
    while trail < len(sp) - lead and sp[len(sp) - 1 - trail]:
        trail += 1
    room = max(max_length - lead - trail, 0)
    keep = list(range(lead)) + list(range(lead, lead + room)) + list(range(len(ids) - trail, len(ids)))
    keep = keep[:max_length] if len(keep) > max_length else keep
    return [ids[k] for k in keep], [sp[k] for k in keep]


__all__ = ["Encoded", "encode_sentences", "wrap_tokens", "word_units", "TOKENIZE_CHUNK"]
