"""The files the data directory's caches keep (``encoding_cache``: the corpus's tokenization; ``models.meta_facts``:
what the plan reads of a model built on the meta device): each read only from a regular file of one name
(``destination.open_regular``: a link, a FIFO or a folder at the name is no entry, never followed or waited on),
written to a temporary name of this process (``O_EXCL``, no link followed) and published with ``os.replace``, the
folder pruned to the most recently used entries. Every failure only costs the entry: the caller computes it again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

from normvar_core.destination import open_regular
from normvar_core.errors import NormvarError


def package_version(package: str) -> str:
    """The installed version of ``package`` ("none" when it is not installed): part of a cache key."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "none"


def open_kept(path: Path, what: str) -> IO[bytes] | None:
    """The entry at ``path`` opened for reading, or None (missing, unreadable, or not a regular file of one name)."""
    try:
        return os.fdopen(open_regular(path, os.O_RDONLY, what=what), "rb")
    except (OSError, NormvarError):
        return None


def touch_kept(path: Path) -> None:
    """Mark the entry at ``path`` recently used (pruned last); a link's target is never touched."""
    try:
        os.utime(path, follow_symlinks=False)
    except OSError:
        pass


def publish_kept(path: Path, write: Callable[[IO[bytes]], object], *, suffix: str, keep: int) -> None:
    """``write(fh)`` into a new temporary file beside ``path``, published at ``path`` with ``os.replace`` (a link
    at ``path`` is replaced itself, its target untouched); then the folder pruned to ``keep`` entries of
    ``suffix``. Best effort: a full or read-only disk, or a file in the way, keeps nothing."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a new file of this process (O_EXCL, no link followed): whatever stands under the name is left alone
        with os.fdopen(open_regular(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode=0o600), "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except FileExistsError:  # something else holds the temporary name: not ours to remove
        return
    except (OSError, NormvarError):
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return
    prune_kept(path.parent, suffix, keep)


def prune_kept(folder: Path, suffix: str, keep: int) -> None:
    """Remove all but the ``keep`` most recently used entries of ``folder`` whose names end in ``suffix``."""
    try:
        entries = sorted(folder.glob(f"*{suffix}"), key=lambda p: p.stat().st_mtime, reverse=True)
        for p in entries[keep:]:
            p.unlink(missing_ok=True)
    except OSError:
        pass


__all__ = ["package_version", "open_kept", "touch_kept", "publish_kept", "prune_kept"]
