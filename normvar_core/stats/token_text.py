"""A token as a reader reads it: the one function every page, slide, findings text, contexts list and export uses
to show a type (``readable_token``), and the run file keeps the tokenizer's own string beside it (``token_raw``).

Tokenizers write their types in their own alphabets:

* byte-level BPE (GPT-2, RoBERTa, Llama 3, SmolLM2, Falcon): each byte as one printable character (GPT-2's
  ``bytes_to_unicode``: the space is "Ġ", the newline "Ċ", the tab "ĉ", "é" is "Ã©"); the string is mapped back
  to its bytes and decoded as UTF-8;
* SentencePiece (T5, Llama 2, Gemma): the space is "▁", a byte it cannot spell is "<0x0A>".

The readable form shows a word-initial space as "␣" (U+2423, so that "␣been", the type at a word's start, and
"been", inside a word, stay two labels), a newline as "↵", a tab as "⇥", and bytes that are not whole UTF-8
characters (a character split over two types) as "⟨e2 80⟩". WordPiece types ("##ing") and special tokens
("[CLS]", "<s>") are shown as they are.
"""

from __future__ import annotations

import re
from functools import lru_cache

SPACE, NEWLINE, TAB = "␣", "↵", "⇥"
MARKERS = ("Ġ", "Ċ", "ĉ", "▁")
"""The raw markers a readable token never shows (tests read pages and decks for them)."""


def _byte_alphabet() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` inverted: its printable character -> the byte it stands for."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, n = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, chars)}


_BYTES = _byte_alphabet()
_SP_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_SHOWN = {" ": SPACE, "\n": NEWLINE, "\t": TAB, "\r": "⏎"}


def _show(text: str) -> str:
    return "".join(_SHOWN.get(ch, ch) for ch in text)


def _from_bytes(data: bytes) -> str:
    """UTF-8 where it decodes, each other byte as ⟨xx⟩ (a character split over two types)."""
    out, i = [], 0
    while i < len(data):
        for j in range(min(len(data), i + 4), i, -1):
            try:
                out.append(_show(data[i:j].decode("utf-8")))
                i = j
                break
            except UnicodeDecodeError:
                continue
        else:
            k = i
            while k < len(data):
                try:
                    data[k : k + 1].decode("utf-8")
                    break
                except UnicodeDecodeError:
                    k += 1
            out.append("⟨" + " ".join(f"{b:02x}" for b in data[i : max(k, i + 1)]) + "⟩")
            i = max(k, i + 1)
    return "".join(out)


@lru_cache(maxsize=1 << 18)
def readable_token(token: str) -> str:
    """``token`` as a reader reads it (module docstring): "Ġbeen" -> "␣been", "Ċ" -> "↵", "Ã©" -> "é",
    "▁once" -> "␣once", "<0x0A>" -> "↵"; "##ing", "[CLS]" and plain words unchanged."""
    token = str(token)
    if "▁" in token or _SP_BYTE.search(token):  # SentencePiece
        text = _SP_BYTE.sub(lambda m: chr(int(m.group(1), 16)), token).replace("▁", " ")
        return _show(text)
    if token and all(ch in _BYTES for ch in token) and any(ord(ch) > 127 for ch in token):  # byte-level BPE?
        data = bytes(_BYTES[ch] for ch in token)
        if any(ord(ch) > 255 for ch in token):  # "Ġ", "Ċ", "Ģ": only byte-level BPE spells bytes so
            return _from_bytes(data)
        try:  # "Ã©" is "é" in byte-level BPE; a lone "é" (WordPiece, SentencePiece) stays itself
            return _show(data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return _show(token)


def readable_tokens(tokens) -> list[str]:
    """``readable_token`` of each."""
    return [readable_token(t) for t in tokens]


def with_readable(df):
    """A DataFrame with a ``token`` column shown readably, the tokenizer's own string kept beside it as
    ``token_raw`` (the reader's every table: pages, slides and exports read both from there); unchanged otherwise."""
    if "token" not in df.columns or "token_raw" in df.columns:
        return df
    raw = df["token"].astype(str)
    df = df.copy()
    df["token"] = [readable_token(t) for t in raw]
    df["token_raw"] = raw.to_numpy()
    return df


__all__ = ["readable_token", "readable_tokens", "with_readable", "MARKERS", "SPACE", "NEWLINE", "TAB"]
