"""How close two processes' runs of one model on one corpus must be: float32 rounding, not bit for bit.

Within one process a float32 forward pass repeats bit for bit, and the tests that stay in one process compare
exactly. Across processes it need not: the CPU matmul kernels (oneDNN, MKL, OpenBLAS) pick their blocking, and
so the order of their partial sums, from the thread count and what the machine has free, so a hidden state
computed in a worker, a Ray actor or a resumed ``normvar compute`` may round a few float32 ulps away from the
same state computed here (eps = 2⁻²³ ≈ 1.2e-7; 2.4e-7 relative was seen on a loaded machine). Every
statistic summed from those states in float64 inherits that relative error, so runs are compared at
``RTOL`` = 1e-5 (about 80 ulps) of the values' own scale: far above rounding, far below any real fault (a
batch lost or counted twice moves a moment by about 1 / number of batches).
"""

from __future__ import annotations

import numpy as np

RTOL = 1e-5


def assert_close(got, want, err_msg: str = "", rtol: float = RTOL) -> None:
    """``got`` equals ``want`` to ``rtol`` relative, with an absolute floor of ``rtol`` times the largest
    |want|: a value that cancels (V = Q − M, an eigenvalue at the rounding floor) keeps its column's error."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    finite = np.abs(want[np.isfinite(want)])
    atol = rtol * float(finite.max()) if finite.size else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=err_msg)
