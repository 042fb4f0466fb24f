"""Stream one corpus file: sha256 of its bytes, gunzip, checks, UTF-8 text in blocks.

``CorpusStream(path, gzipped)`` reads the file in 1 MiB blocks; memory stays at a few blocks
whatever the file size (or, with ``data``, over the bytes of one range of a file: the Ray
executor's shares, ``corpus.ranges``). ``text_blocks()`` yields decoded text (a leading BOM dropped, blocks
cut between characters); ``lines()`` yields lists of lines cut exactly as ``str.splitlines``
cuts the whole text, a line longer than ``LONG_LINE`` as a ``LongLine`` (its head and its word count: memory stays
bounded whatever the line); ``finish()`` reads what is left so that ``sha256`` covers every byte.

Bad bytes raise a ``NormvarError`` with the same precedence as a whole-file reader that checks
the file in this order: empty (whitespace only) > not gzip > NUL byte (binary; the first NUL
anywhere) > not UTF-8 (the first invalid byte). A later check can only fail once an earlier one
has been ruled out for the whole file, so on a failure the stream reads on to the end first.
Offsets are byte offsets from the start of the file (of the decompressed data for .gz).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from normvar_core.errors import NormvarError

BLOCK = 1 << 20
BOM = b"\xef\xbb\xbf"
_LINE_ENDS = ("\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


class _HashingFile:
    """A binary file whose reads update a sha256 and note whether every byte is whitespace."""

    def __init__(self, path: Path, data: bytes | None = None):
        self._fh = open(path, "rb") if data is None else io.BytesIO(data)
        self.sha = hashlib.sha256()
        self.blank = True

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self.sha.update(data)
        if self.blank and data.strip():
            self.blank = False
        return data

    def readable(self) -> bool:
        return True

    def drain(self) -> None:
        while self.read(BLOCK):
            pass

    def close(self) -> None:
        self._fh.close()


class CorpusStream:
    """One pass over ``path``; see the module docstring."""

    def __init__(self, path: Path, gzipped: bool = False, *, data: bytes | None = None, at_start: bool = True):
        self.path = Path(path)
        self.gzipped = gzipped
        self._raw = _HashingFile(self.path, data)
        self._share = data is not None  # a byte range of the file (``corpus.ranges``): no emptiness check
        self._at_start = at_start  # a leading BOM is dropped only at the start of the file
        self._plain = gzip.GzipFile(fileobj=self._raw, mode="rb") if gzipped else self._raw  # type: ignore[call-overload]  # a readable binary file object
        self._offset = 0  # bytes of (decompressed) data read so far
        self._head = b""  # the first bytes of the (decompressed) data: is it UTF-16? (``utf16_kind``)

    # ------------------------------------------------------------------ public
    @property
    def sha256(self) -> str:
        """Hex sha256 of the file bytes (complete once the stream has been read to the end)."""
        return self._raw.sha.hexdigest()

    def raw_blocks(self) -> Iterator[bytes]:
        """The (decompressed) bytes in blocks, checked for emptiness and gzip errors only."""
        try:
            while True:
                try:
                    data = self._plain.read(BLOCK)
                except (OSError, EOFError, zlib.error) as exc:
                    self._raw.drain()
                    self._raise_if_blank()
                    raise NormvarError(
                        f"corpus {self.path.name} is not a valid gzip file ({exc})",
                        fix="re-compress it with gzip, or pass the plain .txt",
                    ) from None
                if not data:
                    break
                if len(self._head) < HEAD and self._offset == len(self._head):
                    self._head += data[: HEAD - len(self._head)]
                self._offset += len(data)
                yield data
            self._raw.drain()
            self._raise_if_blank()
        finally:
            self._raw.close()

    def text_blocks(self) -> Iterator[str]:
        """Decoded UTF-8 text in blocks (strict; a leading BOM dropped; NUL bytes = binary)."""
        blocks = self.raw_blocks()
        carry = b""  # an incomplete UTF-8 sequence at the end of the previous block
        start = 0  # file offset of carry[0]
        first = self._at_start
        for data in blocks:
            self._check_nul(data, self._offset - len(data), blocks)
            buf = carry + data
            if first:
                if len(buf) < len(BOM) and BOM.startswith(buf):
                    carry = buf
                    continue
                first = False
                if buf.startswith(BOM):
                    buf, start = buf[len(BOM) :], start + len(BOM)
            cut = _complete_prefix(buf)
            text = self._decode(buf[:cut], start, blocks)
            carry, start = buf[cut:], start + cut
            if text:
                yield text
        if carry:  # a sequence cut short by the end of the file, or a lone partial BOM
            yield self._decode(carry, start, blocks)

    def lines(self) -> Iterator[list[str]]:
        """Lists of lines, cut where ``str.splitlines()`` cuts the whole decoded text. A line longer than
        ``LONG_LINE`` characters is never held whole: it streams past in blocks, its words counted as they go,
        and comes out as a ``LongLine`` (its first characters and the whole line's word count)."""
        pending = ""
        tail: _Tail | None = None  # an over-long line streaming past
        lf_may_follow = False  # the last line ended with "\r": a "\n" opening the next block belongs to it
        for text in self.text_blocks():
            if lf_may_follow:
                lf_may_follow = False
                text = text[1:] if text.startswith("\n") else text
            if tail is not None:
                m = _LINE_END.search(text)
                if m is None:
                    tail.feed(text)
                    continue
                tail.feed(text[: m.start()])
                yield [tail.line()]
                tail, text = None, text[m.end() :]
                lf_may_follow = m.group() == "\r" and not text
            if not text:
                continue
            both = pending + text
            with_ends, lines = both.splitlines(keepends=True), both.splitlines()
            last = with_ends[-1]
            if last.endswith(_LINE_ENDS) and not last.endswith("\r"):
                pending = ""  # a complete line (a trailing "\r" may be half of "\r\n")
            else:
                pending = last
                lines.pop()
            if len(pending) > LONG_LINE:  # the start of an over-long line: from now on counted, not held
                if pending.endswith("\r"):
                    lines.append(pending[:-1])
                    lf_may_follow = True
                else:
                    tail = _Tail(pending)
                pending = ""
            if lines:
                yield [_bounded(x) for x in lines]
        if tail is not None:
            yield [tail.line()]
        elif pending:
            yield [_bounded(x) for x in pending.splitlines()]

    def finish(self) -> str:
        """Read the rest of the file (the emptiness and gzip checks run); return the sha256."""
        for _ in self.raw_blocks():
            pass
        return self.sha256

    # ------------------------------------------------------------------ checks
    def _raise_if_blank(self) -> None:
        if self._raw.blank and not self._share:
            raise NormvarError(f"corpus file is empty: {self.path.name}", fix="pass a file with one sentence a line")

    def _check_nul(self, data: bytes, at: int, rest: Iterator[bytes]) -> None:
        nul = data.find(b"\x00")
        if nul >= 0:
            for _ in rest:  # gzip / emptiness errors anywhere come first
                pass
            raise self._binary(at + nul)

    def _binary(self, offset: int) -> NormvarError:
        kind = utf16_kind(self._head) if self._at_start else None
        if kind is not None:  # UTF-16 text has NUL bytes in every ASCII character: it is text, in another encoding
            return NormvarError(
                f"corpus {self.path.name} is {kind} text, not UTF-8 (normvar reads UTF-8 only)",
                fix=f"convert it to UTF-8, e.g. iconv -f {kind.split()[0]} -t UTF-8 {self.path.name} > fixed.txt",
            )
        return NormvarError(
            f"corpus {self.path.name} looks binary (NUL byte at byte offset {offset})",
            fix="pass a UTF-8 text file (one sentence a line), .jsonl, .csv or .parquet",
        )

    def _decode(self, data: bytes, start: int, rest: Iterator[bytes]) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad_byte, where = data[exc.start], start + exc.start
        for block in rest:  # a NUL byte anywhere, or a gzip error, comes first
            self._check_nul(block, self._offset - len(block), rest)
        if self._at_start and utf16_kind(self._head) is not None:
            raise self._binary(where)  # UTF-16 text without a NUL byte (no character below U+0100): said as such
        inside = " of the decompressed text" if self.gzipped else ""
        raise NormvarError(
            f"corpus {self.path.name} is not UTF-8: invalid byte 0x{bad_byte:02x} at byte offset {where}{inside}",
            fix=f"convert it to UTF-8, e.g. iconv -f latin1 -t utf-8 {self.path.name} > fixed.txt",
        )


LONG_LINE = 1 << 20
"""The most characters of one line that are held: a longer line is kept as its first ``LONG_LINE`` characters (up
to the last whitespace before them, so no word is cut) with the word count of the whole line (``LongLine``). Every
model keeps far fewer tokens of a sentence (its maximum length: 512 to a few thousand tokens), so the tokens a run
counts are those of the whole line; memory stays bounded whatever the line's length."""
COUNT_CHARS = 1 << 16
"""Characters of an over-long line whose words are counted at once (``str.split`` of them: a few MB at most)."""
_LINE_END = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


class LongLine(str):
    """A line longer than ``LONG_LINE``: the text is its first characters (``_Tail``), ``words`` the number of
    whitespace-separated words of the whole line and ``chars`` its length."""

    words: int
    chars: int


class _Tail:
    """An over-long line as it streams past: its first ``LONG_LINE`` characters kept, its words counted piece by
    piece (a word cut between two pieces counted once)."""

    def __init__(self, head: str):
        kept = head[:LONG_LINE]
        if len(head) > LONG_LINE and not head[LONG_LINE].isspace():  # the last word is cut: drop it
            parts = kept.rsplit(maxsplit=1)
            kept = parts[0] if len(parts) == 2 else kept
        self.kept, self.words, self.chars, self.in_word = kept, 0, 0, False
        self.feed(head)

    def feed(self, piece: str) -> None:
        for at in range(0, len(piece), COUNT_CHARS):  # split in small parts: a few thousand words' strings at a time
            part = piece[at : at + COUNT_CHARS]
            n = len(part.split())
            if self.in_word and not part[0].isspace():
                n -= 1  # the word the last part ended in goes on
            self.words += n
            self.chars += len(part)
            self.in_word = not part[-1].isspace()

    def line(self) -> LongLine:
        out = LongLine(self.kept)
        out.words, out.chars = self.words, self.chars
        return out


def _bounded(line: str) -> str:
    """``line``, or its ``LongLine`` when it is longer than ``LONG_LINE``."""
    return _Tail(line).line() if len(line) > LONG_LINE else line


def word_count(record: str) -> int:
    """The whitespace words of a record (a ``LongLine``: of the whole line)."""
    return record.words if isinstance(record, LongLine) else len(record.split())


HEAD = 64
"""Bytes at the start of a file that ``utf16_kind`` looks at."""


def utf16_kind(head: bytes) -> str | None:
    """ "UTF-16" (with a byte-order mark), "UTF-16LE" or "UTF-16BE" (text whose characters below U+0100 leave a NUL
    byte in every other place: the first bytes of the file have NULs at exactly the odd or the even places), else
    None."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16"
    pairs = len(head) // 2
    if pairs < 2:
        return None
    even, odd = head[0 : 2 * pairs : 2], head[1 : 2 * pairs : 2]
    if odd.count(0) == pairs and even.count(0) == 0:
        return "UTF-16LE"
    if even.count(0) == pairs and odd.count(0) == 0:
        return "UTF-16BE"
    return None


def _complete_prefix(buf: bytes) -> int:
    """Length of ``buf`` without a UTF-8 sequence cut short at its end (at most 3 bytes)."""
    n = len(buf)
    for back in range(1, min(4, n) + 1):
        b = buf[n - back]
        if b & 0xC0 != 0x80:  # an ASCII byte or a lead byte
            need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
            return n - back if need > back else n
    return n
