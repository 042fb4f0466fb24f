"""App. I of the study — what LayerNorm predicts — recorded per stored hidden state.

If a hidden state is the output of a normalization, x = z ⊙ γ + β with z the normalized input
(mean 0 and variance 1 over the d coordinates for LayerNorm), then (App. I)

    Q(X_t) = E‖z ⊙ γ + β‖² = ‖γ‖² + ‖β‖² + (‖γ‖² + βᵀγ) O_p(n_t^{-1/2}),

so Q(X_t) ≈ ‖γ‖² + ‖β‖², with a C.V. of O(n₀^{-1/2}). For RMSNorm (no β; z has mean square 1) the
same argument gives ‖γ‖².

Which hidden states are norm outputs is found, not assumed: in the model's one probe (``probe.py``),
forward hooks on every normalization module record its output on one sentence, and hidden state l
is a norm output when one of them is the very tensor HF returns (``torch.equal``) — BERT's and RoBERTa's every block and
embeddings
(Post-LN), GPT-2's / Llama's last hidden state (the final norm), nothing else in Pre-LN blocks.

The effective γ and β are measured on the module itself, so every parameterization is covered
(``nn.LayerNorm``, RMSNorm, Gemma's x·(1 + w)): a normalization of c·1 and of −c·1 gives β twice
for LayerNorm (the centred input is 0) and ±γ/√(1 + ε/c²) for RMSNorm; for LayerNorm, γ then comes
from mean-zero probes p: γ = (f(p) − β) / z(p), z(p) = (p − mean p)/std p.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from normvar_core.pipeline.models.probe import PROBE, as_function, norm_kind, run_probe


def effective_affine(norm, dim: int) -> tuple[str, np.ndarray, np.ndarray]:
    """(kind, γ, β) of a normalization module, measured by probing it (module docstring)."""
    f = as_function(norm)
    kind, plus, minus = norm_kind(f, dim)
    if kind == "LayerNorm":  # centred: both constant probes gave β
        beta = (plus + minus) / 2
        alt = np.where(np.arange(dim) % 2 == 0, PROBE, -PROBE)
        gamma = np.empty(dim)
        for probe in (alt, np.roll(alt, 1)):  # every coordinate gets a non-zero z in one of them
            z = (probe - probe.mean()) / probe.std()
            ok = np.abs(z) > 0.5
            gamma[ok] = ((f(probe) - beta) / np.where(ok, z, 1.0))[ok]
        return kind, gamma, beta
    return kind, (plus - minus) / 2, (plus + minus) / 2


def norm_outputs(model, tokenizer) -> dict[int, str]:
    """{hidden-state index: name of the normalization module whose output it is} (``probe.run_probe``)."""
    return run_probe(model, tokenizer).norm_of_hidden_states()


def norm_tables(
    model, tokenizer, layers: list[int], dim: int, where: dict[int, str] | None = None
) -> dict[str, pa.Table]:
    """App. I's two tables, from one probe of every normalization:

    * ``norm_params(layer, module, norm_type, gamma_sq, beta_sq, q_pred)``: one row per stored layer;
      module '' and NaN where the hidden state is not a norm output (Pre-LN blocks);
    * ``norm_affine(layer, dim, gamma, beta)``: the effective γ and β of every norm output, per
      coordinate (d rows per such layer) — what ``stats.layernorm.layernorm_attribution`` needs to say
      where the prediction fails.

    ``where``: {hidden-state index: norm module} when the model's load probe already found it
    (``LoadedModel.norm_outputs``); else the model is probed now."""
    where = norm_outputs(model, tokenizer) if where is None else where
    mods = dict(model.named_modules())
    rows: dict[str, list] = {"layer": [], "module": [], "norm_type": [], "gamma_sq": [], "beta_sq": [], "q_pred": []}
    affine: dict[str, list] = {"layer": [], "dim": [], "gamma": [], "beta": []}
    for layer in layers:
        name = where.get(int(layer), "")
        kind, g2, b2 = "", np.nan, np.nan
        if name:
            kind, gamma, beta = effective_affine(mods[name], dim)
            g2, b2 = float(gamma @ gamma), float(beta @ beta)
            affine["layer"].append(np.full(dim, int(layer), np.int32))
            affine["dim"].append(np.arange(dim, dtype=np.int32))
            affine["gamma"].append(gamma)
            affine["beta"].append(beta)
        rows["layer"].append(int(layer))
        rows["module"].append(name)
        rows["norm_type"].append(kind)
        rows["gamma_sq"].append(g2)
        rows["beta_sq"].append(b2)
        rows["q_pred"].append(g2 + b2)
    params = pa.table(
        {
            "layer": pa.array(rows["layer"], pa.int32()),
            "module": rows["module"],
            "norm_type": rows["norm_type"],
            "gamma_sq": rows["gamma_sq"],
            "beta_sq": rows["beta_sq"],
            "q_pred": rows["q_pred"],
        }
    )
    cat = {
        k: (np.concatenate(v) if v else np.zeros(0, np.int32 if k in ("layer", "dim") else np.float64))
        for k, v in affine.items()
    }
    return {
        "norm_params": params,
        "norm_affine": pa.table(
            {
                "layer": pa.array(cat["layer"], pa.int32()),
                "dim": pa.array(cat["dim"], pa.int32()),
                "gamma": pa.array(cat["gamma"], pa.float64()),
                "beta": pa.array(cat["beta"], pa.float64()),
            }
        ),
    }


__all__ = ["effective_affine", "norm_outputs", "norm_tables", "PROBE"]
