"""Words for a run file's columns where a page, an expander or a slide's notes show a table: no raw column name
(``q_pred``, ``v_w``) on any of them. ``WORDS`` names the moments' and App. I's columns; any other column gets
``viz.labels.readable``'s words (its declared name, else its underscores as spaces)."""

from __future__ import annotations

import pandas as pd

from normvar_core.viz.labels import readable

WORDS: dict[str, str] = {
    "n": "embeddings n",
    "q": "Q(X)",
    "m": "M(X)",
    "v": "V(X)",
    "v_w": "V_W(X)",
    "v_b": "V_B(X)",
    "module": "norm module",
    "q_pred": "‖γ‖² + ‖β‖² (App. I's Q)",
    "q_all": "Q(X), every type",
    "q_types_mean": "mean Q(X_t), band",
    "measured_over_predicted": "measured / predicted Q",
    "q_over_pred": "Q(X) / ‖γ‖² + ‖β‖²",
    "gamma_term": "Σ γᵢ² E zᵢ²",
    "beta_sq": "‖β‖²",
    "cross_term": "2 Σ βᵢ(mᵢ − βᵢ)",
    "gamma_weighting": "γ-weighting",
    "z_energy": "z energy Σ E zᵢ² / d",
    "top_z_share": "top-5 share of z's energy",
    "top_gamma_sq_ratio": "top-5 γᵢ² / mean γᵢ²",
    "cv_q": "C.V. of Q(X_t)",
    "n1": "scale n1",
    "gride_id": "GRIDE dimension",
    "gride_id_err": "its error",
    "gride_id_masked": "own sentence masked",
    "to_layer": "to layer",
    "overlap": "χ_k",
    "overlap_std": "± over batches",
    "chance": "chance k / n",
    "spearman_rho": "Spearman's ρ against n_t",
    "types": "types drawn",
    "points": "points drawn",
    "centre": "centre ‖c‖",
    "spread": "spread",
    "share": "drawn M/Q",
}
TABLES: dict[str, str] = {
    "layer_geometry": "the layer geometry per layer",
    "layer_stats": "the moments per layer",
    "layer_linearity": "the layer linearity per pair",
    "layer_overlap": "the neighbourhood overlap per layer",
}


def words(column: str) -> str:
    """The words for ``column`` (``WORDS``, else ``viz.labels.readable``)."""
    return WORDS.get(column) or readable(str(column))


def for_display(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its columns renamed to their words (a copy)."""
    return df.rename(columns={c: words(c) for c in df.columns})


__all__ = ["WORDS", "TABLES", "words", "for_display"]
