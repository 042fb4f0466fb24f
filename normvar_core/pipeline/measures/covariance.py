"""The shared covariance state: a count n and, per kept layer, a mean and a second moment, registered on a
measure in one line under the key names it gives (its checkpoint keys) with its exact merge and its
``planned_state`` entries, and folded from the shared ``LayerView`` of each layer and batch.

Two forms:

* ``pooled`` (the default): the float64 mean μ and the scatter S = Σ (x − μ)(x − μ)ᵀ about it (``outer=True``,
  (L, d, d)) or its diagonal, the per-coordinate Σ (x_j − μ_j)² (``outer=False``, (L, d)). A batch enters
  centred on its own mean (μ_b, S_b) and is pooled by Chan, Golub & LeVeque's update, which two partial
  states of disjoint data also merge by (``pooling.Chan``, in any order, exactly)::

      n = n_a + n_b,  δ = μ_b − μ_a,  μ = μ_a + δ · n_b / n,  S = S_a + S_b + δδᵀ · n_a n_b / n

  (δ² per coordinate for ``outer=False``) — never Σxxᵀ − nμμᵀ from raw sums, which loses every digit at
  decoders' squared norms of 1e7–1e9.
* ``sums``: the raw sums Σx (L, d) and Σxxᵀ (L, d, d), merged by adding them; for low-dimensional data near
  the origin (the occurrences' k projections on their early axes), covariance = Σxxᵀ / n − x̄x̄ᵀ.

The count is the state's own: ``pool`` (or ``count``) records the batch's n once per batch, every layer pooling
with the count before the batch, and ``commit`` adds it after the batch's last layer. The layer-major loop
(``layerview.update_layer_major``) commits every covariance of its measures (``covariances``) after their
``end_batch``: a measure never counts its rows itself. A state of width 0 (the halves without the geometry)
keeps its count only.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from normvar_core.pipeline.measures.pooling import Chan, pool_into

FORMS = ("pooled", "sums")


class Covariance:
    """n, mean and second moment registered on ``holder`` as ``count``, ``mean`` and ``scatter`` (the holder's
    attributes and ``state_dict`` keys). ``shape`` = (L, d); ``device``: the tensors' torch device, or None
    for numpy arrays on the host (sums form only); ``outer``: a d × d scatter, else its diagonal (pooled form only)."""

    def __init__(
        self,
        holder,
        shape: tuple[int, int],
        *,
        count: str = "n",
        mean: str = "mean",
        scatter: str = "scatter",
        outer: bool = True,
        form: str = "pooled",
        device=None,
    ):
        if form not in FORMS:
            raise ValueError(f"covariance form must be one of {FORMS}, got {form!r}")
        if form == "sums" and not outer:
            raise ValueError("the sums form keeps the whole Σxxᵀ (outer=True)")
        if form == "pooled" and device is None:
            raise ValueError("the pooled form holds torch tensors: give their device")
        self.holder, self.keys, self.outer, self.form = holder, (count, mean, scatter), outer, form
        self.dim = int(shape[1])
        self.pending = 0
        planned = self.planned(*shape, count=count, mean=mean, scatter=scatter, outer=outer)
        (m_shape, _), (s_shape, _) = planned[mean], planned[scatter]

        def zeros(s):
            return np.zeros(s) if device is None else torch.zeros(s, dtype=torch.float64, device=device)

        holder._add_state(count, 0)
        if form == "pooled":
            holder._add_state(mean, zeros(m_shape), merge="pooled")
            holder._add_state(scatter, zeros(s_shape), merge=Chan(count=count, mean=mean, outer=outer))
        else:
            holder._add_state(mean, zeros(m_shape))
            holder._add_state(scatter, zeros(s_shape))
        holder.__dict__.setdefault("_covariances", []).append(self)

    @staticmethod
    def planned(
        L: int, d: int, *, count: str = "n", mean: str = "mean", scatter: str = "scatter", outer: bool = True
    ) -> dict:
        """The ``planned_state`` entries: {count: ((1,), int64), mean: ((L, d), float64), scatter: ((L, d, d)
        or (L, d), float64)} — 8·L·d² + 8·L·d + 8 bytes (outer), 16·L·d + 8 (per coordinate)."""
        return {
            count: ((1,), np.int64),
            mean: ((L, d), np.float64),
            scatter: ((L, d, d) if outer else (L, d), np.float64),
        }

    # ------------------------------------------------------------------ the holder's arrays
    @property
    def n(self) -> int:
        return int(getattr(self.holder, self.keys[0]))

    @property
    def mean(self):
        """The pooled form's μ (L, d); the sums form's Σx."""
        return getattr(self.holder, self.keys[1])

    @property
    def scatter(self):
        """The pooled form's S (L, d, d) or per-coordinate (L, d); the sums form's Σxxᵀ."""
        return getattr(self.holder, self.keys[2])

    # ------------------------------------------------------------------ streaming
    def count(self, n: int) -> None:
        """Record the batch's n (added by ``commit``); every layer of one batch must give the same n."""
        if n and self.pending and n != self.pending:
            raise ValueError(
                f"covariance {self.keys[1]!r}: {n} rows in a layer, {self.pending} in another layer of the same batch"
            )
        self.pending = n or self.pending

    def pool(self, l: int, n: int, mean_b=None, scatter_b=None) -> None:
        """Pool a batch's layer ``l`` — its n rows, mean μ_b and scatter S_b about μ_b (per coordinate when not
        ``outer``) — by Chan's update with the count before the batch (pooled form)."""
        if self.form != "pooled":
            raise TypeError("a sums-form covariance adds rows (add_rows), it does not pool")
        self.count(n)
        if n and self.dim:
            pool_into(self.mean[l], self.scatter[l], self.n, mean_b, scatter_b, n, outer=self.outer)

    def fold(self, l: int, view) -> None:
        """Pool layer ``l``'s shared ``LayerView``: (view.n, view.mean, view.scatter), or view.col_sq =
        diag(view.scatter) per coordinate."""
        self.pool(l, view.n, view.mean, view.scatter if self.outer else view.col_sq)

    def add_rows(self, l: int, x) -> None:
        """Add rows x (N, d) of layer ``l`` to the sums: Σx += Σ_i x_i, Σxxᵀ += xᵀx (sums form)."""
        if self.form != "sums":
            raise TypeError("a pooled covariance pools a batch's mean and scatter (pool/fold)")
        self.count(int(x.shape[0]))
        self.mean[l] += x.sum(0)
        self.scatter[l] += x.T @ x

    def commit(self) -> None:
        """Add the batch's recorded n to the count, after its last layer."""
        if self.pending:
            setattr(self.holder, self.keys[0], self.n + self.pending)
            self.pending = 0

    # ------------------------------------------------------------------ reading
    def covariance(self, l: int | None = None):
        """S / n (pooled), or Σxxᵀ / n − x̄x̄ᵀ (sums), of layer ``l`` or of all layers (n = 0 read as 1)."""
        n = max(self.n, 1)
        m, s = (self.mean, self.scatter) if l is None else (self.mean[l], self.scatter[l])
        if self.form == "pooled":
            return s / n
        mean = m / n
        outer = mean[..., :, None] * mean[..., None, :]
        return s / n - outer

    def pooled_with(self, other: Covariance):
        """(n, μ, S) of this state and ``other``'s pooled by Chan's update, layer by layer (copies: neither state
        changes) — what merging the two would hold (pooled form)."""
        if self.form != "pooled":
            raise TypeError("pooled_with pools two pooled-form covariances")
        mean, scatter = self.mean.clone(), self.scatter.clone()
        for l in range(mean.shape[0]):
            pool_into(mean[l], scatter[l], self.n, other.mean[l], other.scatter[l], other.n, outer=self.outer)
        return self.n + other.n, mean, scatter


def covariances(holder) -> Iterator[Covariance]:
    """Every ``Covariance`` registered on ``holder`` and on the holders nested in its state."""
    yield from holder.__dict__.get("_covariances", ())
    for name in getattr(holder, "_states", {}):
        value = getattr(holder, name)
        if hasattr(value, "_states"):
            yield from covariances(value)


__all__ = ["Covariance", "covariances", "FORMS"]
