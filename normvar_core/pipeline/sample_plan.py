"""A bounded, seeded reservoir of raw embeddings for the PCA clouds (the study's Fig. 1, App. A).

Token counts n_t = |X_t| (eq. 2) depend only on the tokenization and on which positions are
counted, so they are known *before* any forward pass. ``plan_samples`` therefore

1. counts every counted position of every batch (vectorised over the id tensors, batch by batch),
2. chooses the tokens: App. A's selection (``analyses.select_tokens`` on the prefix-stripped
   token strings, band 10 <= n_t <= 1e5, seeded) united with the 50 most frequent types,
3. picks, for each chosen type, at most ``samples_per_token`` of its occurrences uniformly
   without replacement with ``numpy.random.default_rng(seed)`` (occurrences ordered by
   (sentence, position), so the picks do not depend on batch size or padding side).

``measures.samples.SampleMeasure`` then copies the picked hidden states out of the main
pass — no second forward pass, memory bounded by chosen types x samples_per_token x layers x d
floats. The counts are checked against the final statistics (``measures.moments.check_counts``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain

import numpy as np
import torch

from normvar_core.constants import SAMPLES_TOP_TYPES as N_TOP
from normvar_core.constants import STUDY_BAND as BAND  # App. A: 1 <= log10 n_t <= 5
from normvar_core.pipeline.batches import counted_mask, first_position, unit_ids, word_members
from normvar_core.pipeline.encoding import rust_encode, word_prefix
from normvar_core.pipeline.flat_counts import counted_chunks
from normvar_core.stats.analyses import select_by_counts
from normvar_core.stats.layer_geometry import sample_keys


def count_tokens(batches, *, exclude_special: bool, exclude_position0: bool) -> tuple[np.ndarray, np.ndarray]:
    """(token_ids ascending, n_t) over every counted position of ``batches``, counted batch by batch
    (memory: one batch and the count table, never every id of the corpus at once; ``PaddedBatches`` are read
    from their flat encoding, ``flat_counts.counted_chunks``, without padding a batch)."""
    counts = np.zeros(0, np.int64)
    chunks = counted_chunks(batches, exclude_special=exclude_special, exclude_position0=exclude_position0)
    for c in chunks or ():
        if c.ids.size:
            part = np.bincount(c.ids)
            if part.size > counts.size:
                counts = np.concatenate([counts, np.zeros(part.size - counts.size, np.int64)])
            counts[: part.size] += part
    for b in batches if chunks is None else ():
        m = counted_mask(b, exclude_special=exclude_special, exclude_position0=exclude_position0)
        ids = unit_ids(b)[m]
        if ids.numel() == 0:
            continue
        part = torch.bincount(ids).numpy()
        if part.size > counts.size:
            counts = np.concatenate([counts, np.zeros(part.size - counts.size, np.int64)])
        counts[: part.size] += part
    uniq = np.flatnonzero(counts)
    return uniq.astype(np.int64), counts[uniq].astype(np.int64)


def word_token_counts(
    batches, token_ids: np.ndarray, n: np.ndarray, *, exclude_special: bool, exclude_position0: bool
) -> np.ndarray:
    """Word runs: |T_w| per counted word type (aligned with ``token_ids``), the mean number of tokens
    of its counted occurrences (a word is tokenized alike almost everywhere; BPE's leading-space
    variants can differ)."""
    total = np.zeros(int(token_ids.max()) + 1 if token_ids.size else 0, np.float64)
    for b in batches:
        keep = counted_mask(b, exclude_special=exclude_special, exclude_position0=exclude_position0)
        member, _, _ = word_members(b, keep)
        types = unit_ids(b)[member].numpy()
        total += np.bincount(types, minlength=total.size)[: total.size]
    return total[token_ids] / np.maximum(n, 1)


def choose_tokens(
    token_ids: np.ndarray, n: np.ndarray, tokens: list[str], *, seed: int = 0, n_top: int = N_TOP
) -> np.ndarray:
    """App. A's selection (stripped strings, band 10..1e5, seeded) ∪ the ``n_top`` most frequent types."""
    token_ids = np.asarray(token_ids, np.int64)
    n = np.asarray(n, np.int64)
    if token_ids.size == 0:
        return np.zeros(0, np.int64)
    sel = select_by_counts(token_ids, n, tokens, n_min=BAND[0], n_max=BAND[1], seed=seed)
    top = token_ids[np.argsort(-n, kind="stable")[:n_top]]
    return np.union1d(sel, top).astype(np.int64)


