"""Flat token ids → padded token batches → hidden states (the embeddings f(s, t) of the study's §3).

``make_batches`` tokenizes every sentence once (``encoding.encode_sentences``: the model's own special
tokens, truncated to ``max_length``), sorts by length (longest first, stable) and cuts batches under a
token budget (``batches_from``; ``PaddedBatches`` pads each batch when it is asked for). ``extract``
runs one forward pass and returns every kept position as ``states`` (L, N, d) with its ``token_ids``
(N,), ready for ``TokenMoments.update``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from normvar_core.errors import NormvarError
from normvar_core.pipeline.encoding import Encoded, encode_sentences
from normvar_core.pipeline.models.device_map import input_device

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
    word_type: Any = None
    """Word runs (App. J): (B, T) int64, the word type of every token of a counted word, else -1."""
    word_occ: Any = None
    """Word runs: (B, T) int64, the word's index in its sentence (the fast tokenizer's word id), else -1."""

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def n_tokens(self) -> int:
        return int(self.attention_mask.sum())

    def split(self) -> tuple[Batch, Batch]:
        """Two halves (for an out-of-memory retry), padding trimmed to each half's longest row."""
        if len(self) < 2:
            raise ValueError("cannot split a batch of one sentence")
        h = len(self) // 2
        return self.subset(0, h), self.subset(h, len(self))

    def subset(self, start: int, stop: int) -> Batch:
        """Rows [start, stop), padding columns trimmed to the longest kept row."""
        am = self.attention_mask[start:stop]
        width = int(am.sum(1).max())
        cols = slice(0, width) if self.padding_side == "right" else slice(am.shape[1] - width, None)
        words = (
            {}
            if self.word_type is None
            else dict(word_type=self.word_type[start:stop, cols], word_occ=self.word_occ[start:stop, cols])
        )
        return Batch(
            self.indices[start:stop],
            self.input_ids[start:stop, cols],
            am[:, cols],
            self.special_mask[start:stop, cols],
            self.padding_side,
            **words,
        )


def make_batches(
    sentences: Sequence[str],
    tokenizer,
    *,
    max_length: int,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    wrap: str = "auto",
    chunk: int | None = None,
) -> tuple[PaddedBatches | list[Batch], int]:
    """Tokenize, wrap, truncate, sort and batch; returns (batches, n_truncated).

    ``batch_size``: sentences per batch; else a token budget ``max_tokens`` (rows × padded
    width, default 16384). ``wrap``: "auto" (see ``wrap_tokens``) or "none". ``chunk``: sentences
    per tokenizer call (default ``TOKENIZE_CHUNK``; the result does not depend on it). Deterministic."""

    if max_length < 2:
        raise NormvarError(f"max_length must be >= 2, got {max_length}", fix="omit it to use the model's maximum")
    if not len(sentences):
        return [], 0
    enc = encode_sentences(sentences, tokenizer, max_length=max_length, wrap=wrap, chunk=chunk)
    return batches_from(enc, tokenizer, batch_size=batch_size, max_tokens=max_tokens), enc.n_truncated


def batches_from(
    enc: Encoded, tokenizer, *, batch_size: int | None = None, max_tokens: int | None = None
) -> PaddedBatches:
    """``make_batches`` after the tokenization: sort by length (longest first, stable) and cut batches."""
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
    return PaddedBatches(enc, groups, int(pad_id), side)


