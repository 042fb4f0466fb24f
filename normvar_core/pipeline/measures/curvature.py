"""Curvature (Skean et al. 2025, "Layer by Layer", §3.3; Hosseini & Fedorenko 2023): per kept layer, the mean angle
between the successive token-difference vectors of a sentence, averaged over sentences.

For sentence s with counted token states z_1 … z_T at layer l (in position order), v_k = z_{k+1} − z_k and::

    θ_k = arccos( v_k · v_{k+1} / (‖v_k‖ ‖v_{k+1}‖) ),      k = 1 … T − 2
    C_s = mean_k θ_k                                          (radians, 0 … π)
    curvature_l = (1 / S) Σ_s C_s                             (over the S sentences with an angle)

0 when a sentence's trajectory through the layer's space is a straight line, π when it turns back at every step;
an angle with a zero difference vector (two equal successive states) is left out, and a sentence with no angle
left (fewer than three tokens) is not counted. A Gaussian null: tokens drawn i.i.d. from N(0, I_d) give
cos θ → −1/2 as d grows (v_k and v_{k+1} share −z_{k+1}), so C → 2π/3 (the test's check).

A batch holds whole sentences, each one run of consecutive rows in position order (``StateBatch.sentence_runs``),
so every angle is formed from three consecutive rows of one sentence, in one float64 pass over the layer per
batch. The state is two numbers per kept layer, Σ_s C_s (float64) and the sentences counted (int64), merged by
``"sum"``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures.base import Planned
from normvar_core.pipeline.measures.layerview import LayerMajor
from normvar_core.runs.declared import LayerCurve


def sentence_curvatures(x: torch.Tensor, sentence: torch.Tensor, n_sentences: int) -> tuple[torch.Tensor, ...]:
    """(Σ_k θ_k, number of angles) of every sentence, float64 and int64 (n_sentences,): ``x`` (N, d) the rows,
    ``sentence`` (N,) each row's sentence 0 … n_sentences − 1, a sentence's rows consecutive in position order."""
    x64 = x.to(torch.float64)
    v = x64[1:] - x64[:-1]  # v_k between rows k and k + 1
    same = sentence[1:] == sentence[:-1]  # v_k lies within one sentence
    norm = torch.linalg.vector_norm(v, dim=1)
    ok = same[1:] & same[:-1] & (norm[1:] > 0) & (norm[:-1] > 0)  # angle k: rows k, k + 1, k + 2 of one sentence
    cos = (v[1:] * v[:-1]).sum(1) / (norm[1:] * norm[:-1])
    theta = torch.arccos(cos.clamp(-1.0, 1.0))[ok]
    owner = sentence[:-2][ok]
    total = torch.zeros(n_sentences, dtype=torch.float64, device=x.device).index_add_(0, owner, theta)
    count = torch.zeros(n_sentences, dtype=torch.int64, device=x.device).index_add_(0, owner, torch.ones_like(owner))
    return total, count


class CurvatureMeasure(LayerMajor):
    """The mean over sentences of each sentence's mean turning angle, per kept layer (module docstring)."""

    name = "curvature"
    title = "curvature"
    table_names = ("layer_curvature",)
    curves = (
        LayerCurve(
            table="layer_curvature",
            column="curvature",
            title="Curvature per layer",
            y_title="mean angle between successive token differences (rad)",
            description="How straight a sentence's path through the layer is: the mean angle between successive "
            "token-difference vectors, averaged over sentences; 2π/3 for i.i.d. Gaussian tokens (Skean et al. "
            "2025; Hosseini & Fedorenko 2023).",
        ),
    )
    policy = "two numbers per kept layer: always kept"

    def __init__(self, ctx: RunContext):
        super().__init__(ctx)  # layers, device, scatter dtype
        L = ctx.num_layers
        self._add_state("curvature_sum", torch.zeros(L, dtype=torch.float64, device=self.device))
        self._add_state("sentences", torch.zeros(L, dtype=torch.int64, device=self.device))
        self._rows: tuple[torch.Tensor, int] = (torch.zeros(0, dtype=torch.int64), 0)

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """Σ_s C_s (float64) and the sentences counted (int64) per kept layer: 16·L bytes."""
        return {"curvature_sum": ((ctx.num_layers,), np.float64), "sentences": ((ctx.num_layers,), np.int64)}

    @classmethod
    def update_bytes(cls, ctx: RunContext, n: int, rows: int) -> int:
        """The consecutive differences of a layer's rows and their float64 products: 3·8·n·d."""
        return 3 * 8 * n * ctx.dim

    def begin_batch(self, batch) -> None:
        _, counts = batch.sentence_runs()
        self._rows = torch.repeat_interleave(torch.arange(len(counts)), counts.cpu()), len(counts)

    def update_layer(self, l: int, view, batch) -> None:
        sentence, n = self._rows
        total, count = sentence_curvatures(view.x, sentence.to(view.x.device), n)
        has = count > 0
        self.curvature_sum[l] += (total[has] / count[has]).sum()
        self.sentences[l] += has.sum()

    def result(self) -> dict[str, np.ndarray]:
        total, n = self.curvature_sum.cpu().numpy(), self.sentences.cpu().numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, total / n, np.nan)
        return {"layer": np.asarray(self.layers, np.int64), "curvature": mean, "sentences": n}

    def tables(self, result, ctx: RunContext) -> dict[str, pa.Table]:
        return {"layer_curvature": pa.table(result)}
