"""Sentences → padded token batches → hidden states (the embeddings f(s, t) of the study's §3).

``make_batches`` tokenizes every sentence once (``TOKENIZE_CHUNK`` sentences per tokenizer call,
kept as flat arrays) with the model's own special tokens (BERT
[CLS]…[SEP], RoBERTa <s>…</s>, Llama/Gemma BOS as the tokenizer adds it; a tokenizer that adds
none but has BOS/EOS — GPT-2 — is wrapped as <|endoftext|>…<|endoftext|>, as in the study's
App. B), truncates to ``max_length`` keeping the special tokens, sorts by length (longest first,
stable) and cuts batches under a token budget. ``extract`` runs one forward pass and returns
every kept position as ``states`` (L, N, d) with its ``token_ids`` (N,), ready for
``TokenMoments.update``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from normvar_core.errors import NormvarError

DEFAULT_MAX_TOKENS = {"cpu": 16384, "mps": 16384, "cuda": 65536}


@dataclass
class Batch:
    """One padded batch. ``indices``: positions in the input sentence list; ``input_ids`` /
    ``attention_mask`` (B, T) int64; ``special_mask`` (B, T) bool, True where the tokenizer (or
    the GPT-2 style wrap) added a special token; ``padding_side``: "right" or "left"."""

    indices: np.ndarray
    input_ids: Any
    attention_mask: Any
    special_mask: Any
    padding_side: str = "right"

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def n_tokens(self) -> int:
        return int(self.attention_mask.sum())

    def split(self) -> tuple["Batch", "Batch"]:
        """Two halves (for an out-of-memory retry), padding trimmed to each half's longest row."""
        if len(self) < 2:
            raise ValueError("cannot split a batch of one sentence")
        h = len(self) // 2
        return self.subset(0, h), self.subset(h, len(self))

    def subset(self, start: int, stop: int) -> "Batch":
        """Rows [start, stop), padding columns trimmed to the longest kept row."""
        am = self.attention_mask[start:stop]
        width = int(am.sum(1).max())
        cols = slice(0, width) if self.padding_side == "right" else slice(am.shape[1] - width, None)
        return Batch(self.indices[start:stop], self.input_ids[start:stop, cols], am[:, cols],
                     self.special_mask[start:stop, cols], self.padding_side)


def wrap_tokens(tokenizer) -> tuple[int | None, int | None]:
    """(bos, eos) ids to add around each sentence, or (None, None).

    Wrapped: a tokenizer that adds no special token itself and has one document separator
    (bos == eos, or only one of them) — GPT-2's <|endoftext|> on both ends, as the study does.
    Not wrapped: tokenizers that add their own (BERT, RoBERTa, Llama/Gemma BOS), and those
    whose distinct bos/eos are chat-turn markers (SmolLM2-Instruct: <|im_start|>/<|im_end|>),
    which keep their own behaviour (no BOS: the first word is position 0)."""
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


def encode_sentences(sentences: Sequence[str], tokenizer, *, max_length: int, wrap: str = "auto",
                     chunk: int | None = None) -> Encoded:
    """Tokenize ``sentences`` ``chunk`` at a time (with the model's special tokens; wrapped as
    ``wrap_tokens`` says; over ``max_length`` truncated keeping the special tokens) into flat arrays.
    Each sentence is encoded on its own, so any chunk size gives the same arrays."""
    from itertools import chain

    bos, eos = wrap_tokens(tokenizer) if wrap == "auto" else (None, None)
    n = len(sentences)
    lengths = np.zeros(n, np.int64)
    id_parts: list[np.ndarray] = []
    sp_parts: list[np.ndarray] = []
    n_truncated = 0
    chunk = max(1, int(chunk or TOKENIZE_CHUNK))
    for a in range(0, n, chunk):
        enc = tokenizer(list(sentences[a:a + chunk]), add_special_tokens=True, return_special_tokens_mask=True,
                        return_attention_mask=False, truncation=False, verbose=False)
        seqs, specs = [], []
        for ids, sp in zip(enc["input_ids"], enc["special_tokens_mask"]):
            if bos is not None:
                ids, sp = [bos, *ids, eos], [1, *sp, 1]
            if len(ids) > max_length:
                ids, sp = _truncate(ids, sp, max_length)
                n_truncated += 1
            seqs.append(ids)
            specs.append(sp)
        del enc
        lengths[a:a + len(seqs)] = [len(x) for x in seqs]
        total = int(lengths[a:a + len(seqs)].sum())
        id_parts.append(np.fromiter(chain.from_iterable(seqs), np.int64, count=total))
        sp_parts.append(np.fromiter(chain.from_iterable(specs), np.uint8, count=total))
    starts = np.zeros(n, np.int64)
    if n:
        np.cumsum(lengths[:-1], out=starts[1:])
    ids = np.concatenate(id_parts) if id_parts else np.zeros(0, np.int64)
    del id_parts
    special = np.concatenate(sp_parts).astype(bool) if sp_parts else np.zeros(0, bool)
    return Encoded(ids, special, starts, lengths, n_truncated)


