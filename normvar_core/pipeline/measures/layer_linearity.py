"""Layer linearity and linear CKA between consecutive kept layers, exact over every counted embedding (all token
types pooled): the formulas are ``stats.layer_linearity``'s (Kornblith et al. 2019; Razzhigaev et al. 2024).

State, per split half h ∈ {a, b} (``halves.half_of`` the sentence id, the split halves' own rule), per kept layer
l (``Half``):

* n_h, the float64 mean μ_l and the scatter S_ll = Σ (x − μ_l)(x − μ_l)ᵀ (``covariance.Covariance``: Chan's pooled
  update);
* the cross-scatter C_l = Σ (x_l − μ_l)(x_{l+1} − μ_{l+1})ᵀ with the next kept layer (row l; the last row holds
  none), pooled by Chan's update of a cross term (``CrossChan``)::

      C = C_a + C_b + δ_l δ_{l+1}ᵀ · n_a n_b / n,    δ_l = μ_{b,l} − μ_{a,l}   (the means before pooling)

  — a batch enters centred on its own mean, and two partial states of disjoint data (a checkpoint, a Ray shard)
  merge by the same update, exactly, in any order.

The halves' states pooled are the whole run's (Chan's update is exact), so ``result()`` gives each pair's values
on the whole run and on each half, and the split-half interval θ ± t₁ |θ_A − θ_B| / 2 (``layer_linearity``
table; its curves on the Geometry page carry the interval as their band), and the cross-fitted score (the map
fitted on one half's scatters, scored on the other's, both ways: ``stats.layer_linearity.cross_fitted``, exact
from the halves' n, means, scatters and cross-scatters: no extra state). A batch's layer views are split into
its two halves (``view_split``, as the halves measure's): each half's scatter is the view's own part
(``LayerView.parts``), and the cross-scatter one Gram product per half of the two layers' centred rows, the
previous layer's kept from the view before — one extra GEMM of the batch per pair, and one extra float64 copy of
a layer's rows held through the next layer.

``paired`` (per kept layer, merged "same") says which rows hold a pair: under ``--device-map`` each layer group
computes its own layers on its own device, so the pair across two groups is not computed (NaN in the table, said
in the run's notes).

Memory (``planned_state``): 2 · (16·L·d² + 8·L·d + 8) + L bytes — MiniLM (L = 7, d = 384): 33 MB; bert-base
(L = 13, d = 768): 245 MB; a 7B decoder (L = 33, d = 4,096): 17.7 GB. A run short of memory drops it first
(last in the registry). On by default: ``--no-layer-linearity`` leaves it out.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext, StateBatch
from normvar_core.pipeline.measures.base import Planned
from normvar_core.pipeline.measures.covariance import Covariance
from normvar_core.pipeline.measures.halves import half_rows, view_split
from normvar_core.pipeline.measures.layerview import LayerMajor, LayerView, layer_threads, per_layer
from normvar_core.pipeline.measures.state import Stateful, as_like
from normvar_core.runs.declared import LayerCurve
from normvar_core.stats import layer_linearity as LL


def cross_pool_into(cross, paired, n_a: int, mean_a, n_b: int, mean_b, blocks) -> None:
    """Pool cross-scatters ``blocks`` (one per kept layer, of n_b rows about ``mean_b``) into ``cross`` (n_a rows
    about ``mean_a``) in place, for the rows that hold a pair: C_l += B_l + δ_l δ_{l+1}ᵀ n_a n_b / n. The means
    are those before pooling (the caller pools them after)."""
    if n_b == 0:
        return
    w = n_a * n_b / (n_a + n_b)
    for l, block in enumerate(blocks):
        if paired[l]:
            cross[l] += as_like(block, cross) if not torch.is_tensor(block) else block
            if w:
                cross[l] += torch.outer(mean_b[l] - mean_a[l], mean_b[l + 1] - mean_a[l + 1]) * w


class CrossChan:
    """The merge rule of a half's cross-scatter (``cross_pool_into`` with the counts and means as they were before
    the merge: it is registered before the covariance, whose Chan rule then pools the means)."""

    def merge(self, holder, name: str, reader) -> None:
        n_b = int(reader.get("n").reshape(-1)[0])
        mean_b = as_like(reader.get("mean"), holder.mean)
        cross_pool_into(
            getattr(holder, name), holder.paired_rows, int(holder.n), holder.mean, n_b, mean_b, reader.blocks(name)
        )


class Half(Stateful):
    """One half's state: the cross-scatters (L, d, d), then n, the means (L, d) and the scatters (L, d, d)."""

    def __init__(self, L: int, d: int, device, paired: np.ndarray):
        self.paired_rows = paired
        self._add_state("cross", torch.zeros((L, d, d), dtype=torch.float64, device=device), merge=CrossChan())
        self.cov = Covariance(self, (L, d), device=device)  # n, mean, scatter


