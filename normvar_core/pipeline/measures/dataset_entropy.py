"""Dataset entropy (Skean et al. 2025, "Layer by Layer", §3.1): per kept layer, the α = 1 matrix entropy of the Gram
matrix of the sentences' mean token states.

For the S sentences of the run, with m_s = (1 / T_s) Σ_t z_{s,t} the mean of sentence s's counted token states at
layer l and M the S × d matrix of them, K = M Mᵀ (S × S); its nonzero eigenvalues are those of MᵀM = Σ_s m_s m_sᵀ
(d × d), so, with p_i = λ_i / tr K::

    dataset_entropy_l = −Σ_i p_i log p_i            (nats; 0 ≤ H ≤ log min(S, d))

0 when every sentence's mean lies along one direction, log S when they are orthogonal and of equal norm: how much
the sentences differ from one another at that layer. A Gaussian null: tokens drawn i.i.d. from N(0, I_d), with
S ≪ d, give K ≈ diag(d / T_s), so H → the entropy of p_s ∝ 1 / T_s (the test's check).

The state is Σ_s m_s m_sᵀ per kept layer (float64, d × d), summed over batches (a batch holds whole sentences,
``StateBatch.sentence_runs``, so each m_s is formed in the batch that holds it) and merged by ``"sum"``, and the
number of sentences, an int count shared by all layers: exact under any split of the batches. Its d × d per layer
is as large as the geometry's covariance, so a run short of memory may leave it out.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures.base import Planned
from normvar_core.pipeline.measures.layerview import LayerMajor
from normvar_core.pipeline.measures.prompt_entropy import matrix_entropy
from normvar_core.runs.declared import LayerCurve


class DatasetEntropyMeasure(LayerMajor):
    """The entropy of the sentence means' Gram matrix per kept layer (module docstring)."""

    sentences: int  # registered state (``_add_state``): the sentences counted, one count for all layers

    name = "dataset_entropy"
    title = "dataset entropy"
    table_names = ("layer_dataset_entropy",)
    curves = (
        LayerCurve(
            table="layer_dataset_entropy",
            column="dataset_entropy",
            title="Dataset entropy per layer",
            y_title="H(M Mᵀ / tr), M the sentence means (nats)",
            description="How much the sentences differ: the entropy of the trace-normalised eigenvalues of the "
            "Gram matrix of the sentences' mean token states (Skean et al. 2025).",
        ),
    )
    policy = "a d × d float64 sum per kept layer (8·L·d² bytes): a run short of memory leaves it out"

    def __init__(self, ctx: RunContext):
        super().__init__(ctx)  # layers, device, scatter dtype
        L, d = ctx.num_layers, ctx.dim
        self._add_state("mean_outer", torch.zeros((L, d, d), dtype=torch.float64, device=self.device))
        self._add_state("sentences", 0)  # an int: one count for all layers
        self._runs: tuple[torch.Tensor, torch.Tensor] = (torch.zeros(0), torch.zeros(0))

    @classmethod
    def may_drop(cls, cfg) -> bool:
        return True

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """Σ_s m_s m_sᵀ per kept layer (float64) and the sentence count: 8·L·d² + 8 bytes."""
        return {"mean_outer": ((ctx.num_layers, ctx.dim, ctx.dim), np.float64), "sentences": ((1,), np.int64)}

    @classmethod
    def update_bytes(cls, ctx: RunContext, n: int, rows: int) -> int:
        """The sentences' mean rows (8·rows·d) beside the layer's float64 copy (8·n·d) or their Gram product
        (8·d²), whichever is larger."""
        return 8 * rows * ctx.dim + 8 * max(n * ctx.dim, ctx.dim**2)

    def begin_batch(self, batch) -> None:
        starts, counts = batch.sentence_runs()
        self._runs = torch.repeat_interleave(torch.arange(len(counts)), counts.cpu()), counts.cpu()

    def update_layer(self, l: int, view, batch) -> None:
        sent, counts = (t.to(view.x.device) for t in self._runs)
        means = torch.zeros((len(counts), view.x.shape[1]), dtype=torch.float64, device=view.x.device)
        means.index_add_(0, sent, view.x.to(torch.float64)).div_(counts.unsqueeze(1))
        self.mean_outer[l] += means.T @ means

    def end_batch(self, batch) -> None:
        self.sentences += len(self._runs[1])

    def result(self) -> dict[str, np.ndarray]:
        lam = np.stack([np.linalg.eigvalsh(g) for g in self.mean_outer.cpu().numpy()])  # one layer at a time
        return {
            "layer": np.asarray(self.layers, np.int64),
            "dataset_entropy": matrix_entropy(torch.from_numpy(lam)).numpy(),
            "sentences": np.full(len(self.layers), self.sentences, np.int64),
        }

    def tables(self, result, ctx: RunContext) -> dict[str, pa.Table]:
        return {"layer_dataset_entropy": pa.table(result)}
