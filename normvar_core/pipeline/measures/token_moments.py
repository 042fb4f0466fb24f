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

from typing import Any

import numpy as np
import torch

from normvar_core.pipeline.measures.state import Stateful
from normvar_core.stats.tokenstats import TokenStats

_FLOAT_DTYPES = {torch.float16, torch.bfloat16, torch.float32, torch.float64}
_ROW_AXIS = {"ids": 0, "n": 0, "mean": 1, "s": 1}  # the per-type tables and the axis of their type rows


def _as_tensor(x, name: str) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x))
    if isinstance(x, torch.Tensor):
        return x
    raise TypeError(f"{name} must be a torch tensor or numpy array, got {type(x).__name__}")


class TokenMoments(Stateful):
    """Streaming measure of n_t, mu(X_t) and S_t for every (layer, token type).

    >>> states = np.array([[[1.0, 0.0], [3.0, 0.0], [0.0, 2.0]]])      # (L, N, d) = (1, 3, 2)
    >>> res = TokenMoments(num_layers=1, dim=2).update(states, np.array([7, 7, 9])).result()
    >>> res.token_ids.tolist(), res.n.tolist()
    ([7, 9], [2, 1])
    >>> res.m.tolist(), res.v.tolist(), res.q.tolist()  # M = ‖μ‖², V = E‖x − μ‖², Q = M + V (eqs. 4–6)
    ([[4.0, 4.0]], [[1.0, 0.0]], [[5.0, 4.0]])

    Two partial states of disjoint data merge exactly (Chan's pooled update):

    >>> a = TokenMoments(1, 2).update(states[:, :1], np.array([7]))
    >>> b = TokenMoments(1, 2).update(states[:, 1:], np.array([7, 9]))
    >>> a.merge(b).result().v.tolist()
    [[1.0, 0.0]]

    ``backend``: "numba" (CPU default: one fused pass) or "torch" (any device: index_add_).
    ``update`` and ``merge`` return ``self``. Token ids are any non-negative integers; unseen ids
    grow the tables. Its state is registered (``state.Stateful``): ``state_dict()`` holds only numpy
    arrays (safe to save with np.savez or safetensors; never pickled) — ``ids`` (T,), ``n`` (T,),
    ``mean`` (L, T, d), ``s`` (L, T) over the T types seen, ``layer_index`` (L,), ``n_embeddings`` (1,) —
    and two partial states merge by ``ByType``. The tables ``ids``, ``n``, ``mean``, ``s`` hold spare
    rows beyond the types seen (and, registered, rows of types not seen yet): read ``result()``.
    """

    count_states = ("n",)  # the per-type counts (merged by ``ByType``): never negative

    def __init__(
        self,
        num_layers: int,
        dim: int,
        device: str | torch.device = "cpu",
        mean_dtype: str = "float64",
        layer_index=None,
        backend: str = "auto",
    ):
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
        self._cpu_backend = "torch" if backend == "torch" else "numba"
        layer_index = (
            np.arange(num_layers, dtype=np.int64) if layer_index is None else np.asarray(layer_index, dtype=np.int64)
        )
        if layer_index.shape != (self.num_layers,):
            raise ValueError("layer_index must have one entry per stored layer")
        self._tdtype = torch.float64 if mean_dtype == "float64" else torch.float32
        self._T = 0
        self._cap = 0
        self._fixed = False  # rows pre-assigned by register(): the sync-free torch update
        hooks: dict[str, Any] = dict(
            export=TokenMoments._export_rows, spec=TokenMoments._spec_rows, restore=TokenMoments._restore_rows
        )
        for name, merge in (("ids", ByType()), ("n", "pooled"), ("mean", "pooled"), ("s", "pooled")):
            # stacked by layer: mean and s (their type rows on axis 1); ids and n are shared by all layers
            self._add_state(name, self._zeros(name, 0), merge, per_layer=_ROW_AXIS[name] == 1, **hooks)
        self._add_state("layer_index", layer_index, merge="same")
        self._add_state("n_embeddings", 0)
        self._add_buffer("_row_of", torch.full((0,), -1, dtype=torch.int64, device=self.device))

    @staticmethod
    def planned(num_layers: int, num_types: int, dim: int, mean_dtype: str = "float64") -> dict:
        """{key: (shape, dtype)} of ``state_dict`` once T = ``num_types`` types are seen: ids, n (T,) int64,
        mean (L, T, d) in ``mean_dtype``, s (L, T) float64, layer_index (L,) and n_embeddings (1,) int64 —
        L·T·d·b_μ + 8·L·T + 16·T + 8·L + 8 bytes."""
        L, T, d = int(num_layers), int(num_types), int(dim)
        return {
            "ids": ((T,), np.int64),
            "n": ((T,), np.int64),
            "mean": ((L, T, d), np.dtype(mean_dtype)),
            "s": ((L, T), np.float64),
            "layer_index": ((L,), np.int64),
            "n_embeddings": ((1,), np.int64),
        }

    @property
    def backend(self) -> str:
        """The update path: "numba" or "torch" on the CPU (as asked; "auto" is numba), "torch" on other
        devices and once ``register`` assigned the rows (it follows the state's device on ``to``)."""
        return "torch" if self.device.type != "cpu" or self._fixed else self._cpu_backend

    # ------------------------------------------------------------------ table management
    @property
    def num_types(self) -> int:
        seen = self._seen()
        return self._T if seen is None else int(seen.size)

    def _zeros(self, name: str, rows: int) -> torch.Tensor:
        """A per-type table of ``rows`` zero rows: ids, n (T,) int64; mean (L, T, d); s (L, T) float64."""
        L, d = self.num_layers, self.dim
        shape = {"ids": (rows,), "n": (rows,), "mean": (L, rows, d), "s": (L, rows)}[name]
        dtype = {"mean": self._tdtype, "s": torch.float64}.get(name, torch.int64)
        return torch.zeros(shape, dtype=dtype, device=self.device)

    def _reserve(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(need, int(self._cap * 1.5) + 64)
        for name, axis in _ROW_AXIS.items():
            table = self._zeros(name, cap)
            if self._T:
                table.narrow(axis, 0, self._T).copy_(getattr(self, name).narrow(axis, 0, self._T))
            setattr(self, name, table)
        self._cap = cap

    def register(self, token_ids) -> TokenMoments:
        """Size the tables for the types a run will see (the plan's counted types, known from the
        tokenization). On the numba backend this only reserves the rows. On the torch backend (the
        GPU path) it also assigns every type its row up front, so that ``update`` needs no host
        synchronisation beyond ``torch.unique``'s own: no rows to allocate, a type's first reference
        (its first embedding) chosen on the device, and ids outside the registered set routed to one
        overflow row that ``state_dict``/``result``/``merge`` check (a ValueError there). Results are
        the same as without registering. Only on an empty measure."""
        ids = np.unique(np.asarray(token_ids, dtype=np.int64).reshape(-1))
        if self.backend != "torch" or self._T or ids.size == 0:
            self._reserve(int(ids.size))
            return self
        if ids[0] < 0:
            raise ValueError("token ids must be non-negative")
        T = int(ids.size)
        self._reserve(T + 1)  # + the overflow row T
        self.ids[:T] = torch.from_numpy(ids).to(self.device)
        self._row_of = torch.full((int(ids[-1]) + 2,), T, dtype=torch.int64, device=self.device)
        self._row_of[self.ids[:T]] = torch.arange(T, device=self.device)
        self._T, self._fixed = T, True
        return self

    def _fixed_rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Registered rows of ``ids`` (any shape); unregistered or negative ids -> the overflow row."""
        top = self._row_of.numel() - 1
        return self._row_of[torch.where((ids >= 0) & (ids < top), ids, top)]

    def _check_overflow(self) -> None:
        if self._fixed and bool(self.n[self._T] != 0):
            raise ValueError("token ids outside the registered types (or negative) were added")

    def _seen(self) -> np.ndarray | None:
        """Rows holding data: None for all of [0, T), or in registered mode those with n > 0."""
        self._check_overflow()
        return np.flatnonzero(self.n[: self._T].cpu().numpy() > 0) if self._fixed else None

    def _host(self, table: torch.Tensor, take: np.ndarray | None, axis: int = -1) -> np.ndarray:
        """``table``'s rows [0, T) (along ``axis``) on the host — a view on the CPU, no copy of the
        largest table when the driver checkpoints or an actor flushes — only rows ``take`` (a copy) if given."""
        out = table.narrow(axis, 0, self._T).cpu().numpy()
        return np.take(out, take, axis=axis) if take is not None else out

    def _rows_for(self, uniq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Table rows of the (sorted, unique) ids; new ids get new rows. Returns (rows, is_new)."""
        top = int(uniq[-1]) + 1
        if top > self._row_of.numel():
            grown = torch.full((max(top, 2 * self._row_of.numel()),), -1, dtype=torch.int64, device=self.device)
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
                self.ids.numpy()[self._T : self._T + k] = u[new_np]
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
            self.ids[self._T : self._T + k] = uniq[is_new]
            self._T += k
        return rows, is_new

    # ------------------------------------------------------------------ update
    def update(self, states, token_ids, rows=None) -> TokenMoments:
        """Add a batch: ``states`` (L, N, d) (fp16/bf16/fp32/fp64), ``token_ids`` (N,) ints >= 0;
        ``rows`` (optional, int indices into the N embeddings): add only those embeddings. On the
        numba backend the kernel reads them in place (no copy of the selected states); elsewhere they
        are gathered with ``index_select``."""
        X = _as_tensor(states, "states")
        ids = _as_tensor(token_ids, "token_ids")
        if X.dim() != 3 or X.shape[0] != self.num_layers or X.shape[2] != self.dim:
            raise ValueError(f"states must have shape ({self.num_layers}, N, {self.dim}), got {tuple(X.shape)}")
        if X.dtype not in _FLOAT_DTYPES:
            raise TypeError(f"states must be floating point, got {X.dtype}")
        ids = ids.reshape(-1).to(device=self.device, dtype=torch.int64)
        if ids.numel() != X.shape[1]:
            raise ValueError(f"token_ids has {ids.numel()} entries for {X.shape[1]} embeddings")
        if rows is not None:
            rows = _as_tensor(rows, "rows").reshape(-1).to(device=self.device, dtype=torch.int64)
            ids = ids.index_select(0, rows)
            if self.backend != "numba":  # the torch paths take a gathered copy
                X, rows = X.to(self.device).index_select(1, rows), None
        N = ids.numel()
        if N == 0:
            return self
        if not (self._fixed and self.backend == "torch") and int(ids.min()) < 0:  # registered: checked later
            raise ValueError("token ids must be non-negative")
        X = X.to(self.device)
        if self.backend == "numba":
            self._update_cpu(X, ids.numpy(), None if rows is None else rows.numpy())
        elif self._fixed:
            self._update_registered(X, ids)
        else:
            uniq, inv, counts = torch.unique(ids, sorted=True, return_inverse=True, return_counts=True)
            rows, is_new = self._rows_for(uniq)
            if bool(is_new.any()):
                # reference for a new type = its first embedding in the batch (keeps deviations small)
                order = torch.argsort(inv, stable=True)
                starts = torch.cumsum(counts, 0) - counts
                self.mean[:, rows[is_new]] = X[:, order[starts[is_new]]].to(self._tdtype)
            n_new = self.n[rows] + counts
            self._update_torch(X, inv, rows, n_new)
            self.n[rows] = n_new
        self.n_embeddings += N  # type: ignore[attr-defined]  # a registered state
        return self

    def _update_cpu(self, X: torch.Tensor, ids: np.ndarray, rows_in: np.ndarray | None = None) -> None:
        """CPU path: one sort of the ids (``kernels.type_groups``, which also balances the groups over
        the threads), bookkeeping in numpy views, then the fused kernel. ``rows_in``: the embeddings
        of X that ``ids`` belong to (a subset); the kernel reads X through ``order``, so a subset is
        only a different ``order`` (rows_in[order]), never a copy of the states."""
        from normvar_core.stats.kernels import type_groups as _type_groups  # numba: imported on the CPU path only
        from normvar_core.stats.kernels import update_kernel as _update_kernel

        order, starts, uniq, bounds = _type_groups(ids)
        if rows_in is not None:
            order = rows_in[order]
        first, counts = starts[:-1], np.diff(starts)
        rows_t, is_new_t = self._rows_for(torch.from_numpy(uniq))
        rows, is_new = rows_t.numpy(), is_new_t.numpy()
        if X.dtype in (torch.float16, torch.bfloat16):
            X = X.float()
        Xn = X.contiguous().numpy()
        mean = self.mean.numpy()
        if is_new.any():
            # reference for a new type = its first embedding in the batch (keeps deviations small)
            mean[:, rows[is_new]] = Xn[:, order[first[is_new]]]
        n = self.n.numpy()
        n_new = n[rows] + counts
        s_out = np.empty((self.num_layers, rows.size), dtype=np.float64)
        _update_kernel(Xn, order, starts, rows, n_new.astype(np.float64), mean, s_out, bounds)
        self.s.numpy()[:, rows] += s_out
        n[rows] = n_new

    def _update_registered(self, X: torch.Tensor, ids: torch.Tensor) -> None:
        """The torch update with pre-assigned rows: the only host sync is inside torch.unique."""
        rows_tok = self._fixed_rows(ids)
        rows, inv, counts = torch.unique(rows_tok, sorted=True, return_inverse=True, return_counts=True)
        N = ids.numel()
        first = torch.full((rows.numel(),), N, dtype=torch.int64, device=self.device).scatter_reduce_(
            0, inv, torch.arange(N, device=self.device), "amin"
        )  # each type's first embedding in the batch
        fresh = self.n[rows] == 0  # its reference: the running mean, or for a first batch that embedding
        n_new = self.n[rows] + counts
        self._update_torch(X, inv, rows, n_new, fresh=fresh, first=first)
        self.n[rows] = n_new

    def _update_torch(self, X, inv, rows, n_new, fresh=None, first=None) -> None:
        U = rows.numel()
        n_new64 = n_new.to(torch.float64)
        for l in range(self.num_layers):  # one layer at a time bounds the N x d float64 temporaries
            ref = self.mean[l, rows].to(torch.float64)
            if fresh is not None:  # as if stored in the mean table first (same rounding as the other paths)
                ref = torch.where(fresh[:, None], X[l, first].to(self._tdtype).to(torch.float64), ref)
            dev = X[l].to(torch.float64) - ref[inv]
            s1 = torch.zeros((U, self.dim), dtype=torch.float64, device=self.device).index_add_(0, inv, dev)
            ss = torch.zeros(U, dtype=torch.float64, device=self.device).index_add_(0, inv, (dev * dev).sum(1))
            self.mean[l, rows] = (ref + s1 / n_new64[:, None]).to(self._tdtype)
            self.s[l, rows] += ss - (s1 * s1).sum(1) / n_new64

    # ------------------------------------------------------------------ state (the hooks of ``_add_state``)
    def _export_rows(self, name: str) -> np.ndarray:
        """The table ``name``'s rows of the types seen, on the host (``_host``)."""
        return self._host(getattr(self, name), self._seen(), axis=_ROW_AXIS[name])

    def _spec_rows(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        """The shape and dtype of ``_export_rows(name)``, from the table: T seen types along its row axis."""
        table = getattr(self, name)
        shape = list(table.shape)
        shape[_ROW_AXIS[name]] = self.num_types
        return tuple(shape), np.dtype(str(table.dtype).replace("torch.", ""))

    def _restore_rows(self, name: str, a: np.ndarray) -> None:
        """Load the saved rows of the table ``name``: ``ids`` (loaded first) empties the tables and sizes
        them for its T types, each in a row of its own (not registered); the others fill their T rows."""
        # read-only arrays (from Ray's object store) are copied, not shared
        host = torch.from_numpy(np.require(a, np.int64 if name in ("ids", "n") else None, requirements="W"))
        if name == "ids":
            self._T, self._cap, self._fixed = 0, 0, False
            for table in _ROW_AXIS:
                setattr(self, table, self._zeros(table, 0))
            self._row_of = torch.full((0,), -1, dtype=torch.int64, device=self.device)
            T = int(host.numel())
            if T:
                self._reserve(T)
                ids = host.reshape(-1).to(self.device)
                self.ids[:T] = ids
                self._row_of = torch.full((int(ids.max()) + 1,), -1, dtype=torch.int64, device=self.device)
                self._row_of[ids] = torch.arange(T, device=self.device)
                self._T = T
            return
        want = self._spec_rows(name)[0]
        if tuple(host.shape) != want:
            raise ValueError(f"state {name!r} has shape {tuple(host.shape)}, this measure holds {want}")
        getattr(self, name).narrow(_ROW_AXIS[name], 0, self._T).copy_(host)

    @staticmethod
    def sorted_rows(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``state`` with its type rows in token-id order (the numba backend keeps them in first-seen order,
        the registered torch one sorted: layer groups on both kinds of device agree after this)."""
        order = np.argsort(np.asarray(state["ids"]), kind="stable")
        if np.array_equal(order, np.arange(order.size)):
            return state
        return {
            **state,
            "ids": np.asarray(state["ids"])[order],
            "n": np.asarray(state["n"])[order],
            "mean": np.asarray(state["mean"])[:, order],
            "s": np.asarray(state["s"])[:, order],
        }

    @classmethod
    def from_state_dict(
        cls, state: dict[str, np.ndarray], device: str | torch.device = "cpu", backend: str = "auto"
    ) -> TokenMoments:
        """A new measure holding ``state``: L, d and the means' dtype read from its ``mean``."""
        mean = np.asarray(state["mean"])
        L, _, d = mean.shape
        measure = cls(
            L,
            d,
            device=device,
            mean_dtype="float32" if mean.dtype == np.float32 else "float64",
            layer_index=state.get("layer_index"),
            backend=backend,
        )
        measure.load_state_dict({"layer_index": measure.layer_index, "n_embeddings": np.zeros(1, np.int64), **state})
        return measure

    def result(self, types: np.ndarray | None = None) -> TokenStats:
        """The per-(layer, type) statistics, types sorted by token id; only the token ids ``types`` if
        given (the same rows as ``result().subset(isin(ids, types))``, without copying the others)."""
        rows = self._seen()
        ids = self.ids[: self._T].cpu().numpy()
        order = np.argsort(ids if rows is None else ids[rows], kind="stable")
        take = order if rows is None else rows[order]
        if types is not None:
            take = take[np.isin(ids[take], types)]
        ids = ids[take]
        mean = self.mean[:, : self._T].cpu().numpy()[:, take]
        n = self.n[: self._T].cpu().numpy()[take].astype(np.int64)
        s = self.s[:, : self._T].cpu().numpy()[:, take]
        return TokenStats.from_moments(ids.astype(np.int64), n, mean, s, self.layer_index.copy())


class ByType:
    """The merge rule of ``TokenMoments``' per-type table (ids, n, mean, s), declared on ``ids`` (the others
    ``"pooled"``): the other state's rows matched to this one's by token id (new types get new rows), then
    per layer, exact (Chan et al.), one layer block of the incoming means at a time (``reader.blocks``):
    mu = mu_a + delta n_b / n,  S = S_a + S_b + ||delta||^2 n_a n_b / n,  delta = mu_b - mu_a,  n = n_a + n_b."""

    def merge(self, tm: TokenMoments, name: str, reader) -> None:
        dev = tm.device
        o_ids = torch.from_numpy(np.array(reader.get("ids"), np.int64))
        if o_ids.numel() == 0:
            return
        order = torch.argsort(o_ids)
        o_ids = o_ids[order].to(dev)
        o_n = torch.from_numpy(np.array(reader.get("n"), np.int64))[order].to(dev)
        o_s = torch.from_numpy(np.array(reader.get("s"), np.float64))[:, order].to(dev)
        if o_s.shape[0] != tm.num_layers:
            raise ValueError("cannot merge measures of different shapes")
        if tm._fixed:
            rows = tm._fixed_rows(o_ids)
            if bool((rows == tm._T).any()):
                raise ValueError("cannot merge token ids outside the registered types")
            is_new = tm.n[rows] == 0
        else:
            rows, is_new = tm._rows_for(o_ids)
        old_n = tm.n[rows].to(torch.float64)
        b_n = o_n.to(torch.float64)
        n = old_n + b_n
        weight, cross = (b_n / n)[:, None], old_n * b_n / n
        for l, block in enumerate(reader.blocks("mean")):
            if block.shape[-1] != tm.dim:
                raise ValueError("cannot merge measures of different shapes")
            # row gathers and scatters by index_select / index_copy_ (torch's advanced indexing is
            # several times slower on the CPU); a read-only or non-float64 block is copied, others read in place
            o_mean = torch.from_numpy(np.require(block, np.float64, "W")).index_select(0, order).to(dev)
            mean_l, s_l = tm.mean[l], tm.s[l]
            mu_a = torch.where(is_new[:, None], o_mean, mean_l.index_select(0, rows).to(torch.float64))
            delta = o_mean.sub_(mu_a)
            s_l.index_copy_(0, rows, s_l.index_select(0, rows) + o_s[l] + delta.square().sum(-1) * cross)
            mean_l.index_copy_(0, rows, mu_a.add_(delta.mul_(weight)).to(tm._tdtype))
        tm.n[rows] = tm.n[rows] + o_n


__all__ = ["TokenMoments", "ByType", "TokenStats"]
