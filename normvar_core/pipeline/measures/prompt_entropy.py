"""Prompt entropy (Skean et al. 2025, "Layer by Layer", §3.1, eq. 1 at α = 1): per kept layer, the matrix entropy
of each sentence's token Gram matrix, averaged over sentences.

For sentence s with counted token states Z_s (T_s × d) at layer l, the Gram matrix K_s = Z_s Z_sᵀ (T_s × T_s) has
eigenvalues λ_1 … λ_T ≥ 0; trace-normalised, p_i = λ_i / tr K_s, its α = 1 (von Neumann, Shannon) entropy is::

    H(K_s) = −Σ_i p_i log p_i                      (nats; 0 ≤ H ≤ log T_s)
    prompt_entropy_l = (1 / S) Σ_s H(K_s)           (over the S sentences of the run)

0 when a sentence's tokens are all along one direction, log T_s when they are orthogonal and of equal norm: how
much the tokens of a sentence spread out. A Gaussian null: tokens drawn i.i.d. from N(0, I_d) with T ≪ d give
K ≈ d·I, so H → log T_s (the test's check).

A batch holds whole sentences (``StateBatch.sentence_runs``), so each sentence's K_s is formed in the batch that
holds it: sentences of about the same length padded together into a (sentences, T_max, d) float64 block (padding
rows are zero: zero eigenvalues, which add nothing), one batched Gram product and one batched ``eigvalsh`` each.
The state is two numbers per kept layer, Σ_s H (float64) and the sentences counted (int64), merged by ``"sum"``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures.base import Planned
from normvar_core.pipeline.measures.layerview import LayerMajor
from normvar_core.runs.declared import LayerCurve

CHUNK = 1 << 24
"""Most float64 elements of one padded block (sentences × T_max × d): 128 MB, the bound on its memory."""
GROUP = 16
"""Sentences of about the same length padded together (one batched Gram product and ``eigvalsh`` each)."""


def matrix_entropy(eigenvalues: torch.Tensor) -> torch.Tensor:
    """−Σ p log p over the last axis, p = λ / Σλ (rounding's negative λ read as 0, 0 log 0 = 0); NaN where Σλ = 0."""
    lam = eigenvalues.to(torch.float64).clamp(min=0.0)
    p = lam / lam.sum(-1, keepdim=True)
    return -(p * torch.where(p > 0, p, torch.ones_like(p)).log()).sum(-1)


def sentence_entropies(x: torch.Tensor, starts: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """H(K_s) of every sentence (``starts``, ``counts``: its rows of ``x``, (N, d)), float64, in the batch's
    sentence order. The sentences go by length, ``GROUP`` at a time, each group padded to its own longest (the
    eigendecompositions' work then follows the lengths), in blocks of at most ``CHUNK`` elements."""
    S, d = len(counts), x.shape[1]
    out = torch.full((S,), float("nan"), dtype=torch.float64, device=x.device)
    order = torch.argsort(counts, stable=True)
    a = 0
    while a < S:
        T = int(counts[order[min(a + GROUP, S) - 1]])
        b = min(a + GROUP, a + max(1, CHUNK // max(T * d, 1)), S)
        group = order[a:b]
        c = counts[group]
        sent = torch.repeat_interleave(torch.arange(b - a), c)
        offset = torch.arange(int(c.sum())) - (torch.cumsum(c, 0) - c)[sent]
        rows = (starts[group][sent] + offset).to(x.device)
        Z = torch.zeros((b - a, T, d), dtype=torch.float64, device=x.device)
        Z[sent.to(x.device), offset.to(x.device)] = x[rows].to(torch.float64)
        out[group.to(x.device)] = matrix_entropy(torch.linalg.eigvalsh(Z @ Z.transpose(1, 2)))
        a = b
    return out


class PromptEntropyMeasure(LayerMajor):
    """The mean over sentences of each sentence's token-Gram entropy, per kept layer (module docstring)."""

    name = "prompt_entropy"
    title = "prompt entropy"
    table_names = ("layer_prompt_entropy",)
    curves = (
        LayerCurve(
            table="layer_prompt_entropy",
            column="prompt_entropy",
            title="Prompt entropy per layer",
            y_title="mean over sentences of H(Z Zᵀ / tr) (nats)",
            description="How far the tokens of a sentence spread out: the entropy of the trace-normalised "
            "eigenvalues of each sentence's token Gram matrix, averaged over sentences (Skean et al. 2025).",
        ),
    )
    policy = "two numbers per kept layer: kept when asked for (--prompt-entropy)"

    def __init__(self, ctx: RunContext):
        super().__init__(ctx)  # layers, device, scatter dtype
        L = ctx.num_layers
        self._add_state("entropy_sum", torch.zeros(L, dtype=torch.float64, device=self.device))
        self._add_state("sentences", torch.zeros(L, dtype=torch.int64, device=self.device))
        self._runs: tuple[torch.Tensor, ...] = ()

    @classmethod
    def asked(cls, cfg: RunConfig) -> bool:
        return cfg.prompt_entropy  # opt-in: an eigendecomposition per sentence and layer (docs/benchmarks.md)

    @classmethod
    def planned_state(cls, ctx: RunContext) -> Planned:
        """Σ_s H (float64) and the sentence count (int64) per kept layer: 16·L bytes."""
        return {"entropy_sum": ((ctx.num_layers,), np.float64), "sentences": ((ctx.num_layers,), np.int64)}

    @classmethod
    def update_bytes(cls, ctx: RunContext, n: int, rows: int) -> int:
        """One padded block of ``CHUNK`` float64 elements and its Gram products: 2·8·CHUNK at most."""
        return 2 * 8 * CHUNK

    def begin_batch(self, batch) -> None:
        self._runs = tuple(t.cpu() for t in batch.sentence_runs())  # host indices; the rows stay where they are

    def update_layer(self, l: int, view, batch) -> None:
        h = sentence_entropies(view.x, *self._runs)
        ok = ~torch.isnan(h)  # a sentence whose states are all zero has no entropy
        self.entropy_sum[l] += h[ok].sum()
        self.sentences[l] += ok.sum()

    def result(self) -> dict[str, np.ndarray]:
        total, n = self.entropy_sum.cpu().numpy(), self.sentences.cpu().numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, total / n, np.nan)
        return {"layer": np.asarray(self.layers, np.int64), "prompt_entropy": mean, "sentences": n}

    def tables(self, result, ctx: RunContext) -> dict[str, pa.Table]:
        return {"layer_prompt_entropy": pa.table(result)}
