"""The layer-major update loop: one layer of a batch at a time, with the quantities that geometry and
outliers both need computed once (one float64 — or float32, ``scatter_dtype`` — copy of the layer's
states per batch instead of one per measure).

For layer l of a batch of N embeddings x_i (``LayerView``):

* ``mean``    m_b = (1/N) Σ x_i                                    (float64)
* ``centred`` x_i − m_b in the scatter dtype (float32: x − m32, m32 = m_b rounded to float32)
* ``scatter`` C_b = Σ (x_i − m_b)(x_i − m_b)ᵀ (float64 d × d). In float32 the Gram matrix G of the
  float32 deviations is exact up to float32 products; with δ = Σ(x − m32)/N it equals
  Σ(x − m32)(x − m32)ᵀ, so C_b = G − N δδᵀ (the batch's scatter about its own mean, in float64), which
  the measures pool across batches with Chan's update in float64 (``pooling.pool_into``).
* ``col_sq``  Σ_i (x_ij − m_bj)² per dimension = diag(C_b) (the outliers' per-dimension variance)
* ``sq``      ‖x_i‖² = Σ_j x_ij² (float64 sums, one pass over x)

``scatter_dtype``: "float64" (exact, the CPU default), "float32" (GPUs without fast float64), or
"auto" → ``resolve_scatter_dtype``: float64 on the CPU and on GPUs of compute capability 8.0 / 9.0
(A100, H100, H200: float64 at half the float32 rate), float32 elsewhere (consumer cards run float64
at 1/32–1/64 of float32) and on MPS (no float64 at all).

``per_layer`` runs a per-layer step (the geometry's finalize, the occurrences' early axes) one layer per core.
"""

from __future__ import annotations

import contextvars
import os
from abc import abstractmethod
from collections.abc import Iterable
from typing import Any

import torch

from normvar_core.pipeline.measures.base import Measure
from normvar_core.pipeline.measures.covariance import covariances

SCATTER_DTYPES = ("float64", "float32", "auto")
FAST_FLOAT64_CAPABILITIES = {(8, 0), (9, 0)}


def resolve_scatter_dtype(choice: str, device) -> str:
    """ "float64" or "float32" for ``choice`` (float64 / float32 / auto) on ``device``."""
    if choice in ("float64", "float32"):
        return choice
    if choice != "auto":
        raise ValueError(f"scatter dtype must be one of {SCATTER_DTYPES}, got {choice!r}")
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cpu":
        return "float64"
    if dev.type == "cuda":
        return "float64" if tuple(torch.cuda.get_device_capability(dev)) in FAST_FLOAT64_CAPABILITIES else "float32"
    return "float32"


def gram(xc: torch.Tensor) -> torch.Tensor:
    """xcᵀ xc in torch on every device: on the CPU in MKL on the forward pass's own thread pool. numpy's
    ``a.T @ a`` takes the symmetric product (half the flops) but runs on OpenBLAS's own threads, which a run
    holds to one (``execute.blas_threads``): the two take the same time on 2 cores, and torch's scales with the
    cores (the figures: docs/benchmarks.md, "How a run is kept near its forward pass")."""
    return xc.T @ xc


def row_sq(x: torch.Tensor) -> torch.Tensor:
    """‖x_i‖² = Σ_j x_ij² per row of x (N, d), in float64: on the CPU (float32/float64 rows) one numba pass
    over x in place (``kernels.row_sq_kernel``), elsewhere through a float64 copy."""
    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        from normvar_core.stats.kernels import row_sq_kernel  # numba, on the CPU path only

        out = torch.empty(x.shape[0], dtype=torch.float64)
        row_sq_kernel(x.contiguous().numpy(), out.numpy())
        return out
    x64 = x.to(torch.float64, copy=True)
    return x64.mul_(x64).sum(1)