class PaddedBatches(Sequence):
    """The plan's batches, each padded ``Batch`` built when it is asked for from the flat encoding
    (9 bytes a token) instead of all of them held padded; sizes and token counts without building.
    Building is deterministic, so a batch built twice (planning, then the pass) is the same batch."""

    def __init__(self, enc: Encoded, groups: list[np.ndarray], pad_id: int, side: str):
        self.enc = enc
        self.groups = groups
        self.pad_id, self.side = pad_id, side
        self._shapes: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.groups)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._build(self.groups[i])

    def sizes(self) -> np.ndarray:
        """Sentences per batch."""
        return np.array([len(g) for g in self.groups], np.int64)

    def token_counts(self) -> np.ndarray:
        """Real (non-padding) tokens per batch."""
        return self.shapes()[2]

    def shapes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, padded width, real tokens) of every batch, without building them: vectorised over every batch
        and kept (the memory plan asks once per batch size and measure, ``plan --devices`` down to
        ``--batch-size 1``)."""
        if self._shapes is None:
            sizes = self.sizes()
            width, total = np.zeros(sizes.size, np.int64), np.zeros(sizes.size, np.int64)
            if sizes.size and int(sizes.sum()):
                lens = self.enc.lengths[np.concatenate(self.groups).astype(np.int64)].astype(np.int64)
                nonempty = sizes > 0
                starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])[nonempty]
                width[nonempty] = np.maximum.reduceat(lens, starts)
                total[nonempty] = np.add.reduceat(lens, starts)
            self._shapes = (sizes, width, total)
        return tuple(a.copy() for a in self._shapes)  # type: ignore[return-value]  # three arrays

    def _build(self, g: np.ndarray) -> Batch:
        import torch

        enc = self.enc
        n = enc.lengths[g].astype(np.int64)
        width = int(n.max())
        col = np.arange(width)[None, :]
        pad = (width - n)[:, None] if self.side == "left" else np.zeros((len(g), 1), np.int64)
        real = (col >= pad) & (col < pad + n[:, None])  # (rows, width): the real tokens
        src = (enc.starts[g].astype(np.int64)[:, None] + col - pad)[real]  # their places in the flat arrays

        def padded(flat: np.ndarray, fill, dtype) -> np.ndarray:
            out = np.full((len(g), width), fill, dtype=dtype)
            out[real] = flat[src]
            return out

        ids_arr = padded(enc.ids, self.pad_id, np.int64)
        am = real.astype(np.int64)
        sp = padded(enc.special, False, bool)
        words = (
            {}
            if enc.word_type is None
            else dict(
                word_type=torch.from_numpy(padded(enc.word_type, -1, np.int64)),
                word_occ=torch.from_numpy(padded(enc.word_occ, -1, np.int64)),  # type: ignore[arg-type]  # word_occ comes with word_type
            )
        )
        return Batch(
            g.astype(np.int64),
            torch.from_numpy(ids_arr),
            torch.from_numpy(am),
            torch.from_numpy(sp),
            self.side,
            **words,
        )


def batch_sizes(batches) -> np.ndarray:
    """Sentences per batch, for PaddedBatches (without building them) or any list of Batch."""
    return batches.sizes() if hasattr(batches, "sizes") else np.array([len(b) for b in batches], np.int64)


def batch_token_counts(batches) -> np.ndarray:
    """Real tokens per batch, for PaddedBatches (without building them) or any list of Batch."""
    return (
        batches.token_counts()
        if hasattr(batches, "token_counts")
        else np.array([b.n_tokens for b in batches], np.int64)
    )


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
    if batch.word_occ is not None:  # word runs: a word counts once, at its first token
        keep &= word_starts(batch)
    return keep


def word_starts(batch: Batch):
    """Bool (B, W): the first token of each counted word (word runs)."""
    import torch

    occ = torch.as_tensor(batch.word_occ)
    prev = torch.cat([torch.full_like(occ[:, :1], -1), occ[:, :-1]], dim=1)
    return (occ >= 0) & (occ != prev)


def unit_ids(batch: Batch):
    """(B, W) int64: what a position counts as — its token id, or in word runs its word type."""
    import torch

    return torch.as_tensor(batch.word_type if batch.word_type is not None else batch.input_ids).to(torch.int64)


def word_members(batch: Batch, keep):
    """(member (B, W) bool, group (n_tokens,), n_words): the tokens of the words whose first token is in
    ``keep``, and for each the index of its word among those, in ``keep``'s row-major order."""
    import torch

    occ = torch.as_tensor(batch.word_occ).to(keep.device)
    rows = torch.arange(occ.shape[0], device=keep.device)[:, None].expand_as(occ)
    key = rows * (occ.shape[1] + 1) + occ  # a word occurrence, row-major ordered
    first_keys = key[keep]
    member = (occ >= 0) & torch.isin(key, first_keys)
    return member, torch.searchsorted(first_keys, key[member]), int(first_keys.numel())


