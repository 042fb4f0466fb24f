"""Figures of "your own sentence" (``service.own_sentence``): the percentile of each token's distance to
its type's mean, per layer, as a heat map; and one occurrence's point on the trade-off, added to a
``tradeoff_figures.tradeoff_scatter``. No Streamlit, no torch."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normvar_core.viz.theme import HIGHLIGHT, apply_theme


def percentile_heatmap(rows: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """Tokens of the sentence (rows, in order) × layers: the percentile of ‖x − μ(X_t)‖ among the type's
    sampled uses (blank: the type has no sampled use, or is not in the run)."""
    piv = rows.pivot_table(index="position", columns="layer", values="percentile", aggfunc="first", dropna=False)
    labels = rows.drop_duplicates("position").set_index("position")["token"].reindex(piv.index)
    ylab = [f"{p}: {t}" for p, t in zip(piv.index, labels)]
    z = piv.to_numpy(dtype=np.float64)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[str(c) for c in piv.columns],
            y=ylab,
            zmin=0,
            zmax=100,
            colorscale="RdBu_r",
            colorbar=dict(title=dict(text="percentile"), thickness=14),
            text=np.where(np.isfinite(z), np.vectorize(lambda a: f"{a:.0f}")(np.nan_to_num(z)), ""),
            texttemplate="%{text}",
            hovertemplate="%{y} · layer %{x}<br>percentile %{z:.1f}<extra></extra>",
        )
    )
    fig.update_layout(title=title, xaxis_title="layer", height=max(260, 70 + 26 * len(ylab)))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category")
    return apply_theme(fig, presentation)


def add_occurrence(fig: go.Figure, m: float, dist_sq: float, type_v: float, label: str) -> go.Figure:
    """Mark one occurrence at (M(X_t), ‖x − μ(X_t)‖²) with a star and join it to its type's point
    (M(X_t), V(X_t)) — the type's point is the mean of its occurrences' points."""
    fig.add_trace(
        go.Scatter(
            x=[m, m],
            y=[type_v, dist_sq],
            mode="lines",
            name="to its type",
            line=dict(color=HIGHLIGHT, width=1.5, dash="dot"),
            hoverinfo="skip",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[m],
            y=[dist_sq],
            mode="markers+text",
            name="your occurrence",
            text=[label],
            textposition="middle right",
            textfont=dict(color=HIGHLIGHT, size=13),
            marker=dict(symbol="star", size=18, color=HIGHLIGHT, line=dict(color="#111", width=1)),
            hovertemplate=f"<b>{label}</b> (your sentence)<br>M(X_t) = %{{x:.4g}}<br>"
            "‖x − μ‖² = %{y:.4g}<extra></extra>",
        )
    )
    return fig


__all__ = ["percentile_heatmap", "add_occurrence"]