class LayerView:
    """Layer l of a StateBatch (``x``: (N, d) on the measures' device, the states' dtype) and the
    shared quantities of the module docstring, each computed on first use.

    ``split`` = (order, sizes): the rows in ``order`` (a permutation) form consecutive parts of
    ``sizes`` rows (the split halves). The centred copy is then kept in that order, each part's Gram
    matrix G_h is computed once (``parts``) and the scatter is their sum, C_b = Σ_h G_h — the same
    flops as one Gram matrix of the whole batch, instead of one more for a part.

    ``known``: what an earlier view of the same rows with the same split and dtype computed (``reusable``: m_b and
    its Gram products), taken as they are instead of computed again; ignored when its split sizes or dtype differ."""

    def __init__(self, x: torch.Tensor, scatter_dtype: str = "float64", split=None, known: dict | None = None):
        self.x = x
        self.n = int(x.shape[0])
        self.dtype = torch.float64 if scatter_dtype == "float64" else torch.float32
        self.order: Any
        self.sizes: Any
        self.order, self.sizes = split if split is not None else (None, None)
        self._mean: torch.Tensor
        self._centred: torch.Tensor
        self._scatter: torch.Tensor
        self._sq: torch.Tensor
        self._x64: torch.Tensor
        self._grams: Any
        self._mean = self._centred = self._scatter = self._sq = self._x64 = self._grams = None  # type: ignore[assignment]  # computed on first use
        if known is not None and known["dtype"] == self.dtype and known["sizes"] == self.sizes:
            self._mean, self._grams, self._scatter = known["mean"], known.get("grams"), known.get("scatter")  # type: ignore[assignment]  # known holds them

    def reusable(self) -> dict:
        """m_b and the Gram products (the parts' G_h and sums with a split, the scatter C_b without), computed
        now if they were not: what a later view of the same rows takes as ``known`` (the occurrences' early
        pass hands them to the pass with the batch's states, so the pass does not compute them again)."""
        scatter = self.scatter
        out = {"dtype": self.dtype, "sizes": self.sizes, "mean": self.mean}
        return {**out, "grams": self._grams} if self.sizes is not None else {**out, "scatter": scatter}

    @staticmethod
    def reusable_bytes(d: int, split: bool) -> int:
        """What ``reusable`` holds for a layer of dimension d, at most (float64): 16·d² + 24·d with a split (two
        parts), 8·d² + 8·d without."""
        return 16 * d * d + 24 * d if split else 8 * d * d + 8 * d

    @staticmethod
    def view_bytes(n: int, d: int, split: bool) -> int:
        """What a view of n rows holds at most: the float64 centred copy 8·n·d (with a split, index_select's copy
        of the rows in order beside it while it converts, 4·n·d), its d × d float64 products (the scatter; with a
        split also each part's G_h: 3·8·d²) and ‖x_i‖² (8·n)."""
        return 8 * n * d + (4 * n * d if split else 0) + 8 * d * d * (3 if split else 1) + 8 * n

    def _rows(self) -> torch.Tensor:
        """x with its rows in ``order`` (x itself without a split)."""
        return self.x if self.order is None else self.x.index_select(0, self.order)

    def _copy64(self) -> torch.Tensor:
        """A fresh float64 copy of the rows in ``order`` (``centred`` subtracts in place; with a split,
        index_select made it)."""
        return self._rows().to(torch.float64, copy=self.order is None)

    @property
    def mean(self) -> torch.Tensor:
        """m_b in float64: from the float64 copy the centring needs anyway (a float64 column sum is ~10x
        faster than ``x.mean(0, dtype=float64)``, which converts element by element), else from x."""
        if self._mean is None:
            if self.dtype == torch.float64:
                self._x64 = self._copy64()
                self._mean = self._x64.mean(0)
            else:
                self._mean = self.x.mean(0, dtype=torch.float64)
        return self._mean

    @property
    def centre(self) -> torch.Tensor:
        """The centring vector c (float64): m_b rounded to the scatter dtype."""
        return self.mean.to(self.dtype).to(torch.float64)

    @property
    def centred(self) -> torch.Tensor:
        """x_i − c in the scatter dtype, rows in ``order``."""
        if self._centred is None:
            m = self.mean
            if self.dtype == torch.float64:
                # in place on the copy made in ``mean`` (or now, m_b being known): x itself is never centred
                x64 = self._x64 if self._x64 is not None else self._copy64()
                self._centred, self._x64 = x64.sub_(m), None
            else:
                self._centred = self._rows().to(torch.float32) - m.to(torch.float32)
        return self._centred

    @property
    def scatter(self) -> torch.Tensor:
        if self._scatter is None:
            xc = self.centred
            if self.sizes is None:
                g = gram(xc).to(torch.float64)
            else:  # C_b = Σ_h G_h, added in place into the first part's own matrix (no new d × d per part)
                grams = [G for G, _ in self._part_grams()]
                g = grams[0].clone()
                for G in grams[1:]:
                    g += G
            if xc.dtype != torch.float64:  # deviations from m32, not m_b: C_b = G − N δδᵀ
                delta = xc.sum(0, dtype=torch.float64) / self.n
                g -= torch.outer(delta, delta) * self.n
            self._scatter = g
        return self._scatter

    def _part_grams(self) -> list:
        """[(G_h, Σ_rows x_c) per part] (float64), computed once."""
        if self._grams is None:
            xc, grams, a = self.centred, [], 0
            for size in self.sizes:
                part = xc[a : a + size]
                grams.append((gram(part).to(torch.float64), part.sum(0, dtype=torch.float64)))
                a += size
            self._grams = grams
        return self._grams

    def parts(self) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
        """(n_h, μ_h, S_h) per part of the split: its mean and its scatter about that mean,
        μ_h = c + δ_h, S_h = G_h − n_h δ_h δ_hᵀ with δ_h = (1/n_h) Σ_{rows of h} (x_i − c)."""
        out, c = [], self.centre
        for size, (G, total) in zip(self.sizes, self._part_grams()):
            delta = total / max(size, 1)
            out.append((size, c + delta, G - torch.outer(delta, delta) * size))
        return out

    @property
    def col_sq(self) -> torch.Tensor:
        """Σ_i (x_ij − m_bj)² (float64, d): diag(C_b) when the scatter is there, else one pass."""
        if self._scatter is not None:
            return torch.diagonal(self._scatter).clone()
        xc = self.centred
        out = (xc * xc).sum(0, dtype=torch.float64)
        if xc.dtype != torch.float64:
            delta = xc.sum(0, dtype=torch.float64) / self.n
            out -= delta * delta * self.n
        return out

    @property
    def sq(self) -> torch.Tensor:
        """‖x_i‖² (float64, N): Σ_j x_ij² over the states themselves (``row_sq``: one pass, float64 sums of
        exact float32 squares; no N × d temporary)."""
        if self._sq is None:
            self._sq = row_sq(self.x)
        return self._sq

    def weighted_sum(self, w: torch.Tensor) -> torch.Tensor:
        """Σ_i w_i x_i (float64, d) = x_cᵀ w + c Σ w (w per row of x; taken in ``order`` like x_c)."""
        xc = self.centred
        if self.order is not None:
            w = w.index_select(0, self.order)
        return (xc.T @ w.to(xc.dtype)).to(torch.float64) + self.centre * w.sum()