def pool_words(states, batch: Batch, keep):
    """App. J, eq. 33: x_w = the mean of the word's token states, for the words whose first token is in
    ``keep`` (``counted_mask``), in its row-major order. ``states``: (L, B, W, d) on any device."""
    import torch

    member, group, n_words = word_members(batch, keep)
    x = states[:, member]  # (L, n_tokens, d)
    sums = torch.zeros((x.shape[0], n_words, x.shape[2]), dtype=torch.float64, device=x.device)
    sums.index_add_(1, group, x.to(torch.float64))
    count = torch.bincount(group, minlength=n_words).to(torch.float64)
    return (sums / count[None, :, None]).to(states.dtype)


def extract(
    loaded,
    batch: Batch,
    *,
    exclude_special: bool = False,
    exclude_position0: bool = False,
    layers: Sequence[int] | None = None,
    groups: Sequence | None = None,
):
    """One forward pass; returns (states (L_kept, N, d) on the model's device and dtype,
    token_ids (N,) int64). Padding is dropped through the attention mask (either side);
    position 0 is the first real token of each row, whatever the padding side. ``groups`` (--device-map):
    [(positions in the kept layers, device)]; states is then a tuple, one (L_g, N, d) tensor per group on
    its device, each layer's kept rows gathered where the layer computed them."""
    import torch

    model = loaded.model
    extra = loaded.extra if hasattr(loaded, "extra") else {}
    device = extra.get("input_device")
    if device is None:  # where the token ids go: found once per model (a device map's walk over its modules)
        device = extra["input_device"] = input_device(model)
    ids, am = _to_device(batch.input_ids, device), _to_device(batch.attention_mask, device)
    # which positions count is known on the host: select them by index (no boolean mask on the
    # device, whose result size would cost a host synchronisation per batch)
    keep = counted_mask(batch, exclude_special=exclude_special, exclude_position0=exclude_position0)
    flat = keep.reshape(-1).nonzero().squeeze(1)
    kwargs = {}
    if batch.padding_side == "left":
        need = extra.get("position_ids")
        if need is None:
            need = extra["position_ids"] = _position_ids_needed(model)
        if need:
            kwargs["position_ids"] = (am.cumsum(1) - 1).clamp(min=0)
    with torch.inference_mode():
        hs = model(input_ids=ids, attention_mask=am, output_hidden_states=True, **kwargs).hidden_states
        idx = list(range(len(hs))) if layers is None else [int(x) for x in layers]
        bad = [x for x in idx if not 0 <= x < len(hs)]
        if bad:
            raise NormvarError(
                f"layer(s) {bad} out of range: the model has hidden states 0..{len(hs) - 1}",
                fix=f"pass --layers within 0..{len(hs) - 1}",
            )
        if groups is not None:
            states = tuple(
                _kept(hs, [idx[j] for j in pos], batch, keep, flat, torch.device(dev)) for pos, dev in groups
            )
        else:
            states = _kept(hs, idx, batch, keep, flat, hs[idx[0]].device)
        token_ids = _to_device(unit_ids(batch).reshape(-1)[flat], device)
    return states, token_ids


def _kept(hs, idx, batch: Batch, keep, flat, device):
    """(len(idx), N, d) on ``device``: the kept rows of hidden states ``idx``, each gathered on the device
    that computed it (then moved, only when that is not ``device``: layers offloaded to CPU or disk)."""
    import torch

    if batch.word_occ is not None:
        return pool_words(torch.stack([hs[i].to(device) for i in idx]), batch, keep.to(device))
    first = hs[idx[0]]  # one copy: each layer's kept rows gathered straight into its slice
    states = torch.empty((len(idx), flat.numel(), first.shape[-1]), dtype=first.dtype, device=device)
    sels: dict = {}  # the row index, copied once to each device that computed a kept layer
    for j, i in enumerate(idx):
        sel = sels.get(hs[i].device)
        if sel is None:
            sel = sels[hs[i].device] = _to_device(flat, hs[i].device)
        if hs[i].device == device:
            torch.index_select(hs[i].flatten(0, 1), 0, sel, out=states[j])
        else:
            states[j].copy_(torch.index_select(hs[i].flatten(0, 1), 0, sel))
    return states


def _to_device(t, device):
    """Host tensor -> ``device``; to a CUDA device from pinned memory, without blocking the host."""
    if device.type != "cuda":
        return t.to(device)
    return (t if t.is_pinned() else t.pin_memory()).to(device, non_blocking=True)


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
