"""Stream one corpus file: sha256 of its bytes, gunzip, checks, UTF-8 text in blocks.

``CorpusStream(path, gzipped)`` reads the file in 1 MiB blocks; memory stays at a few blocks
whatever the file size (or, with ``data``, over the bytes of one range of a file: the Ray
executor's shares, ``corpus.ranges``). ``text_blocks()`` yields decoded text (a leading BOM dropped, blocks
cut between characters); ``lines()`` yields lists of lines cut exactly as ``str.splitlines``
cuts the whole text; ``finish()`` reads what is left so that ``sha256`` covers every byte.

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
        """Lists of lines, cut where ``str.splitlines()`` cuts the whole decoded text."""
        pending = ""
        for text in self.text_blocks():
            both = pending + text
            with_ends, lines = both.splitlines(keepends=True), both.splitlines()
            last = with_ends[-1]
            if last.endswith(_LINE_ENDS) and not last.endswith("\r"):
                pending = ""  # a complete line (a trailing "\r" may be half of "\r\n")
            else:
                pending = last
                lines.pop()
            if lines:
                yield lines
        if pending:
            yield pending.splitlines()

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
        inside = " of the decompressed text" if self.gzipped else ""
        raise NormvarError(
            f"corpus {self.path.name} is not UTF-8: invalid byte 0x{bad_byte:02x} at byte offset {where}{inside}",
            fix=f"convert it to UTF-8, e.g. iconv -f latin1 -t utf-8 {self.path.name} > fixed.txt",
        )


def _complete_prefix(buf: bytes) -> int:
    """Length of ``buf`` without a UTF-8 sequence cut short at its end (at most 3 bytes)."""
    n = len(buf)
    for back in range(1, min(4, n) + 1):
        b = buf[n - back]
        if b & 0xC0 != 0x80:  # an ASCII byte or a lead byte
            need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
            return n - back if need > back else n
    return n