@dataclass
class SamplePlan:
    """The picked occurrences, sorted by (token_id, i): ``token_ids``, ``i`` (index within its
    type), ``batch`` (batch index), ``sentence`` (corpus sentence index) and ``offset`` (position
    counted from the sentence's first real token). ``by_batch`` maps a batch to its picks."""

    token_ids: np.ndarray
    i: np.ndarray
    batch: np.ndarray
    sentence: np.ndarray
    offset: np.ndarray
    by_batch: dict = field(default_factory=dict)
    char_start: np.ndarray | None = None  # the token's character span in its sentence (-1: unknown)
    char_end: np.ndarray | None = None

    @property
    def size(self) -> int:
        return int(self.token_ids.size)


def unknown_spans(plan: SamplePlan) -> None:
    """``plan.char_start/char_end`` all -1 (unknown): int64 arrays of one entry per pick."""
    plan.char_start = np.full(plan.size, -1, np.int64)
    plan.char_end = np.full(plan.size, -1, np.int64)


def char_spans(
    plan: SamplePlan,
    sentences: list[str],
    tokenizer,
    *,
    wrapped: bool,
    words: bool = False,
    max_length: int | None = None,
) -> None:
    """Fill ``plan.char_start/char_end``: each pick's character span in its sentence, from the fast
    tokenizer's offset mapping (position 0 = the first token of the model input; ``wrapped``: the
    run added a BOS-like separator in front; ``words``: the span of the whole word that starts
    there). Slow tokenizers and special tokens give -1. ``max_length``: the run's, so a very long sentence is
    tokenized from its prefix of whole words (``encoding.word_prefix``; the whole one if that falls short)."""
    start, end = np.full(plan.size, -1, np.int64), np.full(plan.size, -1, np.int64)
    plan.char_start, plan.char_end = start, end  # filled below where known (``unknown_spans`` otherwise)
    if plan.size and getattr(tokenizer, "is_fast", False):
        uniq, row = np.unique(plan.sentence, return_inverse=True)
        texts = [sentences[int(s)] for s in uniq]
        if max_length:
            texts = [word_prefix(t, max_length) for t in texts]
        enc = None if words else rust_encode(tokenizer, texts, offsets=True)  # word spans need the word ids
        if enc is None:
            enc = tokenizer(
                texts, add_special_tokens=True, return_offsets_mapping=True, truncation=False, verbose=False
            )
        if max_length and any(
            len(o) <= max_length and t is not sentences[int(s)] for o, t, s in zip(enc["offset_mapping"], texts, uniq)
        ):
            enc = tokenizer(
                [sentences[int(s)] for s in uniq],
                add_special_tokens=True,
                return_offsets_mapping=True,
                truncation=False,
                verbose=False,
            )
        offsets = enc["offset_mapping"]
        lengths = np.fromiter((len(o) for o in offsets), np.int64, count=len(offsets))
        flat = np.fromiter(
            chain.from_iterable(chain.from_iterable(offsets)), np.int64, count=2 * int(lengths.sum())
        ).reshape(-1, 2)
        first = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        p = plan.offset.astype(np.int64) - (1 if wrapped else 0)  # the pick's token in its encoding
        ok = (p >= 0) & (p < lengths[row])
        at = first[row[ok]] + p[ok]
        ok[ok] = flat[at, 1] > flat[at, 0]  # special tokens have an empty span
        at = first[row[ok]] + p[ok]
        start[ok], end[ok] = flat[at, 0], flat[at, 1]
        for k in np.flatnonzero(ok) if words else ():  # the span of the whole word that starts there
            w = enc.word_ids(int(row[k]))[int(p[k])]
            if w is not None:
                start[k], end[k] = enc.word_to_chars(int(row[k]), w)


