"""Figures of the Gaussian-geometry comment's high-dimensional checks (``stats.highdim``): a run next to its Gaussian
nulls."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normvar_core.stats.highdim import norm_spread_reference
from normvar_core.viz.labels import tidy_log_axes
from normvar_core.viz.overlay import NULL_CLOUD, NULL_COLOR, null_cloud, null_line
from normvar_core.viz.theme import LEGEND_BELOW, PALETTE, apply_theme

PROFILE_PANELS = (
    ("norm_cv", "spread of the norm std‖x‖ / E‖x‖"),
    ("mean_cosine", "mean cosine (solid) and M(X)/Q(X) (dotted)"),
    ("n_m_over_v", "median n<sub>t</sub> · M(X<sub>t</sub>) / V(X<sub>t</sub>)"),
)


def highdim_profiles(
    run_table: pd.DataFrame,
    null_tables: Mapping[str, pd.DataFrame],
    *,
    dim: int,
    label: str,
    presentation: bool = False,
    title: str | None = None,
) -> go.Figure:
    """Three panels against layer: the norm spread against 1/√(2d); the mean cosine against M(X)/Q(X)
    (what one shared offset explains); the median n_t·M/V against 1 (Gaussians), log scale."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in PROFILE_PANELS], horizontal_spacing=0.08)
    for lab, t in null_tables.items():
        t = t.sort_values("layer")
        for col, (key, _) in enumerate(PROFILE_PANELS, start=1):
            null_line(fig, t["layer"], t[key], lab, showlegend=col == 1, what=f"{key} =", row=1, col=col)
    t = run_table.sort_values("layer")
    color = PALETTE[0]
    for col, (key, _) in enumerate(PROFILE_PANELS, start=1):
        fig.add_trace(
            go.Scatter(
                x=t["layer"],
                y=t[key],
                mode="lines+markers",
                name=label,
                legendgroup=label,
                showlegend=col == 1,
                line=dict(color=color, width=2.5),
                hovertemplate=f"{label}<br>layer %{{x}}<br>{key} = %{{y:.4g}}<extra></extra>",
            ),
            row=1,
            col=col,
        )
    fig.add_trace(
        go.Scatter(
            x=t["layer"],
            y=t["m_over_q"],
            mode="lines",
            name=f"{label}: M(X)/Q(X)",
            line=dict(color=color, width=2, dash="dot"),
            hovertemplate="layer %{x}<br>M(X)/Q(X) = %{y:.4g}<extra></extra>",
        ),
        row=1,
        col=2,
    )
    ref = norm_spread_reference(dim)
    fig.add_hline(
        y=ref,
        line=dict(color="#222", width=1, dash="dot"),
        row=1,
        col=1,
        annotation_text=f"1/√(2d) = {ref:.3f}",
        annotation_position="top left",
    )
    fig.add_hline(y=1.0, line=dict(color="#222", width=1, dash="dot"), row=1, col=3)
    # on a log axis an annotation's y is log10 of the value (add_hline's own label would sit at y = 1 there)
    fig.add_annotation(
        x=0, xref="x3 domain", y=0.0, yref="y3", text="Gaussian: 1", showarrow=False, xanchor="left", yanchor="top"
    )
    fig.update_yaxes(type="log", row=1, col=3)
    fig.update_xaxes(title_text="layer")
    fig.update_layout(title=title, height=440 if presentation else 400, hovermode="closest", legend=LEGEND_BELOW)
    return tidy_log_axes(apply_theme(fig, presentation), plain=True)  # a ratio: 1,000,000, never "1M"


def pair_cosines_figure(
    cosines: np.ndarray,
    null_cosines: Mapping[str, np.ndarray],
    *,
    dim: int,
    label: str,
    presentation: bool = False,
    title: str | None = None,
) -> go.Figure:
    """Histogram (density) of the cosines of random pairs, the nulls' in grey, and N(0, 1/d)."""
    fig = go.Figure()
    allc = np.concatenate([np.asarray(cosines)] + [np.asarray(c) for c in null_cosines.values()])
    lo, hi = (float(allc.min()), float(allc.max())) if allc.size else (-1.0, 1.0)
    bins = dict(start=lo, end=hi, size=max((hi - lo) / 120, 1e-4))
    for lab, c in null_cosines.items():
        fig.add_trace(
            go.Histogram(
                x=c,
                xbins=bins,
                histnorm="probability density",
                name=lab,
                marker_color=NULL_CLOUD,
                hovertemplate=f"{lab}<br>%{{x}}: %{{y:.3g}}<extra></extra>",
            )
        )
    fig.add_trace(
        go.Histogram(
            x=cosines,
            xbins=bins,
            histnorm="probability density",
            name=label,
            marker_color=PALETTE[0],
            opacity=0.7,
            hovertemplate=f"{label}<br>%{{x}}: %{{y:.3g}}<extra></extra>",
        )
    )
    sd = 1.0 / np.sqrt(dim)
    xs = np.linspace(min(lo, -4 * sd), max(hi, 4 * sd), 400)
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=np.exp(-0.5 * (xs / sd) ** 2) / (sd * np.sqrt(2 * np.pi)),
            mode="lines",
            name="N(0, 1/d)",
            line=dict(color=NULL_COLOR, width=2, dash="dot"),
            hoverinfo="skip",
        )
    )
    fig.update_layout(
        barmode="overlay",
        title=title,
        xaxis_title="cosine of two random embeddings",
        yaxis_title="density",
        height=380,
        legend=dict(orientation="h", yanchor="bottom", y=-0.4, x=0),
    )
    return apply_theme(fig, presentation)


def mv_scatter(
    points: pd.DataFrame,
    null_points: Mapping[str, pd.DataFrame],
    *,
    label: str,
    presentation: bool = False,
    title: str | None = None,
) -> go.Figure:
    """M(X_t)/V(X_t) against n_t (log–log) for the run and its nulls (grey), with 1/(n_t − 1)."""
    fig = go.Figure()
    for lab, p in null_points.items():
        p = p[p["v"] > 0]
        null_cloud(fig, p["n"], p["m"] / p["v"], lab, size=4)
    p = points[points["v"] > 0]
    fig.add_trace(
        go.Scattergl(
            x=p["n"],
            y=p["m"] / p["v"],
            mode="markers",
            name=label,
            text=p["token"],
            marker=dict(size=4 if len(p) > 5000 else 6, color=PALETTE[0], opacity=0.6),
            hovertemplate="<b>%{text}</b><br>n = %{x:,}<br>M/V = %{y:.4g}<extra></extra>",
        )
    )
    if len(points):
        n = np.geomspace(max(2.0, float(points["n"].min())), float(points["n"].max()) + 1, 60)
        fig.add_trace(
            go.Scatter(
                x=n,
                y=1.0 / (n - 1),
                mode="lines",
                name="Gaussian: 1/(nₜ − 1)",
                line=dict(color="#222", width=1.5, dash="dot"),
                hoverinfo="skip",
            )
        )
    fig.update_xaxes(type="log", title_text="n<sub>t</sub>")
    fig.update_yaxes(type="log", title_text="M(X<sub>t</sub>) / V(X<sub>t</sub>)")
    fig.update_layout(
        title=title, height=380, hovermode="closest", legend=dict(orientation="h", yanchor="bottom", y=-0.4, x=0)
    )
    return tidy_log_axes(apply_theme(fig, presentation), plain=True)


__all__ = ["highdim_profiles", "pair_cosines_figure", "mv_scatter"]
