"""A content-addressed cache of the corpus's tokenization (``encoding.Encoded``) under the data directory.

``normvar plan`` and ``compute`` tokenize the whole corpus to count its types and positions exactly; the same
corpus, tokenizer and options give the same flat arrays, so the second plan, and the compute after a plan, read
them back instead of tokenizing again. The key is a SHA-256 of everything the arrays depend on: the Rust
tokenizer's whole definition (``tokenizer.json`` as the tokenizer holds it: vocabulary, normalizer,
pre-tokenizer, post-processor, added tokens), its class, the transformers and tokenizers versions, the wrap
(``wrap_tokens``), the special-token splitting, ``max_length``, the prefix rule of long lines
(``encoding.LONG_CHARS``), this file's ``FORMAT`` and every sentence's bytes. Only fast tokenizers and token runs
are cached (word runs keep word strings; a slow tokenizer has no definition to hash).

Entries are plain numpy arrays in an ``.npz`` (``np.load(allow_pickle=False)``: nothing is ever unpickled),
written to a temporary name and published with ``os.replace``; an entry that cannot be read or does not fit the
corpus (a damaged or truncated file) is ignored and written anew. At most ``KEEP`` entries are kept (the least
recently used go first).
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from normvar_core.pipeline.encoding import LONG_CHARS, Encoded, encode_sentences, wrap_tokens
from normvar_core.pipeline.kept_files import open_kept, package_version, publish_kept, touch_kept

FORMAT = 1
"""Bumped when the arrays or the way they are computed change: old entries are then never read."""
KEEP = 8
"""Entries kept in the cache folder (the novels: about 13 MB each)."""
SUFFIX = ".tokens.npz"


def cache_key(sentences: Sequence[str], tokenizer, *, max_length: int) -> str | None:
    """The entry's name for these sentences, tokenizer and ``max_length``; None when it cannot be cached."""
    backend = getattr(tokenizer, "_tokenizer", None)
    if not getattr(tokenizer, "is_fast", False) or backend is None or not hasattr(backend, "to_str"):
        return None
    h = hashlib.sha256()
    head = [
        f"format={FORMAT}",
        f"class={type(tokenizer).__module__}.{type(tokenizer).__qualname__}",
        f"versions={package_version('transformers')},{package_version('tokenizers')}",
        f"wrap={wrap_tokens(tokenizer)}",
        f"split_special={getattr(tokenizer, 'split_special_tokens', None)}",
        f"max_length={int(max_length)}",
        f"long_chars={LONG_CHARS}",
        f"n={len(sentences)}",
    ]
    h.update("\n".join(head).encode())
    h.update(hashlib.sha256(backend.to_str().encode()).digest())
    for s in sentences:
        b = s.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def encode_cached(sentences: Sequence[str], tokenizer, *, max_length: int, unit: str, folder: Path | None) -> Encoded:
    """``encode_sentences(sentences, tokenizer, max_length=, unit=)``, read from ``folder`` when it holds this
    tokenization, else computed and stored there (best effort: a folder that cannot be written only costs the
    tokenization)."""
    key = cache_key(sentences, tokenizer, max_length=max_length) if folder is not None and unit == "token" else None
    if key is None or folder is None:
        return encode_sentences(sentences, tokenizer, max_length=max_length, unit=unit)
    path = Path(folder) / f"{key}{SUFFIX}"
    enc = read_entry(path, len(sentences))
    if enc is not None:
        touch_kept(path)  # recently used: pruned last
        return enc
    enc = encode_sentences(sentences, tokenizer, max_length=max_length, unit=unit)
    write_entry(path, enc)
    return enc


def read_entry(path: Path, n_sentences: int) -> Encoded | None:
    """The entry at ``path`` when it is whole and fits ``n_sentences`` sentences; None otherwise (also when the name
    holds a link, a FIFO or anything but a regular file of one name: ``open_regular``, nothing followed or waited
    on)."""
    fh = open_kept(path, "the kept tokenization")
    if fh is None:
        return None
    try:
        with fh, np.load(fh, allow_pickle=False) as z:
            ids = np.asarray(z["ids"], np.int64)
            special = np.asarray(z["special"], bool)
            lengths = np.asarray(z["lengths"], np.int64)
            n_truncated = int(z["n_truncated"])
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
        return None
    if (
        ids.ndim != 1
        or lengths.shape != (n_sentences,)
        or special.shape != ids.shape
        or (lengths < 0).any()
        or int(lengths.sum()) != ids.size
        or n_truncated < 0
    ):
        return None
    starts = np.zeros(n_sentences, np.int64)
    if n_sentences:
        np.cumsum(lengths[:-1], out=starts[1:])
    return Encoded(ids, special, starts, lengths, n_truncated)


def write_entry(path: Path, enc: Encoded) -> None:
    """Publish ``enc`` at ``path`` (``kept_files.publish_kept``) and prune the folder to ``KEEP``."""
    small = enc.ids.size == 0 or (int(enc.ids.min()) >= 0 and int(enc.ids.max()) < 2**31)

    def write(fh) -> None:
        np.savez(
            fh,
            ids=enc.ids.astype(np.int32 if small else np.int64),
            special=enc.special.astype(bool),
            lengths=enc.lengths.astype(np.int64),
            n_truncated=np.int64(enc.n_truncated),
        )

    publish_kept(path, write, suffix=SUFFIX, keep=KEEP)


__all__ = ["encode_cached", "cache_key", "read_entry", "write_entry", "FORMAT", "KEEP"]
