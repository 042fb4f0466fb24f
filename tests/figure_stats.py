"""Synthetic TokenStats for the figure tests: ``synthetic_stats`` (Zipf-like counts, a per-layer trade-off) and
``table`` (its token table at one layer)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from normvar_core.stats import analyses
from normvar_core.stats.tokenstats import TokenStats


def synthetic_stats(T: int = 600, L: int = 5, d: int = 8, seed: int = 0) -> TokenStats:
    """Zipf-like counts and a per-layer trade-off: Q_t ~ constant, M_t falling with log10 n_t."""
    rng = np.random.default_rng(seed)
    n = np.maximum(1, (1e5 / np.arange(1, T + 1) * rng.uniform(0.5, 1.5, T))).astype(np.int64)
    mean = np.empty((L, T, d))
    s = np.empty((L, T))
    for l in range(L):
        q = 100 * (1 + 0.05 * rng.standard_normal(T)).clip(0.3)
        f = (0.8 - 0.12 * np.log10(n) + 0.03 * rng.standard_normal(T)).clip(0.02, 0.98)
        dirs = rng.standard_normal((T, d))
        dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
        mean[l] = dirs * np.sqrt(f * q)[:, None]
        s[l] = (q - f * q) * n
    return TokenStats.from_moments(np.arange(T, dtype=np.int64) * 2 + 5, n, mean, s)


def table(stats: TokenStats, layer: int) -> pd.DataFrame:
    """The library's token table of ``layer`` (tokens named tok0, tok1, …), the columns the figures draw."""
    t = analyses.token_table(stats, layer, [f"tok{i}" for i in range(stats.num_types)])
    return t[["token_id", "token", "n", "q", "m", "v"]]
