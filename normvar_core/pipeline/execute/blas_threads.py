"""numpy's BLAS held to one thread per calling thread in a process whose cores torch's forward pass owns.

numpy and scipy bring their own OpenBLAS, with its own worker threads; torch runs its matmuls in MKL on its
own OpenMP pool. After each call OpenBLAS's workers spin, waiting for the next one, and on a machine whose
cores torch's threads use they take those cores from the forward pass and from the results being finished
beside the run file's write. Measured on 2 cores (MiniLM, 3,000 sentences, default run, one process): with
OpenBLAS's default threads 32.2–33.3 s of wall and 58.5 CPU-s (the results phase alone 6.2–7.7 s, 12–13 CPU-s);
held to one thread 25.2–27.3 s and 43–46 CPU-s (the results phase 3.7 s, 6.5 CPU-s). The run's own large
products run in torch (``layerview.gram``; the TwoNN search's ``torch.bmm``), so they still use every core;
per-layer work in parallel (``layerview.per_layer``) was already one BLAS thread per layer.

``one_blas_thread()`` holds the limit for a ``with`` block (a local run: the worker process and library callers
get their setting back); ``hold_one_blas_thread()`` for the rest of the process (a Ray actor). Both go through
threadpoolctl, which limits OpenBLAS (and a separate MKL, had numpy one) but not the MKL inside torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's and scipy's BLAS at one thread inside the block, its previous setting back after it."""
    from threadpoolctl import threadpool_limits  # in requirements.txt

    with threadpool_limits(1, user_api="blas"):
        yield


def hold_one_blas_thread() -> None:
    """numpy's and scipy's BLAS at one thread for the rest of this process (a Ray actor)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


__all__ = ["one_blas_thread", "hold_one_blas_thread"]
