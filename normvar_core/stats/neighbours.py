"""Nearest token types by cosine at one layer (TensorBoard Projector's "nearest points").

For a query vector q (a type's exact mean μ(X_t) at the layer, or one sampled embedding x) and the
types' means μ(X_s) at the same layer, the cosine is cos(q, μ_s) = ⟨q, μ_s⟩ / (‖q‖ ‖μ_s‖); the k types
with the largest cosine are returned, ties broken by the smaller token id. Types whose mean is the
zero vector have no cosine and are never neighbours. float64 throughout; pure numpy.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def cosine_to_all(means: np.ndarray, query: np.ndarray) -> np.ndarray:
    """cos(query, means[s]) for every row s of ``means`` (T, d); NaN where a norm is zero."""
    M = np.asarray(means, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64).ravel()
    norms = np.linalg.norm(M, axis=1) * np.linalg.norm(q)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norms > 0, (M @ q) / np.where(norms > 0, norms, 1.0), np.nan)


def nearest_types(
    means: np.ndarray,
    token_ids: np.ndarray,
    query: np.ndarray,
    k: int = 10,
    *,
    exclude: int | None = None,
    candidates: np.ndarray | None = None,
) -> pd.DataFrame:
    """The ``k`` types whose mean is nearest to ``query`` by cosine.

    ``means``: (T, d) μ(X_s) at one layer, rows aligned with ``token_ids`` (T,); ``exclude``: a token id
    left out (the query's own type); ``candidates``: bool (T,) mask of the types allowed (e.g. a
    frequency band). Returns DataFrame[rank, token_id, cosine], largest cosine first."""
    ids = np.asarray(token_ids, dtype=np.int64)
    cos = cosine_to_all(means, query)
    ok = np.isfinite(cos)
    if candidates is not None:
        ok &= np.asarray(candidates, dtype=bool)
    if exclude is not None:
        ok &= ids != int(exclude)
    idx = np.flatnonzero(ok)
    if idx.size == 0 or k <= 0:
        return pd.DataFrame({"rank": np.zeros(0, np.int64), "token_id": np.zeros(0, np.int64), "cosine": np.zeros(0)})
    # order by (-cosine, token id): lexsort's last key is the primary one
    order = idx[np.lexsort((ids[idx], -cos[idx]))][: int(k)]
    return pd.DataFrame({"rank": np.arange(1, order.size + 1), "token_id": ids[order], "cosine": cos[order]})


__all__ = ["cosine_to_all", "nearest_types"]
