"""Exact streaming moments of token-wise embedding sets X_t (the study's §3–4).

For every stored layer and token type t, ``TokenMoments`` keeps

* n_t = |X_t|,
* mu(X_t) (eq. 3), in float64 (or float32 storage, see ``mean_dtype``),
* S_t = sum_{x in X_t} ||x - mu(X_t)||^2, the within-type sum of squared deviations,

from which Q(X_t) (eq. 4), M(X_t) = ||mu(X_t)||^2 (eq. 5) and V(X_t) = S_t / n_t (eq. 6) follow,
with Q = M + V (eq. 1) holding by construction.

Numerical method. Each batch is reduced per type *relative to a reference* r_t: the current
running mean (or, for a type seen for the first time, its first embedding in the batch). With
d = x - r_t, s1 = sum d and ss = sum ||d||^2 over the c_t new embeddings, the combined state is
(Chan, Golub & LeVeque's parallel update with the old mean as reference):

    n'  = n + c
    mu' = r + s1 / n'
    S'  = S + ss - ||s1||^2 / n'

Nothing is ever formed as a raw sum of squares, so V stays exact to ~1e-12 relative even when
||mu||^2 / V ~ 1e9 (decoders' massive activations), unlike V = Q - M from raw sums (eq. 1 used
directly, as in the study's Algorithm 1). On the CPU one fused numba kernel does the batch in a
single pass over the embeddings (float64 arithmetic, no N x d float64 copy); on other devices the
same update runs with torch ``index_add_``.

Memory: L x T x d means + L x T scalars (T = token types seen), never growing with corpus length:
bytes ~ 8 L T d (float64 means) or 4 L T d (``mean_dtype="float32"``). bert-base shape, 13 layers
x 768 x 30k types: 2.4 GB in float64, 1.2 GB in float32; keep fewer layers to go lower.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

import numba

_FLOAT_DTYPES = {torch.float16, torch.bfloat16, torch.float32, torch.float64}
_BLOCK = 64  # rows per block of the band prefix sums in TokenStats


# ----------------------------------------------------------------------------- CPU kernels

@numba.njit(parallel=True, cache=True, nogil=True, fastmath=True)
def _update_kernel(X, order, starts, rows, n_new, mean, s_out, bounds):  # pragma: no cover
    """One pass over a batch. X (L,N,d) f32/f64; ``order`` sorts the N embeddings by type,
    group g owns order[starts[g]:starts[g+1]] and table row rows[g]; n_new[g] = n' (eq. above).
    Threads take contiguous ranges of groups (``bounds``, balanced by work) and whole rows.
    Updates ``mean`` in place; s_out[l, g] = ss - ||s1||^2 / n'. All arithmetic in float64;
    the column loops are independent lanes, so they vectorise."""
    L, N, d = X.shape
    n_chunks = bounds.shape[0] - 1
    for task in numba.prange(L * n_chunks):
        l = task // n_chunks
        ch = task % n_chunks
        s1 = np.empty(d, dtype=np.float64)
        s2 = np.empty(d, dtype=np.float64)
        for g in range(bounds[ch], bounds[ch + 1]):
            mrow = mean[l, rows[g]]
            inv_n = 1.0 / n_new[g]
            k0 = starts[g]
            k1 = starts[g + 1]
            acc = 0.0
            if k1 - k0 == 1:  # a type seen once in this batch: one fused loop
                xrow = X[l, order[k0]]
                for j in range(d):
                    dv = np.float64(xrow[j]) - np.float64(mrow[j])
                    acc += dv * dv * (1.0 - inv_n)
                    mrow[j] = np.float64(mrow[j]) + dv * inv_n
            else:
                for j in range(d):
                    s1[j] = 0.0
                    s2[j] = 0.0
                for k in range(k0, k1):
                    xrow = X[l, order[k]]
                    for j in range(d):
                        dv = np.float64(xrow[j]) - np.float64(mrow[j])
                        s1[j] += dv
                        s2[j] += dv * dv
                for j in range(d):
                    v = s1[j]
                    acc += s2[j] - v * v * inv_n
                    mrow[j] = np.float64(mrow[j]) + v * inv_n
            s_out[l, g] = acc

@numba.njit(parallel=True, cache=True, nogil=True)
def _block_kernel(mean, order, n_sorted, n_orig, nb, block, c, bvec, bdev):  # pragma: no cover
    """Per layer: c = mu(X) over all types, then per block of ``block`` count-sorted types
    bvec[b+1] = sum n_t (mu_t - c) and bdev[b+1] = sum n_t ||mu_t - c||^2 (not yet cumulated)."""
    L, T, d = mean.shape
    N = 0.0
    for t in range(T):
        N += n_sorted[t]
    for l in numba.prange(L):
        for t in range(T):  # sequential rows: c = sum_t p_t mu_t (eq. 14)
            row = mean[l, t]
            w = n_orig[t] / N
            for j in range(d):
                c[l, j] += w * np.float64(row[j])
        for b in range(nb):
            acc = 0.0
            for k in range(b * block, (b + 1) * block):
                row = mean[l, order[k]]
                w = n_sorted[k]
                dev = 0.0
                for j in range(d):
                    dv = np.float64(row[j]) - c[l, j]
                    bvec[l, b + 1, j] += w * dv
                    dev += dv * dv
                acc += w * dev
            bdev[l, b + 1] = acc


def _as_tensor(x, name: str) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x))
    if isinstance(x, torch.Tensor):
        return x
    raise TypeError(f"{name} must be a torch tensor or numpy array, got {type(x).__name__}")


class TokenMoments:
    """Streaming accumulator of n_t, mu(X_t) and S_t for every (layer, token type).

    >>> acc = TokenMoments(num_layers=L, dim=d)        # state in float64
    >>> acc.update(states, token_ids)                  # states (L, N, d), token_ids (N,)
    >>> res = acc.result()                             # TokenStats

    ``backend``: "numba" (CPU default: one fused pass) or "torch" (any device: index_add_).
    ``update`` and ``merge`` return ``self``. Token ids are any non-negative integers; unseen ids
    grow the tables. ``state_dict()`` holds only numpy arrays (safe to save with np.savez or
    safetensors; never pickled).
    """

    def __init__(self, num_layers: int, dim: int, device: str | torch.device = "cpu",
                 mean_dtype: str = "float64", layer_index=None, backend: str = "auto"):
        if num_layers < 1 or dim < 1:
            raise ValueError("num_layers and dim must be >= 1")
        if mean_dtype not in ("float64", "float32"):
            raise ValueError("mean_dtype must be 'float64' or 'float32'")
        self.num_layers = int(num_layers)
        self.dim = int(dim)
        self.device = torch.device(device)
        self.mean_dtype = mean_dtype
        if backend not in ("auto", "numba", "torch"):
            raise ValueError("backend must be 'auto', 'numba' or 'torch'")
        if backend == "numba" and self.device.type != "cpu":
            raise ValueError("the numba backend needs device='cpu'")
        self.backend = ("numba" if self.device.type == "cpu" else "torch") if backend == "auto" else backend
        self.layer_index = (np.arange(num_layers, dtype=np.int64) if layer_index is None
                            else np.asarray(layer_index, dtype=np.int64))
        if self.layer_index.shape != (self.num_layers,):
            raise ValueError("layer_index must have one entry per stored layer")
        self._tdtype = torch.float64 if mean_dtype == "float64" else torch.float32
        self._T = 0
        self._cap = 0
        self._ids = torch.empty(0, dtype=torch.int64, device=self.device)
        self._n = torch.empty(0, dtype=torch.int64, device=self.device)
        self._mean = torch.empty((self.num_layers, 0, self.dim), dtype=self._tdtype, device=self.device)
        self._s = torch.empty((self.num_layers, 0), dtype=torch.float64, device=self.device)
        self._row_of = torch.full((0,), -1, dtype=torch.int64, device=self.device)
        self.n_embeddings = 0

    # ------------------------------------------------------------------ table management
    @property
    def num_types(self) -> int:
        return self._T

    def _reserve(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(need, int(self._cap * 1.5) + 64)
        mean = torch.zeros((self.num_layers, cap, self.dim), dtype=self._tdtype, device=self.device)
        s = torch.zeros((self.num_layers, cap), dtype=torch.float64, device=self.device)
        ids = torch.zeros(cap, dtype=torch.int64, device=self.device)
        n = torch.zeros(cap, dtype=torch.int64, device=self.device)
        T = self._T
        if T:
            mean[:, :T] = self._mean[:, :T]
            s[:, :T] = self._s[:, :T]
            ids[:T] = self._ids[:T]
            n[:T] = self._n[:T]
        self._mean, self._s, self._ids, self._n, self._cap = mean, s, ids, n, cap

    def reserve(self, num_types: int) -> "TokenMoments":
        """Pre-size the tables for ``num_types`` types (e.g. counted from the tokenized corpus),
        so they are allocated once instead of grown by copies."""
        self._reserve(int(num_types))
        return self

    def _rows_for(self, uniq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Table rows of the (sorted, unique) ids; new ids get new rows. Returns (rows, is_new)."""
        top = int(uniq[-1]) + 1
        if top > self._row_of.numel():
            grown = torch.full((max(top, 2 * self._row_of.numel()),), -1, dtype=torch.int64,
                               device=self.device)
            grown[: self._row_of.numel()] = self._row_of
            self._row_of = grown
        if self.device.type == "cpu":  # numpy views: much lower per-call overhead than torch indexing
            row_of, u = self._row_of.numpy(), uniq.numpy()
            rows_np = row_of[u]
            new_np = rows_np < 0
            k = int(new_np.sum())
            if k:
                self._reserve(self._T + k)
                fresh = np.arange(self._T, self._T + k)
                rows_np[new_np] = fresh
                row_of[u[new_np]] = fresh
                self._ids.numpy()[self._T:self._T + k] = u[new_np]
                self._T += k
            return torch.from_numpy(rows_np), torch.from_numpy(new_np)
        rows = self._row_of[uniq]
        is_new = rows < 0
        k = int(is_new.sum())
        if k:
            self._reserve(self._T + k)
            new_rows = torch.arange(self._T, self._T + k, device=self.device)
            rows[is_new] = new_rows
            self._row_of[uniq[is_new]] = new_rows
            self._ids[self._T:self._T + k] = uniq[is_new]
            self._T += k
        return rows, is_new

    # ------------------------------------------------------------------ update
    def update(self, states, token_ids) -> "TokenMoments":
        """Add a batch: ``states`` (L, N, d) (fp16/bf16/fp32/fp64), ``token_ids`` (N,) ints >= 0."""
        X = _as_tensor(states, "states")
        ids = _as_tensor(token_ids, "token_ids")
        if X.dim() != 3 or X.shape[0] != self.num_layers or X.shape[2] != self.dim:
            raise ValueError(f"states must have shape ({self.num_layers}, N, {self.dim}), got {tuple(X.shape)}")
        if X.dtype not in _FLOAT_DTYPES:
            raise TypeError(f"states must be floating point, got {X.dtype}")
        ids = ids.reshape(-1).to(device=self.device, dtype=torch.int64)
        if ids.numel() != X.shape[1]:
            raise ValueError(f"token_ids has {ids.numel()} entries for {X.shape[1]} embeddings")
        N = ids.numel()
        if N == 0:
            return self
        if int(ids.min()) < 0:
            raise ValueError("token ids must be non-negative")
        X = X.to(self.device)
        if self.backend == "numba":
            self._update_cpu(X, ids.numpy())
        else:
            uniq, inv, counts = torch.unique(ids, sorted=True, return_inverse=True, return_counts=True)
            rows, is_new = self._rows_for(uniq)
            if bool(is_new.any()):
                # reference for a new type = its first embedding in the batch (keeps deviations small)
                order = torch.argsort(inv, stable=True)
                starts = torch.cumsum(counts, 0) - counts
                self._mean[:, rows[is_new]] = X[:, order[starts[is_new]]].to(self._tdtype)
            n_new = self._n[rows] + counts
            self._update_torch(X, inv, rows, n_new)
            self._n[rows] = n_new
        self.n_embeddings += N
        return self

    def _update_cpu(self, X: torch.Tensor, ids: np.ndarray) -> None:
        """CPU path: one sort of the ids, bookkeeping in numpy views, then the fused kernel."""
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        first = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
        uniq = sorted_ids[first]
        starts = np.append(first, ids.size).astype(np.int64)
        counts = np.diff(starts)
        rows_t, is_new_t = self._rows_for(torch.from_numpy(uniq))
        rows, is_new = rows_t.numpy(), is_new_t.numpy()
        if X.dtype in (torch.float16, torch.bfloat16):
            X = X.float()
        Xn = X.contiguous().numpy()
        mean = self._mean.numpy()
        if is_new.any():
            # reference for a new type = its first embedding in the batch (keeps deviations small)
            mean[:, rows[is_new]] = Xn[:, order[first[is_new]]]
        n = self._n.numpy()
        n_new = n[rows] + counts
        # contiguous ranges of groups per thread, balanced by work (rows + one per group)
        work = np.cumsum(counts + 1)
        n_chunks = max(1, min(numba.get_num_threads() * 2, rows.size))
        cuts = np.searchsorted(work, np.linspace(0, work[-1], n_chunks + 1)[1:-1])
        bounds = np.concatenate(([0], cuts, [rows.size])).astype(np.int64)
        s_out = np.empty((self.num_layers, rows.size), dtype=np.float64)
        _update_kernel(Xn, order, starts, rows, n_new.astype(np.float64), mean, s_out, bounds)
        self._s.numpy()[:, rows] += s_out
        n[rows] = n_new

    def _update_torch(self, X, inv, rows, n_new) -> None:
        U = rows.numel()
        n_new64 = n_new.to(torch.float64)
        for l in range(self.num_layers):  # one layer at a time bounds the N x d float64 temporaries
            ref = self._mean[l, rows].to(torch.float64)
            dev = X[l].to(torch.float64) - ref[inv]
            s1 = torch.zeros((U, self.dim), dtype=torch.float64, device=self.device).index_add_(0, inv, dev)
            ss = torch.zeros(U, dtype=torch.float64, device=self.device).index_add_(0, inv, (dev * dev).sum(1))
            self._mean[l, rows] = (ref + s1 / n_new64[:, None]).to(self._tdtype)
            self._s[l, rows] += ss - (s1 * s1).sum(1) / n_new64

    # ------------------------------------------------------------------ merge
    def merge(self, other: "TokenMoments") -> "TokenMoments":
        """Pool another accumulator into this one (in place; returns self). Exact (Chan et al.):
        mu = mu_a + delta n_b / n,  S = S_a + S_b + ||delta||^2 n_a n_b / n,  delta = mu_b - mu_a."""
        if (other.num_layers, other.dim) != (self.num_layers, self.dim):
            raise ValueError("cannot merge accumulators of different shapes")
        if other._T == 0:
            return self
        dev = self.device
        o_ids = other._ids[: other._T].to(dev)
        o_n = other._n[: other._T].to(dev)
        o_mean = other._mean[:, : other._T].to(dev, torch.float64)
        o_s = other._s[:, : other._T].to(dev)
        order = torch.argsort(o_ids)
        o_ids, o_n, o_mean, o_s = o_ids[order], o_n[order], o_mean[:, order], o_s[:, order]
        rows, is_new = self._rows_for(o_ids)
        old_n = self._n[rows].to(torch.float64)
        b_n = o_n.to(torch.float64)
        n = old_n + b_n
        mu_a = self._mean[:, rows].to(torch.float64)
        mu_a[:, is_new] = o_mean[:, is_new]
        delta = o_mean - mu_a
        self._mean[:, rows] = (mu_a + delta * (b_n / n)[None, :, None]).to(self._tdtype)
        self._s[:, rows] = self._s[:, rows] + o_s + (delta * delta).sum(-1) * (old_n * b_n / n)[None, :]
        self._n[rows] = self._n[rows] + o_n
        self.n_embeddings += other.n_embeddings
        return self

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, np.ndarray]:
        """Numpy arrays only (no pickle): ids, n, mean, s, layer_index, shape info."""
        T = self._T
        return {
            "ids": self._ids[:T].cpu().numpy().copy(),
            "n": self._n[:T].cpu().numpy().copy(),
            "mean": self._mean[:, :T].cpu().numpy().copy(),
            "s": self._s[:, :T].cpu().numpy().copy(),
            "layer_index": self.layer_index.copy(),
            "n_embeddings": np.array([self.n_embeddings], dtype=np.int64),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, np.ndarray], device: str | torch.device = "cpu") -> "TokenMoments":
        mean = np.asarray(state["mean"])
        L, T, d = mean.shape
        acc = cls(L, d, device=device, mean_dtype="float32" if mean.dtype == np.float32 else "float64",
                  layer_index=state.get("layer_index"))
        if T:
            acc._reserve(T)
            ids = torch.from_numpy(np.asarray(state["ids"], dtype=np.int64)).to(acc.device)
            acc._ids[:T] = ids
            acc._n[:T] = torch.from_numpy(np.asarray(state["n"], dtype=np.int64)).to(acc.device)
            acc._mean[:, :T] = torch.from_numpy(mean).to(acc.device, acc._tdtype)
            acc._s[:, :T] = torch.from_numpy(np.asarray(state["s"], dtype=np.float64)).to(acc.device)
            acc._T = T
            acc._row_of = torch.full((int(ids.max()) + 1,), -1, dtype=torch.int64, device=acc.device)
            acc._row_of[ids] = torch.arange(T, device=acc.device)
        acc.n_embeddings = int(np.asarray(state.get("n_embeddings", [0]))[0])
        return acc

    def result(self) -> "TokenStats":
        """The per-(layer, type) statistics, types sorted by token id."""
        T = self._T
        ids = self._ids[:T].cpu().numpy()
        order = np.argsort(ids, kind="stable")
        mean = self._mean[:, :T].cpu().numpy()[:, order]
        n = self._n[:T].cpu().numpy()[order].astype(np.int64)
        s = self._s[:, :T].cpu().numpy()[:, order]
        return TokenStats.from_moments(ids[order].astype(np.int64), n, mean, s, self.layer_index.copy())


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
    _prefix: dict = field(default=None, repr=False, compare=False)  # type: ignore[assignment]

    def __post_init__(self):
        if self.layer_index is None:
            self.layer_index = np.arange(self.q.shape[0], dtype=np.int64)
        self._prefix = {}

    @classmethod
    def from_moments(cls, token_ids, n, mean, s, layer_index=None) -> "TokenStats":
        """From n_t, mu(X_t), S_t: M = ||mu||^2 (eq. 5), V = S/n (eq. 6), Q = M + V (eq. 1)."""
        m = np.einsum("ltd,ltd->lt", mean, mean, dtype=np.float64)
        v = np.asarray(s, dtype=np.float64) / np.maximum(n, 1)[None, :]
        v = np.maximum(v, 0.0)
        return cls(token_ids=np.asarray(token_ids, dtype=np.int64), n=np.asarray(n, dtype=np.int64),
                   mean=mean, q=m + v, m=m, v=v, layer_index=layer_index)

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
        """Mask of the types with n_min <= n_t <= n_max (the study's §5.3 uses 10 .. 1e5)."""
        return (self.n >= n_min) & (self.n <= n_max)

    def subset(self, mask: np.ndarray) -> "TokenStats":
        mask = np.asarray(mask)
        return TokenStats(self.token_ids[mask], self.n[mask], self.mean[:, mask], self.q[:, mask],
                          self.m[:, mask], self.v[:, mask], self.layer_index.copy())

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
        _block_kernel(self.mean, order, n, self.n.astype(np.float64), nb, _BLOCK, c, bvec, bdev)
        bvec[:, 1:] = np.cumsum(bvec[:, 1:], axis=1)
        bdev[:, 1:] = np.cumsum(bdev[:, 1:], axis=1)
        if nb:
            bn[1:] = np.cumsum(n[: nb * _BLOCK].reshape(nb, _BLOCK).sum(1))
        self._prefix = dict(order=order, n_sorted=self.n[order], c=c, bq=bq, bv=bv, bdev=bdev,
                            bvec=bvec, bn=bn)
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
        t = self._band_tables()
        lo = int(np.searchsorted(t["n_sorted"], n_min, side="left"))
        hi = int(np.searchsorted(t["n_sorted"], n_max, side="right"))
        L = self.num_layers
        rows = []
        if hi <= lo:
            nan = np.full(L, np.nan)
            return pd.DataFrame(dict(layer=self.layer_index, n=0, n_types=0, q=nan, m=nan, v=nan,
                                     v_w=nan, v_b=nan))
        N1, q1, v1, d1, vec1 = self._prefix_at(hi)
        N0, q0, v0, d0, vec0 = self._prefix_at(lo)
        N = N1 - N0
        off = (vec1 - vec0) / N                       # mu(X) - c
        mu = t["c"] + off
        q = (q1 - q0) / N
        v_w = (v1 - v0) / N
        m = np.einsum("ld,ld->l", mu, mu)
        v_b = np.maximum((d1 - d0) / N - np.einsum("ld,ld->l", off, off), 0.0)
        rows = dict(layer=self.layer_index, n=np.full(L, int(round(N)), dtype=np.int64),
                    n_types=np.full(L, hi - lo, dtype=np.int64), q=q, m=m, v=v_w + v_b, v_w=v_w, v_b=v_b)
        return pd.DataFrame(rows)

