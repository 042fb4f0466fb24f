"""The run's heap (execute/heap.py): after reuse_heap, freed activations stay in the heap for the next batch;
trim_if_grown hands them back only once the heap keeps more than FREE_GROWTH x the first batch's free bytes.
Measured through glibc's own mallinfo2, in a fresh process (mallopt is process-wide)."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.subprocess

SCRIPT = r"""
import numpy as np
from normvar_core.pipeline.execute import heap

heap.reuse_heap()
if heap.free_heap_bytes() is None:
    print("NO-MALLINFO2"); raise SystemExit
MB = 1 << 20

def batch(mb):  # a batch's activations: many blocks, all freed at its end
    blocks = [np.ones(4 * MB // 8) for _ in range(mb // 4)]
    del blocks

batch(100)
first = heap.free_heap_bytes()
heap.trim_if_grown()           # the first batch sets the mark, trims nothing
after_first = heap.free_heap_bytes()
batch(100)                     # the same working set again: reused, not trimmed
heap.trim_if_grown()
steady = heap.free_heap_bytes()
batch(600)                     # the heap now keeps 6x the first batch's free bytes: trimmed
grown = heap.free_heap_bytes()
heap.trim_if_grown()
trimmed = heap.free_heap_bytes()
heap.release_heap()
print(first // MB, after_first // MB, steady // MB, grown // MB, trimmed // MB, len(heap._FIRST_FREE))
"""


def test_trim_only_when_the_free_heap_has_grown():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout.split()
    assert out != ["NO-MALLINFO2"], "this glibc has no mallinfo2 (2.33+)"
    first, after_first, steady, grown, trimmed, marks = map(int, out)
    assert first >= 90 and after_first == first  # one batch's freed working set is kept for the next
    assert 90 <= steady <= 2 * first  # reused, not trimmed, not doubled
    assert grown >= 500 and trimmed < 20  # more than twice the first batch's: handed back to the OS
    assert marks == 0  # release_heap: the next run sets its own mark
