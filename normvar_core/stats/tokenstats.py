"""``TokenStats``: the per-(layer, token type) statistics of a run, and the corpus-level values of
any frequency band (the study's §4, eqs. 8–15). Pure numpy/pandas: no torch; the numba kernel
that builds the band tables is imported on first use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas is imported where a table is built (``normvar plan`` imports this module, builds none)
    import pandas as pd

_BLOCK = 64  # rows per block of the band prefix sums


def in_band(n, n_min: float = 1, n_max: float = math.inf) -> np.ndarray:
    """Mask of the counts with n_min <= n_t <= n_max: the study's frequency band (§5.3 uses 10 .. 1e5,
    i.e. 1 <= log10 n_t <= 5). The one place the band test is written; ``TokenStats.band`` applies it."""
    n = np.asarray(n)
    return (n >= n_min) & (n <= n_max)


@dataclass
class TokenStats:
    """Per-(layer, token type) statistics. Arrays: ``token_ids`` (T,) ascending, ``n`` (T,),
    ``mean`` (L, T, d), and ``q``, ``m``, ``v`` (L, T) = Q(X_t), M(X_t), V(X_t) (eqs. 4–6).
    ``layer_index`` (L,) gives the model's hidden-state index of each stored layer."""

    token_ids: np.ndarray
    n: np.ndarray
    mean: np.ndarray
    q: np.ndarray
    m: np.ndarray
    v: np.ndarray
    layer_index: np.ndarray = None  # type: ignore[assignment]
    _prefix: dict = field(default=None, repr=False, compare=False)  # type: ignore[arg-type]  # built on first use

    def __post_init__(self):
        if self.layer_index is None:
            self.layer_index = np.arange(self.q.shape[0], dtype=np.int64)
        self._prefix = {}

    @classmethod
    def from_moments(cls, token_ids, n, mean, s, layer_index=None) -> TokenStats:
        """From n_t, mu(X_t), S_t: M = ||mu||^2 (eq. 5), V = S/n (eq. 6), Q = M + V (eq. 1)."""
        m = np.einsum("ltd,ltd->lt", mean, mean, dtype=np.float64)
        v = np.asarray(s, dtype=np.float64) / np.maximum(n, 1)[None, :]
        v = np.maximum(v, 0.0)
        return cls(
            token_ids=np.asarray(token_ids, dtype=np.int64),
            n=np.asarray(n, dtype=np.int64),
            mean=mean,
            q=m + v,
            m=m,
            v=v,
            layer_index=layer_index,
        )

    # ------------------------------------------------------------------ shape helpers
    @property
    def num_layers(self) -> int:
        return int(self.q.shape[0])

    @property
    def num_types(self) -> int:
        return int(self.n.shape[0])

    @property
    def dim(self) -> int:
        return int(self.mean.shape[2])

    def layer(self, hidden_state_index: int) -> int:
        """Position in the arrays of the model's hidden-state index ``hidden_state_index``."""
        hits = np.flatnonzero(self.layer_index == hidden_state_index)
        if hits.size == 0:
            raise KeyError(f"layer {hidden_state_index} not stored (have {self.layer_index.tolist()})")
        return int(hits[0])

    def band(self, n_min: float = 1, n_max: float = math.inf) -> np.ndarray:
        """Mask of the types with n_min <= n_t <= n_max (the study's §5.3 uses 10 .. 1e5; ``in_band``)."""
        return in_band(self.n, n_min, n_max)

    def subset(self, mask: np.ndarray) -> TokenStats:
        mask = np.asarray(mask)
        return TokenStats(
            self.token_ids[mask],
            self.n[mask],
            self.mean[:, mask],
            self.q[:, mask],
            self.m[:, mask],
            self.v[:, mask],
            self.layer_index.copy(),
        )

    # ------------------------------------------------------------------ corpus level (§4)
    def _band_tables(self) -> dict:
        """Types sorted by count, with block prefix sums (every _BLOCK rows) of
        n_t, n_t Q_t, n_t V_t, n_t ||mu_t - c||^2 and n_t (mu_t - c), c = mu(X) of all types."""
        if self._prefix:
            return self._prefix
        order = np.argsort(self.n, kind="stable")
        n = self.n[order].astype(np.float64)
        L, T, d = self.mean.shape
        nb = T // _BLOCK
        bq = np.zeros((L, nb + 1))
        bv = np.zeros((L, nb + 1))
        bdev = np.zeros((L, nb + 1))
        bvec = np.zeros((L, nb + 1, d))
        bn = np.zeros(nb + 1)
        full = nb * _BLOCK

        def blk(a):  # sums over blocks of _BLOCK consecutive count-sorted types
            return a[..., :full].reshape(*a.shape[:-1], nb, _BLOCK).sum(-1)

        if nb:
            bq[:, 1:] = np.cumsum(blk(n * self.q[:, order]), axis=1)
            bv[:, 1:] = np.cumsum(blk(n * self.v[:, order]), axis=1)
        c = np.zeros((L, d))  # one numba pass over the means, no L x T x d temporaries
        from normvar_core.stats.kernels import block_kernel

        block_kernel(self.mean, order, n, self.n.astype(np.float64), nb, _BLOCK, c, bvec, bdev)
        bvec[:, 1:] = np.cumsum(bvec[:, 1:], axis=1)
        bdev[:, 1:] = np.cumsum(bdev[:, 1:], axis=1)
        if nb:
            bn[1:] = np.cumsum(n[: nb * _BLOCK].reshape(nb, _BLOCK).sum(1))
        self._prefix = dict(order=order, n_sorted=self.n[order], c=c, bq=bq, bv=bv, bdev=bdev, bvec=bvec, bn=bn)
        return self._prefix

    def _prefix_at(self, p: int) -> tuple:
        """Sums over the first p count-sorted types: (N, nQ, nV, n||mu-c||^2, n(mu-c)) per layer."""
        t = self._prefix
        b = p // _BLOCK
        lo = b * _BLOCK
        N = t["bn"][b]
        sq, sv, sdev, svec = t["bq"][:, b].copy(), t["bv"][:, b].copy(), t["bdev"][:, b].copy(), t["bvec"][:, b].copy()
        if p > lo:
            idx = t["order"][lo:p]
            n = self.n[idx].astype(np.float64)
            N = N + n.sum()
            sq += self.q[:, idx] @ n
            sv += self.v[:, idx] @ n
            mu = self.mean[:, idx].astype(np.float64) - t["c"][:, None, :]
            sdev += np.einsum("ltd,ltd,t->l", mu, mu, n)
            svec += np.einsum("ltd,t->ld", mu, n)
        return N, sq, sv, sdev, svec

    def corpus(self, n_min: float = 1, n_max: float = math.inf) -> pd.DataFrame:
        """Per layer, over the types with n_min <= n_t <= n_max (§4, eqs. 8–15):
        n, n_types, Q(X) = sum p_t Q(X_t) (15), M(X) = ||sum p_t mu(X_t)||^2 (14, 5),
        V_W(X) = sum p_t V(X_t) (10), V_B(X) = sum p_t ||mu(X_t) - mu(X)||^2 (11), V = V_W + V_B (9).
        Uses block prefix sums over count-sorted types: any band costs O(L d) after the first call."""
        import pandas as pd

        t = self._band_tables()
        lo = int(np.searchsorted(t["n_sorted"], n_min, side="left"))
        hi = int(np.searchsorted(t["n_sorted"], n_max, side="right"))
        L = self.num_layers
        if hi <= lo:
            nan = np.full(L, np.nan)
            return pd.DataFrame(dict(layer=self.layer_index, n=0, n_types=0, q=nan, m=nan, v=nan, v_w=nan, v_b=nan))
        N1, q1, v1, d1, vec1 = self._prefix_at(hi)
        N0, q0, v0, d0, vec0 = self._prefix_at(lo)
        N = N1 - N0
        off = (vec1 - vec0) / N  # mu(X) - c
        mu = t["c"] + off
        q = (q1 - q0) / N
        v_w = (v1 - v0) / N
        m = np.einsum("ld,ld->l", mu, mu)
        v_b = np.maximum((d1 - d0) / N - np.einsum("ld,ld->l", off, off), 0.0)
        rows = dict(
            layer=self.layer_index,
            n=np.full(L, int(round(N)), dtype=np.int64),
            n_types=np.full(L, hi - lo, dtype=np.int64),
            q=q,
            m=m,
            v=v_w + v_b,
            v_w=v_w,
            v_b=v_b,
        )
        return pd.DataFrame(rows)


__all__ = ["TokenStats"]
