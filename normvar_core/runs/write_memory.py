"""The memory a run file's write holds (``runs.writer``), apart from the writer so that the memory plan
(``memory.terms.writer_bytes``) reads it without importing DuckDB, pandas and Arrow."""

from __future__ import annotations

INSERT_BYTES = 64 << 20
"""Parts of a table are concatenated (zero-copy) into one Arrow table per insert up to this size: the parts one
insert holds (at most this plus one part: ``memory.terms.writer_bytes``)."""

WRITER_MEMORY = 256 << 20
"""DuckDB's ``memory_limit`` while a run file is written. Its default (80 % of the RAM) lets the buffer pool
keep every block written until the file closes — as much memory again as the run file (measured: +1.2 GB to
write 625 MB of embeddings). With this bound, blocks are evicted once checkpointed (+0.5 GB with the
156 MB Arrow parts, the write 0.8 s slower of 6.5 s), so the memory plan can count the write."""


__all__ = ["INSERT_BYTES", "WRITER_MEMORY"]