SCAN_BUDGET = 1 << 20
"""Occurrences of the chosen types ``plan_samples`` holds at once: the types are scanned in
contiguous groups of ascending ids with at most this many occurrences (one type may exceed it)."""


def plan_samples(
    batches,
    chosen: np.ndarray,
    *,
    per_token: int,
    seed: int,
    exclude_special: bool,
    exclude_position0: bool,
    budget: int | None = None,
) -> SamplePlan:
    """Pick at most ``per_token`` occurrences of each chosen type, uniformly, seeded.

    Memory: the occurrences of one group of types at a time (``SCAN_BUDGET``), one pass over the
    batches per group; the groups are ascending id ranges, so the generator is drawn in the same
    order as by a single pass over every occurrence — the picks do not depend on the budget."""
    e = np.zeros(0, np.int64)
    chosen = np.unique(np.asarray(chosen, np.int64))
    excl = dict(exclude_special=exclude_special, exclude_position0=exclude_position0)
    if per_token <= 0 or chosen.size == 0:
        return SamplePlan(e, e.astype(np.int32), e, e, e, {})
    ids, n = count_tokens(batches, **excl)
    present = np.isin(ids, chosen)
    types, counts = ids[present], n[present]
    if types.size == 0:
        return SamplePlan(e, e.astype(np.int32), e, e, e, {})
    budget = int(budget or SCAN_BUDGET)
    groups, first, total = [], 0, 0
    for j, c in enumerate(counts.tolist()):
        if total and total + c > budget:
            groups.append(types[first:j])
            first, total = j, 0
        total += c
    groups.append(types[first:])
    rng = np.random.default_rng(seed)
    parts = [_pick(_occurrences(batches, g, excl), rng, per_token) for g in groups]
    tok, within, bat, sent, off = (np.concatenate([p[k] for p in parts]) for k in range(5))
    plan = SamplePlan(token_ids=tok, i=within, batch=bat, sentence=sent, offset=off)
    for bi in np.unique(plan.batch):
        plan.by_batch[int(bi)] = np.flatnonzero(plan.batch == bi)
    return plan


def _occurrences(batches, types: np.ndarray, excl: dict) -> tuple[np.ndarray, ...]:
    """(token, batch, sentence, offset) of every counted occurrence of ``types``."""
    cols: dict[str, list] = {k: [] for k in ("tok", "batch", "sentence", "offset")}
    chunks = counted_chunks(batches, **excl)
    if chunks is not None:
        types = np.asarray(types, np.int64)
        wanted = np.zeros(int(types.max()) + 1 if types.size else 0, bool)
        wanted[types] = True
        for c in chunks:
            m = c.ids < wanted.size
            m[m] = wanted[c.ids[m]]
            for k, v in (("tok", c.ids), ("batch", c.batch), ("sentence", c.sentence), ("offset", c.offset)):
                cols[k].append(v[m])
    types_t = torch.as_tensor(types)
    for bi, b in enumerate(batches if chunks is None else ()):
        ids = unit_ids(b)
        m = counted_mask(b, **excl)
        m &= torch.isin(ids, types_t)
        rows, cc = torch.nonzero(m, as_tuple=True)
        if rows.numel() == 0:
            continue
        cols["tok"].append(ids[rows, cc].numpy())
        cols["batch"].append(np.full(rows.numel(), bi, np.int64))
        cols["sentence"].append(np.asarray(b.indices, np.int64)[rows.numpy()])
        cols["offset"].append((cc - first_position(b)[rows]).numpy())
    return tuple(
        np.concatenate(cols[k]).astype(np.int64) if cols[k] else np.zeros(0, np.int64)
        for k in ("tok", "batch", "sentence", "offset")
    )


