"""Corpus shares: the run's sentences cut into contiguous line ranges that workers tokenize apart.

Two uses in the Ray executor. For .txt/.txt.gz/.jsonl/.parquet the workers select and tokenize byte
ranges of the file (``corpus.ranges``, ``execute.ray_corpus``) and return their encodings as
``encoded_arrays`` and their kept sentences packed (``pack_strings``); ``merge_encoded`` joins them.
For CSV (not cut into byte ranges: quoted newlines) the driver reads the corpus once (hash, filters,
sampling: ``corpus.load_sentences``) and ``split_shares`` cuts the kept sentences into ``k``
contiguous ranges of about equal length in characters. A share is plain
arrays — the UTF-8 bytes of its sentences and their end offsets — so it travels through Ray's
object store to a worker that never opens the corpus path. Each worker runs
``encoding.encode_sentences`` on its share; ``merge_encoded`` concatenates the parts in share order.
``encode_sentences`` encodes every sentence on its own, so the merged encoding equals the encoding
of the whole list (ids, special flags, lengths, truncations; for word runs the word types are
renumbered by first appearance over the shares in order, which is their first appearance in the
corpus): the plan built from it is the local plan.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from normvar_core.pipeline.encoding import Encoded


def pack_strings(strings: list[str]) -> dict[str, np.ndarray]:
    """{"utf8": uint8 bytes of the strings joined, "ends": int64 end offset of each}."""
    parts = [s.encode("utf-8") for s in strings]
    ends = np.cumsum([len(p) for p in parts], dtype=np.int64) if parts else np.zeros(0, np.int64)
    return {"utf8": np.frombuffer(b"".join(parts), np.uint8).copy(), "ends": ends}


def unpack_strings(packed: dict) -> list[str]:
    raw = np.asarray(packed["utf8"], np.uint8).tobytes()
    ends = np.asarray(packed["ends"], np.int64).tolist()
    starts = [0, *ends[:-1]]
    return [raw[a:b].decode("utf-8") for a, b in zip(starts, ends)]


def split_shares(sentences: list[str], k: int) -> list[dict[str, np.ndarray]]:
    """``min(k, len(sentences))`` contiguous non-empty shares of about equal characters, each packed
    (``pack_strings``) with ``first``: the index of its first sentence in the run."""
    n = len(sentences)
    k = max(1, min(int(k), n))
    if not n:
        return []
    cum = np.cumsum(np.fromiter((len(s) + 1 for s in sentences), np.int64, count=n))
    cuts = (np.searchsorted(cum, np.linspace(0, cum[-1], k + 1)[1:-1], side="left") + 1).tolist()
    bounds = [0]
    for i, c in enumerate(cuts):  # strictly increasing, room left for the shares after it: k shares
        bounds.append(min(max(int(c), bounds[-1] + 1), n - (k - 1 - i)))
    bounds.append(n)
    return [dict(pack_strings(sentences[a:b]), first=np.int64(a)) for a, b in zip(bounds, bounds[1:])]  # type: ignore[arg-type]  # a scalar


def encoded_arrays(enc: Encoded) -> dict[str, np.ndarray]:
    """An ``Encoded`` as plain arrays (the word strings packed); starts are implied by lengths."""
    out: dict[str, Any] = {
        "ids": enc.ids,
        "special": enc.special,
        "lengths": enc.lengths,
        "n_truncated": np.int64(enc.n_truncated),
    }
    if enc.word_type is not None:
        out.update(
            word_type=enc.word_type,
            word_occ=enc.word_occ,
            **{f"words_{k}": v for k, v in pack_strings(list(enc.words or [])).items()},
        )
    return out


def merge_encoded(parts: list[dict]) -> Encoded:
    """The encoding of the shares' sentences in share order (see the module docstring)."""
    lengths = np.concatenate([np.asarray(p["lengths"], np.int64) for p in parts])
    starts = np.zeros(lengths.size, np.int64)
    if lengths.size:
        np.cumsum(lengths[:-1], out=starts[1:])
    ids = np.concatenate([np.asarray(p["ids"], np.int64) for p in parts])
    special = np.concatenate([np.asarray(p["special"], bool) for p in parts])
    n_trunc = int(sum(int(p["n_truncated"]) for p in parts))
    if "word_type" not in parts[0]:
        return Encoded(ids, special, starts, lengths, n_trunc)
    words: dict[str, int] = {}
    types = []
    for p in parts:
        local = unpack_strings({"utf8": p["words_utf8"], "ends": p["words_ends"]})
        remap = np.array([words.setdefault(w, len(words)) for w in local] + [-1], np.int64)
        types.append(remap[np.asarray(p["word_type"], np.int64)])  # -1 (no word) maps to remap[-1] = -1
    occ = np.concatenate([np.asarray(p["word_occ"], np.int64) for p in parts])
    return Encoded(
        ids, special, starts, lengths, n_trunc, word_type=np.concatenate(types), word_occ=occ, words=list(words)
    )


__all__ = ["pack_strings", "unpack_strings", "split_shares", "encoded_arrays", "merge_encoded"]
