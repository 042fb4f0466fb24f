"""The run's heap: glibc set up so that a batch's activations reuse heap pages (``reuse_heap``); the freed
pages handed back when the heap has grown past a bound (``trim_if_grown``, after each batch) and at the
end (``trim_heap``). Used by the local run and by each Ray actor."""

from __future__ import annotations

import ctypes
import os
import sys

_LIBC: list = []  # [libc] once reuse_heap found glibc, else [None]
FREE_GROWTH = 2.0
"""``trim_if_grown`` trims once the heap keeps more than FREE_GROWTH x the free bytes the first batch left."""
FREE_FLOOR = 256 << 20
"""... and more than this many free bytes (small heaps are never trimmed between batches)."""

_FIRST_FREE: list = []  # [free heap bytes after the first batch]


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (2.33+): heap bytes in use (uordblks) and kept free (fordblks)."""

    _fields_ = [
        (n, ctypes.c_size_t)
        for n in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def reuse_heap() -> None:
    """glibc serves a block above its mmap threshold (128 KiB, raised dynamically up to 32 MiB) with a
    fresh mmap and gives it back on free: every large activation of every layer of every batch was then
    page-faulted afresh (zeroed 4 KiB at a time) — measured on MiniLM, 1,500 sentences: 4.5–5 s of
    system time and a forward pass ~25 % slower than with the heap reused. So, for the run's process:
    M_MMAP_THRESHOLD = M_TRIM_THRESHOLD = 1 GiB (blocks below it come from the main heap and are reused
    across layers and ops) and ``trim_if_grown()`` after every batch (malloc_trim(0) only once the
    heap keeps more than twice the free bytes the first batch left: activations of different shapes
    cannot pile up fragments without bound, and a steady run never pays for handing pages back and
    faulting them in again; measured on MiniLM, 3,000 sentences: malloc_trim after every batch cost 1.8 s of
    wall and 2.5 s of system time, peak RSS the same within noise). An explicit MALLOC_MMAP_THRESHOLD_
    in the environment wins."""
    if _LIBC or not sys.platform.startswith("linux") or os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, HEAP_BLOCKS)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, HEAP_BLOCKS)  # M_TRIM_THRESHOLD
        if hasattr(libc, "mallinfo2"):  # glibc 2.33+
            libc.mallinfo2.restype = _MallInfo2
        _LIBC.append(libc)
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to do
        _LIBC.append(None)


HEAP_BLOCKS = 1 << 30
"""Blocks below this come from the heap, reused (``reuse_heap``)."""


def trim_heap() -> None:
    """malloc_trim(0) when ``reuse_heap`` set glibc up: the batch's freed pages back to the OS."""
    if _LIBC and _LIBC[0] is not None:
        _LIBC[0].malloc_trim(0)


def release_heap() -> None:
    """At the end of a run: ``trim_heap()``, and the next run's first batch sets ``trim_if_grown``'s mark
    afresh (a worker process lives on from run to run)."""
    trim_heap()
    _FIRST_FREE.clear()


def free_heap_bytes() -> int | None:
    """Bytes glibc's heaps hold free (mallinfo2's fordblks, every arena); None without glibc 2.33+."""
    libc = _LIBC[0] if _LIBC else None
    fn = getattr(libc, "mallinfo2", None)
    return None if fn is None else int(fn().fordblks)


def trim_if_grown() -> None:
    """After a batch: ``trim_heap()`` only when the heap keeps more than FREE_GROWTH x (and FREE_FLOOR)
    the free bytes it kept after the first batch — one batch's freed working set is what the next batch
    reuses; more than twice that is fragments piling up. Without mallinfo2: trim after every batch."""
    if not (_LIBC and _LIBC[0] is not None):
        return
    free = free_heap_bytes()
    if free is None:
        trim_heap()
    elif not _FIRST_FREE:
        _FIRST_FREE.append(free)
    elif free > max(FREE_GROWTH * _FIRST_FREE[0], FREE_FLOOR):
        trim_heap()


__all__ = ["reuse_heap", "trim_heap", "trim_if_grown", "release_heap", "free_heap_bytes", "HEAP_BLOCKS", "FREE_GROWTH"]