def _pick(occ: tuple[np.ndarray, ...], rng, per_token: int) -> tuple[np.ndarray, ...]:
    """Order the occurrences by type, then (sentence, position); draw each type's picks from ``rng``."""
    tok, bat, sent, off = occ
    order = np.lexsort((off, sent, tok))
    tok, bat, sent, off = tok[order], bat[order], sent[order], off[order]
    uniq, starts, counts = np.unique(tok, return_index=True, return_counts=True)
    keep, within = [], []
    for s, c in zip(starts, counts):
        k = min(int(per_token), int(c))
        pick = np.sort(rng.choice(int(c), size=k, replace=False)) if k < c else np.arange(c)
        keep.append(s + pick)
        within.append(np.arange(k, dtype=np.int32))
    keep = np.concatenate(keep)  # type: ignore[assignment]  # the kept rows as one array from here on
    return tok[keep], np.concatenate(within), bat[keep], sent[keep], off[keep]


def plan_uniform(batches, *, size: int, seed: int, exclude_special: bool, exclude_position0: bool) -> SamplePlan:
    """A seeded uniform sample of ``size`` counted positions over the whole corpus (the TwoNN sample of
    Razzhigaev et al. 2024 §2.4): the positions with the smallest ``stats.layer_geometry.sample_keys(seed, sentence,
    position)``, ordered by key (a random order). Known before the forward pass, like the PCA samples,
    so the main pass only copies the picked states; the same sample whatever the batches or shards."""
    e = np.zeros(0, np.int64)
    if size <= 0:
        return SamplePlan(e, e.astype(np.int32), e, e, e, {})
    cols: dict[str, list] = {k: [] for k in ("key", "batch", "sentence", "offset")}
    for bi, sent, off in _counted_places(batches, exclude_special, exclude_position0):
        key = sample_keys(seed, sent, off)
        if key.size > size:  # keep only what can still make the cut
            part = np.argpartition(key, size - 1)[:size]
            sent, off, key = sent[part], off[part], key[part]
            bi = bi[part] if isinstance(bi, np.ndarray) else bi
        cols["key"].append(key)
        cols["batch"].append(bi if isinstance(bi, np.ndarray) else np.full(key.size, bi, np.int64))
        cols["sentence"].append(sent)
        cols["offset"].append(off)
        if sum(c.size for c in cols["key"]) > 4 * size:  # bound memory on huge corpora
            _trim(cols, size)
    if not cols["key"]:
        return SamplePlan(e, e.astype(np.int32), e, e, e, {})
    _trim(cols, size)
    key, bat, sent, off = (cols[k][0] for k in ("key", "batch", "sentence", "offset"))
    plan = SamplePlan(
        token_ids=key.view(np.int64), i=np.arange(key.size, dtype=np.int32), batch=bat, sentence=sent, offset=off
    )
    for bi in np.unique(plan.batch):
        plan.by_batch[int(bi)] = np.flatnonzero(plan.batch == bi)
    return plan


def _counted_places(batches, exclude_special: bool, exclude_position0: bool):
    """(batch index or per-position batch indices, sentence, offset) of the counted positions: a few batches at a
    time from the flat encoding (``flat_counts.counted_chunks``), else batch by batch. The keys are distinct (a
    bijection of (sentence, offset)), so the kept sample is the same however the positions are grouped."""
    chunks = counted_chunks(batches, exclude_special=exclude_special, exclude_position0=exclude_position0)
    if chunks is not None:
        for c in chunks:
            if c.ids.size:
                yield c.batch, c.sentence, c.offset
        return
    for bi, b in enumerate(batches):
        m = counted_mask(b, exclude_special=exclude_special, exclude_position0=exclude_position0)
        rows, cc = torch.nonzero(m, as_tuple=True)
        if rows.numel() == 0:
            continue
        yield bi, np.asarray(b.indices, np.int64)[rows.numpy()], (cc - first_position(b)[rows]).numpy().astype(np.int64)


def _trim(cols: dict, size: int) -> None:
    key = np.concatenate(cols["key"])
    order = np.argsort(key, kind="stable")[:size]
    for k in cols:
        cols[k] = [np.concatenate(cols[k])[order]]


__all__ = [
    "unknown_spans",
    "count_tokens",
    "choose_tokens",
    "plan_samples",
    "SCAN_BUDGET",
    "plan_uniform",
    "SamplePlan",
    "N_TOP",
    "BAND",
]
