"""The forward pass timed on the thread's CPU clock, for the benchmarks that set a measure's own cost against it
(``bench_layer_by_layer``, ``bench_layer_linearity``, ``bench_position0``): CPU time of the thread is steadier
than wall time when other jobs share the cores."""

from __future__ import annotations

import time
from collections.abc import Iterator


def timed_batches(setup, spent: dict) -> Iterator:
    """Every batch of ``setup``'s pass (``execute.prepare``'s source and plan), in order; the thread's CPU seconds
    of making each (tokenized batch → forward pass → the counted states) added to ``spent["forward"]``."""
    it = setup.source.batches(setup.plan, 0, setup.plan.n_batches)
    while True:
        t = time.thread_time()
        sb = next(it, None)
        spent["forward"] += time.thread_time() - t
        if sb is None:
            return
        yield sb