class LayerLinearityMeasure(LayerMajor):
    """On by default (``--no-layer-linearity`` turns it off: its Gram products cost about 0.2x the forward pass on a
    CPU, ``benchmarks/bench_layer_linearity.py``)."""

    name = LL.MEASURE
    splits_view = True
    title = "layer linearity and CKA"
    table_names = (LL.TABLE,)
    curves = (
        LayerCurve(
            LL.TABLE,
            "linearity",
            "Linearity between consecutive layers",
            "linearity score 1 − min_A ‖X̃A − Ỹ‖²_F",
            description="How much of layer l + 1 a linear map of layer l explains, both centred and scaled "
            "(Razzhigaev et al. 2024); at layer l, the pair (l, l + 1).",
        ),
        LayerCurve(
            LL.TABLE,
            "linearity_xfit",
            "Linearity, cross-fitted",
            "cross-fitted linearity score (out of sample)",
            description="The same score for a map fitted on one half of the sentences and scored on the other, "
            "both ways: out of sample, so it does not reward fitting the noise. Below the in-sample score by "
            "about 2d/n of the unexplained share (d dimensions, n embeddings): a wide gap means too few "
            "embeddings per dimension; the findings decide on this score.",
        ),
        LayerCurve(
            LL.TABLE,
            "linearity_residual_free",
            "Linearity without the residual",
            "linearity score of h_l+1 − h_l on h_l",
            description="The same score for the block's own output h_l+1 − h_l (the residual stream taken "
            "out), as Razzhigaev et al. 2024.",
        ),
        LayerCurve(
            LL.TABLE,
            "cka",
            "Linear CKA between consecutive layers",
            "linear CKA(h_l, h_l+1)",
            description="Kornblith et al. 2019's linear centred kernel alignment of layers l and l + 1 over "
            "every embedding.",
        ),
    )
    policy = "a run short of memory leaves it out first (two halves of 2·L d × d float64 scatters)"

    def __init__(self, ctx: RunContext):
        super().__init__(ctx)
        L, d = ctx.num_layers, int(ctx.dim)
        self._add_state("paired", (np.arange(L) < L - 1).astype(np.uint8), merge="same")
        self._add_state("a", Half(L, d, self.device, self.paired))
        self._add_state("b", Half(L, d, self.device, self.paired))
        self._rows: list[torch.Tensor]
        self._prev: list
        self._rows = self._prev = None  # type: ignore[assignment]  # set by begin_batch

    @property
    def halves(self) -> tuple[Half, Half]:
        return self.a, self.b

    def load_state_dict(self, state) -> None:
        super().load_state_dict(state)
        for h in self.halves:  # the halves' merge reads the loaded flags
            h.paired_rows = self.paired

    # ------------------------------------------------------------------ contract
    @classmethod
    def asked(cls, cfg: RunConfig) -> bool:
        return cfg.layer_linearity

    @classmethod
    def may_drop(cls, cfg: RunConfig) -> bool:
        return True

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """Per half the cross-scatters (L, d, d) and the covariance (n, means (L, d), scatters (L, d, d)), and the
        pair flags (L,): 2 · (16·L·d² + 8·L·d + 8) + L bytes."""
        L, d = ctx.num_layers, ctx.dim
        out: Planned = {"paired": ((L,), np.uint8)}
        for h in ("a", "b"):
            out[f"{h}.cross"] = ((L, d, d), np.float64)
            out.update({f"{h}.{k}": v for k, v in Covariance.planned(L, d).items()})
        return out

    @classmethod
    def update_held(cls, ctx: RunContext, n: int, rows: int) -> int:
        """The previous layer's centred rows, kept for the cross block with this one: 8·n·d."""
        return 8 * n * ctx.dim

    @classmethod
    def update_bytes(cls, ctx: RunContext, n: int, rows: int) -> int:
        """The previous layer's centred rows (8·n·d), each half's mean and scatter, the cross block, its
        correction and Chan's outer products (6·8·d², measured)."""
        return 8 * n * ctx.dim + 6 * 8 * ctx.dim**2

    @classmethod
    def publish_bytes(cls, ctx: RunContext) -> int:
        """The pooled copies of the means, scatters and cross-scatters (16·L·d² + 8·L·d) and, per pair worked on at
        once (``layer_threads``), its eigendecomposition and products (4 d × d)."""
        L, d = ctx.num_layers, ctx.dim
        threads = layer_threads(max(L - 1, 1), parallel=torch.device(ctx.device).type == "cpu")
        return int(16 * L * d * d + 8 * L * d + threads * 32 * d * d)

    # ------------------------------------------------------------------ streaming
    def begin_batch(self, batch: StateBatch) -> None:
        self._rows = half_rows(batch, self.device)
        self.view_split = view_split(self._rows)
        self._prev = None  # type: ignore[assignment]  # a new batch

    def _parts(self, view: LayerView) -> list[tuple]:
        """Per half: (n_h, μ_h, S_h, its centred rows x − c, δ_h = μ_h − c), or (0, …) for an empty half."""
        n_h = [int(r.numel()) for r in self._rows]
        if 0 in n_h:  # the whole batch is one half: the view is not split
            whole = (view.n, view.mean, view.scatter, view.centred, view.mean - view.centre)
            return [whole if n else (0, None, None, None, None) for n in n_h]
        if view.sizes != n_h:
            raise RuntimeError("the layer view is not split into this batch's halves")
        xc, c, out, a = view.centred, view.centre, [], 0
        for n, mean, scatter in view.parts():
            out.append((n, mean, scatter, xc[a : a + n], mean - c))
            a += n
        return out

    def update_layer(self, l: int, view: LayerView, batch: StateBatch) -> None:
        """Each half's cross-scatter with the previous layer (the Gram product of the two layers' centred rows
        less n_h δδᵀ: about the half's own means), pooled with the means before this batch; then this layer's
        mean and scatter (Chan)."""
        parts = self._parts(view)
        for h, (half, (n, mean, scatter, xc, delta)) in enumerate(zip(self.halves, parts)):
            if not n:
                continue
            moved = mean - half.cov.mean[l]  # μ_b − μ before pooling
            if l and self.paired[l - 1]:
                prev_xc, prev_delta, prev_moved = self._prev[h]
                block = (prev_xc.T @ xc).to(torch.float64) - torch.outer(prev_delta, delta) * n
                w = half.cov.n * n / (half.cov.n + n)
                half.cross[l - 1] += block + torch.outer(prev_moved, moved) * w
            half.cov.pool(l, n, mean, scatter)
            parts[h] = (xc, delta, moved)
        self._prev = [p if len(p) == 3 else None for p in parts]

    def end_batch(self, batch: StateBatch) -> None:
        self._rows = self._prev = self.view_split = None  # type: ignore[assignment]  # until the next batch

    # ------------------------------------------------------------------ result
    def pooled(self) -> tuple[int, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(n, means, scatters, cross-scatters) of the two halves pooled (copies): the whole run's."""
        n, mean, scatter = self.a.cov.pooled_with(self.b.cov)
        cross = self.a.cross.clone()
        cross_pool_into(cross, self.paired, self.a.n, self.a.mean, self.b.n, self.b.mean, self.b.cross)
        return n, mean, scatter, cross

    def _pair(self, j: int, S, C, halves) -> tuple:
        """Pair j's (values on the whole run, on half a, on half b, cross-fitted): ``stats.layer_linearity``'s
        ``pair_values`` and ``pair_cross_fitted`` of the pooled and the halves' moments (NaN where the pair is not
        computed; a half's values None where a half is empty)."""
        nan = dict.fromkeys(LL.QUANTITIES, float("nan"))
        if not self.paired[j]:
            xnan = dict.fromkeys((f"{q}_{k}" for q in LL.XFIT for k in ("xfit", "xfit_ab", "xfit_ba")), float("nan"))
            return nan, nan, nan, xnan
        full = LL.pair_values(S[j], S[j + 1], C[j])
        if any(h is None for h in halves):
            return full, None, None, None
        a, b = ((n, mu[j], mu[j + 1], Sh[j], Sh[j + 1], Ch[j]) for n, mu, Sh, Ch in halves)
        eigs = (LL.kept_eigen(a[3]), LL.kept_eigen(b[3]))  # each half's S_xx, for its values and the cross-fit
        values = [LL.pair_values(h[3], h[4], h[5], eig) for h, eig in zip((a, b), eigs)]
        return full, values[0], values[1], LL.pair_cross_fitted(a, b, True, eigs)  # one width d for every kept layer

    def result(self) -> dict:
        """Every pair's values, the pairs on the cores at once (``per_layer``: numpy's eigendecompositions)."""
        n, _, scatter, cross = self.pooled()
        S, C = scatter.cpu().numpy(), cross.cpu().numpy()
        halves = [
            (int(h.n), h.mean.cpu().numpy(), h.scatter.cpu().numpy(), h.cross.cpu().numpy()) if h.n else None
            for h in self.halves
        ]
        pairs = max(len(self.layers) - 1, 0)
        on_cpu = torch.device(self.device).type == "cpu"  # as publish_bytes plans
        per = per_layer(lambda j: self._pair(j, S, C, halves), pairs, parallel=on_cpu, what="pair of layers")
        full, half_a, half_b, xfit = (list(col) for col in zip(*per)) if per else ([], [], [], [])
        if any(h is None for h in halves):
            half_a = half_b = xfit = None  # type: ignore[assignment]  # no split: the columns are NaN
        dim = np.full(pairs, int(scatter.shape[-1]))
        return LL.table_columns(self.layers[:-1], self.layers[1:], np.full(pairs, n), full, half_a, half_b, xfit, dim)

    def tables(self, result, ctx: RunContext) -> dict:
        return {LL.TABLE: pa.table(result)}

    @classmethod
    def null_tables(cls, run, kind: str, stats, null, *, seed: int, search=None) -> dict:
        """The null's ``layer_linearity`` (``stats.layer_linearity.null_table``: the layers drawn independently
        given the type); {} when the run has none."""
        if not run.has(LL.TABLE):
            return {}
        return {LL.TABLE: pa.table(LL.null_table(kind, stats, run.layer_stats(), null, seed=seed))}

    def run_meta(self, result) -> dict:
        missing = [int(self.layers[j]) for j in range(len(self.layers) - 1) if not self.paired[j]]
        if not missing:
            return {}
        return {
            LL.MEASURE: {
                "pairs_not_computed": missing,
                "why": "the two layers sit on different devices (--device-map): each layer group's "
                "states stay on their device",
            }
        }


__all__ = ["LayerLinearityMeasure", "cross_pool_into", "CrossChan"]
