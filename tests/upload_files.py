"""What the New-run form tests upload: ``STORY`` (a small UTF-8 text corpus, as bytes) and ``png_bytes`` (a
real PNG, which the form must refuse)."""

from __future__ import annotations

import struct
import zlib

STORY = "\n".join(f"The {w} was quiet in the morning." for w in ("garden", "street", "river", "room")).encode()


def png_bytes() -> bytes:
    """A real 1x1 PNG (signature, IHDR, IDAT, IEND), built with zlib: no image library involved."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + chunk(b"IEND", b"")
    )