def make_batches(sentences: Sequence[str], tokenizer, *, max_length: int, batch_size: int | None = None,
                 max_tokens: int | None = None, wrap: str = "auto",
                 chunk: int | None = None) -> tuple[list[Batch], int]:
    """Tokenize, wrap, truncate, sort and batch; returns (batches, n_truncated).

    ``batch_size``: sentences per batch; else a token budget ``max_tokens`` (rows × padded
    width, default 16384). ``wrap``: "auto" (see ``wrap_tokens``) or "none". ``chunk``: sentences
    per tokenizer call (default ``TOKENIZE_CHUNK``; the result does not depend on it). Deterministic."""
    import torch

    if max_length < 2:
        raise NormvarError(f"max_length must be >= 2, got {max_length}", fix="omit it to use the model's maximum")
    if not len(sentences):
        return [], 0
    enc = encode_sentences(sentences, tokenizer, max_length=max_length, wrap=wrap, chunk=chunk)
    lengths = enc.lengths
    order = np.argsort(-lengths, kind="stable")
    budget = int(max_tokens or DEFAULT_MAX_TOKENS["cpu"])
    groups: list[np.ndarray] = []
    start = 0
    while start < len(order):
        if batch_size:
            stop = min(start + int(batch_size), len(order))
        else:
            width = int(lengths[order[start]])  # longest first: the first row sets the width
            stop = min(start + max(1, budget // max(width, 1)), len(order))
        groups.append(order[start:stop])
        start = stop
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        pad_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    side = "left" if getattr(tokenizer, "padding_side", "right") == "left" else "right"
    batches = []
    for g in groups:
        width = int(lengths[g].max())
        ids_arr = np.full((len(g), width), pad_id, dtype=np.int64)
        am = np.zeros((len(g), width), dtype=np.int64)
        sp = np.zeros((len(g), width), dtype=bool)
        for r, i in enumerate(g):
            n, a = int(lengths[i]), int(enc.starts[i])
            cols = slice(0, n) if side == "right" else slice(width - n, width)
            ids_arr[r, cols] = enc.ids[a:a + n]
            am[r, cols] = 1
            sp[r, cols] = enc.special[a:a + n]
        batches.append(Batch(g.astype(np.int64), torch.from_numpy(ids_arr), torch.from_numpy(am),
                             torch.from_numpy(sp), side))
    return batches, enc.n_truncated


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


def _position_ids_needed(model) -> bool:
    """Left padding needs explicit position ids unless the model derives them from pad ids
    (RoBERTa/MPNet embeddings carry ``padding_idx``)."""
    import inspect

    if "position_ids" not in inspect.signature(model.forward).parameters:
        return False
    emb = getattr(model, "embeddings", None)
    return not isinstance(getattr(emb, "padding_idx", None), int)


def first_position(batch: Batch):
    """(B,) column of each row's first real token (left or right padding)."""
    return batch.attention_mask.bool().int().argmax(dim=1)


def counted_mask(batch: Batch, *, exclude_special: bool = False, exclude_position0: bool = False):
    """Bool (B, W): the positions whose embeddings count — attended positions, minus special
    tokens and/or each sentence's first real position when asked. The one definition shared by
    ``extract``, the token counts and the sample plan."""
    import torch

    keep = batch.attention_mask.bool().clone()
    if exclude_special:
        keep &= ~batch.special_mask.bool()
    if exclude_position0:
        keep[torch.arange(keep.shape[0]), first_position(batch)] = False
    return keep


def extract(loaded, batch: Batch, *, exclude_special: bool = False, exclude_position0: bool = False,
            layers: Sequence[int] | None = None):
    """One forward pass; returns (states (L_kept, N, d) on the model's device and dtype,
    token_ids (N,) int64). Padding is dropped through the attention mask (either side);
    position 0 is the first real token of each row, whatever the padding side."""
    import torch

    model = loaded.model
    device = next(model.parameters()).device
    ids = batch.input_ids.to(device)
    am = batch.attention_mask.to(device)
    kwargs = {}
    if batch.padding_side == "left":
        need = loaded.extra.get("position_ids") if hasattr(loaded, "extra") else None
        if need is None:
            need = _position_ids_needed(model)
            if hasattr(loaded, "extra"):
                loaded.extra["position_ids"] = need
        if need:
            kwargs["position_ids"] = (am.cumsum(1) - 1).clamp(min=0)
    with torch.inference_mode():
        hs = model(input_ids=ids, attention_mask=am, output_hidden_states=True, **kwargs).hidden_states
        idx = list(range(len(hs))) if layers is None else [int(x) for x in layers]
        bad = [x for x in idx if not 0 <= x < len(hs)]
        if bad:
            raise NormvarError(f"layer(s) {bad} out of range: the model has hidden states 0..{len(hs) - 1}",
                               fix=f"pass --layers within 0..{len(hs) - 1}")
        keep = counted_mask(batch, exclude_special=exclude_special,
                            exclude_position0=exclude_position0).to(device)
        states = torch.stack([hs[i][keep] for i in idx])
        token_ids = ids[keep].long()
    return states, token_ids


def is_oom(exc: BaseException) -> bool:
    """True for out-of-memory errors (CUDA, MPS, CPU allocator): retry with half the batch."""
    import torch

    oom_type = getattr(torch.cuda, "OutOfMemoryError", None)
    if isinstance(exc, MemoryError) or (oom_type is not None and isinstance(exc, oom_type)):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def auto_max_tokens(device: str) -> int:
    """Token budget per batch for ``make_batches`` on this device type."""
    return DEFAULT_MAX_TOKENS.get(str(device).split(":")[0], DEFAULT_MAX_TOKENS["cpu"])
