"""Training dynamics of a sweep (one run per checkpoint; Razzhigaev et al. 2024 Fig. 2–4) and the study's measures
against training step."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normvar_core.constants import STUDY_BAND
from normvar_core.stats import analyses
from normvar_core.viz.theme import COLORSCALE, PALETTE, apply_theme


def _x(step: pd.Series) -> np.ndarray:
    return np.maximum(step.to_numpy(dtype=np.float64), 1.0)  # step 0 drawn at 1 on the log axis


def sweep_measures(runs: list) -> pd.DataFrame:
    """Per checkpoint (sorted by step): the study's measures over layers — the smallest C.V. of Q(X_t), the
    most negative slope and the best R² of V on M (band 10..1e5), M(X)/Q(X) and V_W(X)/V(X) at the last
    layer, each with the layer where it is reached — and, where the run has geometry, the TwoNN ID
    averaged over layers (± the mean of the per-layer stds) and the largest anisotropy."""
    rows = []
    for r in sorted(runs, key=lambda r: r.meta.get("step") or 0):
        tr = analyses.tradeoff(r.stats(), *STUDY_BAND)
        dec = analyses.decomposition(r.stats(), 1, np.inf)
        row = {"run": r.name, "step": int(r.meta.get("step") or 0)}
        if tr["cv_q"].notna().any():
            i, j, k = tr["cv_q"].idxmin(), tr["slope"].idxmin(), tr["r2"].idxmax()
            row.update(
                min_cv_q=tr.loc[i, "cv_q"],
                min_cv_q_layer=int(tr.loc[i, "layer"]),
                best_slope=tr.loc[j, "slope"],
                best_slope_layer=int(tr.loc[j, "layer"]),
                best_r2=tr.loc[k, "r2"],
                best_r2_layer=int(tr.loc[k, "layer"]),
            )
        last = dec.iloc[-1]
        row.update(m_over_q=last["m_over_q"], v_w_over_v=last["v_w_over_v"])
        if r.has("geometry"):
            g = r.table("layer_geometry")
            row.update(
                twonn_id=g["twonn_id"].mean(),
                twonn_id_std=g["twonn_id_std"].mean(),
                max_anisotropy=g["anisotropy"].max(),
            )
        rows.append(row)
    return pd.DataFrame(rows)


def id_figure(m: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """Razzhigaev et al. 2024 Fig. 2: intrinsic dimension averaged over layers against training step (± std)."""
    fig = go.Figure(
        go.Scatter(
            x=_x(m["step"]),
            y=m["twonn_id"],
            mode="lines+markers",
            text=m["run"],
            error_y=dict(type="data", array=m["twonn_id_std"], visible=True),
            line=dict(color=PALETTE[0], width=2.5),
            hovertemplate="%{text}<br>step %{x}<br>ID %{y:.2f}<extra></extra>",
        )
    )
    fig.update_xaxes(type="log", title_text="training step (0 drawn at 1)")
    fig.update_yaxes(title_text="TwoNN ID, mean over layers")
    fig.update_layout(
        title=title or "Intrinsic dimension during training (Razzhigaev et al. 2024 protocol, Fig. 2)",
        height=420 if presentation else 380,
    )
    return apply_theme(fig, presentation)


def anisotropy_by_step(runs: list, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """Razzhigaev et al. 2024 Fig. 3/4: anisotropy per layer, one curve per checkpoint, coloured by log10 step."""
    runs = sorted([r for r in runs if r.has("geometry")], key=lambda r: r.meta.get("step") or 0)
    steps = np.array([max(int(r.meta.get("step") or 0), 1) for r in runs], dtype=np.float64)
    lo, hi = np.log10(steps.min()), np.log10(steps.max()) if len(steps) else (0.0, 1.0)
    fig = go.Figure()
    import plotly.colors as pc

    for r, s in zip(runs, steps):
        g = r.table("layer_geometry").sort_values("layer")
        t = 0.0 if hi == lo else (np.log10(s) - lo) / (hi - lo)
        color = pc.sample_colorscale(COLORSCALE, [t])[0]
        fig.add_trace(
            go.Scatter(
                x=g["layer"],
                y=g["anisotropy"],
                mode="lines+markers",
                name=f"step {int(r.meta.get('step') or 0)}",
                line=dict(color=color, width=2),
                customdata=[r.name] * len(g),
                hovertemplate="%{customdata}<br>layer %{x}<br>anisotropy %{y:.4f}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="layer")
    fig.update_yaxes(title_text="anisotropy λ₁/Σλ (exact)")
    fig.update_layout(
        title=title or "Anisotropy per layer across training (Razzhigaev et al. 2024 protocol, Fig. 3/4)",
        height=440 if presentation else 400,
    )
    return apply_theme(fig, presentation)


def measures_figure(m: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """The study's measures against training step, the layer where each is reached in the hover."""
    panels = (
        ("min_cv_q", "min C.V. of Q(Xₜ)", "min_cv_q_layer"),
        ("best_slope", "most negative slope V on M", "best_slope_layer"),
        ("best_r2", "best R²", "best_r2_layer"),
        ("m_over_q", "M(X)/Q(X), last layer", None),
        ("v_w_over_v", "V<sub>W</sub>(X)/V(X), last layer", None),
    )
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[1] for p in panels], horizontal_spacing=0.05)
    for c, (key, _, layer_key) in enumerate(panels, start=1):
        if key not in m:
            continue
        custom = m[layer_key] if layer_key else m["run"]
        fig.add_trace(
            go.Scatter(
                x=_x(m["step"]),
                y=m[key],
                mode="lines+markers",
                showlegend=False,
                line=dict(color=PALETTE[c % len(PALETTE)], width=2.5),
                customdata=custom,
                hovertemplate=(
                    "step %{x}<br>%{y:.4g}<br>layer %{customdata}<extra></extra>"
                    if layer_key
                    else "step %{x}<br>%{y:.4g}<extra></extra>"
                ),
            ),
            row=1,
            col=c,
        )
        fig.update_xaxes(type="log", row=1, col=c)
    fig.update_layout(title=title or "The study's measures during training", height=380 if presentation else 340)
    return apply_theme(fig, presentation)


__all__ = ["sweep_measures", "id_figure", "anisotropy_by_step", "measures_figure"]