class LayerMajor(Measure):
    """A measure updated one layer at a time from shared ``LayerView``s: ``class M(LayerMajor)`` (a ``Measure``
    already; listing ``Measure`` after it changes nothing, before it Python refuses the class: no consistent
    MRO). Subclasses define ``update_layer(l, view, batch)`` and may define ``begin_batch(batch)`` /
    ``end_batch(batch)``; ``update(batch)`` runs the loop for this measure alone (the contract's update).

    ``LayerMajor.__init__(self, ctx)`` (``super().__init__(ctx)``, first) sets ``layers`` (the kept layers),
    ``device`` (the states' device, where the state lives) and ``scatter_dtype`` (``resolve_scatter_dtype`` of the
    run's ``--scatter-dtype`` there); reading ``device`` or ``scatter_dtype`` without it raises an error that
    says so. A covariance registered with ``covariance.Covariance`` is counted by the loop after the batch
    (``Covariance.commit``): the measure does not count its rows."""

    view_split: tuple | None = None
    """(order, sizes) set in ``begin_batch`` by a measure that wants the batch's views split into
    row parts (``LayerView``'s ``split``: the halves); None otherwise."""

    def __init__(self, ctx) -> None:
        self.layers = list(ctx.layers)
        self.device = ctx.torch_device
        self.scatter_dtype = resolve_scatter_dtype(ctx.cfg.scatter_dtype, self.device)

    def __getattr__(self, name: str):
        # only reached when normal lookup fails: a subclass that did not call LayerMajor.__init__
        if name in ("device", "scatter_dtype"):
            raise AttributeError(
                f"{type(self).__name__} has no {name}: a LayerMajor measure's __init__ calls "
                "super().__init__(ctx) first, which sets layers, device and scatter_dtype"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def begin_batch(self, batch) -> None:
        pass

    @abstractmethod
    def update_layer(self, l: int, view: LayerView, batch) -> None:
        """Fold layer ``l``'s shared view of the batch into this measure's state."""

    def end_batch(self, batch) -> None:
        pass

    def update(self, batch) -> None:
        update_layer_major([self], batch)


def update_layer_major(measures: Iterable[LayerMajor], batch, on_layer=None) -> None:
    """Layer by layer, one ``LayerView`` shared by every measure in ``measures`` (same device and
    scatter dtype: the first one's); at most one layer's float64 copy lives at a time. After every measure's
    ``end_batch``, their covariances add the batch's count (``Covariance.commit``). ``on_layer(done, total)``
    after each layer (the progress inside a batch)."""
    measures = list(measures)
    if not measures or batch.size == 0:
        return
    dev, dtype = measures[0].device, measures[0].scatter_dtype
    X = batch.states.to(dev)
    for measure in measures:
        measure.begin_batch(batch)
    split = next((a.view_split for a in measures if a.view_split is not None), None)
    known = batch.views if batch.views is not None and X is batch.states else None  # the early pass's products
    for l in range(X.shape[0]):
        view = LayerView(X[l], dtype, split, known[l] if known is not None else None)
        for measure in measures:
            measure.update_layer(l, view, batch)
        del view
        if on_layer is not None:
            on_layer(l + 1, X.shape[0])
    for measure in measures:
        measure.end_batch(batch)
    for measure in measures:
        for cov in covariances(measure):
            cov.commit()


def update_all(measures: dict, batch, on_layer=None) -> None:
    """One batch into every measure: the layer-major ones share their layer views, the others
    take ``update(batch)`` (``on_layer``: ``update_layer_major``'s)."""
    layered = [a for a in measures.values() if isinstance(a, LayerMajor)]
    for measure in measures.values():
        if not isinstance(measure, LayerMajor):
            measure.update(batch)
    update_layer_major(layered, batch, on_layer)


def layer_threads(n_layers: int, parallel: bool = True) -> int:
    """How many layers ``per_layer`` works on at once: one per core, at most ``n_layers`` (1 when not
    ``parallel``); the memory plan multiplies a layer's working memory by it."""
    return max(1, min(os.cpu_count() or 1, n_layers)) if parallel else 1


LAYER_DONE: contextvars.ContextVar = contextvars.ContextVar("normvar_layer_done", default=None)
"""``report(done, total, what)`` while a measure finishes (``execute/publish.py`` sets it): ``per_layer`` calls it
after each layer (or ``what``) is done, so the finalize's progress names the layer it is on."""


def per_layer(fn, n_layers: int, parallel: bool = True, what: str = "layer") -> list:
    """[fn(0), ..., fn(n_layers - 1)]: on the CPU one layer per core (eigendecompositions and the
    neighbour search are mostly single-threaded LAPACK / BLAS-2 work, so layers in parallel with one
    BLAS thread each use every core better than one layer at a time with threaded BLAS). Each one done is
    reported to ``LAYER_DONE``'s callback when one is set (``what``: what one call is, "layer" or a TwoNN batch)."""
    report = LAYER_DONE.get()
    if report is not None:
        import itertools

        done, inner = itertools.count(1), fn

        def fn(i):
            out = inner(i)
            report(next(done), n_layers, what)
            return out

    threads = layer_threads(n_layers, parallel)
    if threads < 2:
        return [fn(i) for i in range(n_layers)]
    from concurrent.futures import ThreadPoolExecutor

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn's dependency, normally there
        threadpool_limits = None
    # torch's count read before the limit: under it torch reports OpenMP's 1, and setting that back left torch's
    # MKL at one thread for the rest of the process (the pass after the early axes: its matmuls 1.8x slower)
    torch_threads = torch.get_num_threads()
    limit = threadpool_limits(1) if threadpool_limits is not None else None
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="normvar-layer") as pool:
            return list(pool.map(fn, range(n_layers)))
    finally:
        if limit is not None:
            limit.unregister()
        torch.set_num_threads(torch_threads)  # last: OpenMP's and MKL's counts both set back


__all__ = [
    "LayerView",
    "row_sq",
    "LayerMajor",
    "update_layer_major",
    "update_all",
    "resolve_scatter_dtype",
    "SCATTER_DTYPES",
    "gram",
    "FAST_FLOAT64_CAPABILITIES",
    "per_layer",
    "LAYER_DONE",
]
