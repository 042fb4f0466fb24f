"""The plan's counted positions read straight from the flat encoding, without padding a batch.

``PaddedBatches`` keep the corpus as flat arrays (``encoding.Encoded``) and pad a batch when asked for it. The
plan's counts and picks (``sample_plan.count_tokens``, ``_occurrences``, ``plan_uniform``) only need, for every
counted position, its id, batch, sentence and offset in its sentence: ``counted_chunks`` gives exactly the positions
``batches.counted_mask`` keeps over the built batches, in the same order (batch by batch, each batch's rows in
order, each row's tokens left to right, whatever the padding side), a few batches at a time (at most
``CHUNK_TOKENS`` tokens, so memory stays bounded on any corpus). Word runs (App. J) and plans of built ``Batch``
lists (``synthetic_plan``) are read batch by batch as before (``counted_chunks`` gives None).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

CHUNK_TOKENS = 1 << 18
"""Tokens of the flat encoding read at once by ``counted_chunks`` (whole batches; one batch may exceed it): about
50 bytes a token while read, so ≈ 13 MB at a time whatever the corpus."""


@dataclass
class CountedChunk:
    """The counted positions of consecutive batches: ``ids`` (token id), ``batch`` (batch index), ``sentence``
    (corpus sentence index) and ``offset`` (position from the sentence's first real token), int64 each."""

    ids: np.ndarray
    batch: np.ndarray
    sentence: np.ndarray
    offset: np.ndarray


def flat_readable(batches) -> bool:
    """True for ``PaddedBatches`` of token runs: their counted positions can be read from the flat encoding."""
    enc = getattr(batches, "enc", None)
    return enc is not None and hasattr(batches, "groups") and enc.word_type is None


def counted_chunks(
    batches, *, exclude_special: bool, exclude_position0: bool, chunk_tokens: int | None = None
) -> Iterator[CountedChunk] | None:
    """The counted positions of ``batches`` (``PaddedBatches`` without word runs), a few batches at a time, in
    the order ``counted_mask`` + ``torch.nonzero`` gives them batch by batch; None for other batches."""
    if not flat_readable(batches):
        return None
    return _chunks(batches, exclude_special, exclude_position0, int(chunk_tokens or CHUNK_TOKENS))


def _chunks(batches, exclude_special: bool, exclude_position0: bool, budget: int) -> Iterator[CountedChunk]:
    enc, groups = batches.enc, batches.groups
    tokens = batches.token_counts()
    first = 0
    while first < len(groups):
        stop, total = first, 0
        while stop < len(groups) and (stop == first or total + int(tokens[stop]) <= budget):
            total += int(tokens[stop])
            stop += 1
        yield _read(enc, groups[first:stop], first, exclude_special, exclude_position0)
        first = stop


def _read(enc, groups: list[np.ndarray], first: int, exclude_special: bool, exclude_position0: bool) -> CountedChunk:
    """Every real token of ``groups`` (batches ``first``, ``first + 1``, ...) in row-major order, less the excluded."""
    e = np.zeros(0, np.int64)
    if not groups:
        return CountedChunk(e, e, e, e)
    rows = np.concatenate(groups).astype(np.int64)
    n = enc.lengths[rows].astype(np.int64)
    total = int(n.sum())
    row_of = np.repeat(np.arange(rows.size), n)  # each token's row in the chunk
    row_first = np.concatenate([[0], np.cumsum(n)[:-1]])
    offset = np.arange(total, dtype=np.int64) - row_first[row_of]
    flat = enc.starts[rows].astype(np.int64)[row_of] + offset  # its place in the flat arrays
    keep = np.ones(total, bool)
    if exclude_special:
        keep &= ~enc.special[flat].astype(bool)
    if exclude_position0:
        keep &= offset != 0
    sizes = np.fromiter((len(g) for g in groups), np.int64, count=len(groups))
    batch_of_row = np.repeat(np.arange(first, first + len(groups), dtype=np.int64), sizes)
    return CountedChunk(
        ids=enc.ids[flat[keep]].astype(np.int64),
        batch=batch_of_row[row_of[keep]],
        sentence=rows[row_of[keep]],
        offset=offset[keep],
    )


__all__ = ["CountedChunk", "counted_chunks", "flat_readable", "CHUNK_TOKENS"]
