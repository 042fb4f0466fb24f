"""The decomposition figures: Q(X) = M(X) + V_W(X) + V_B(X) per layer (the study's Fig. 5, 6, 18–20)
and several runs' ratios on a relative-depth axis. Tables of ``analyses.decomposition`` in,
``go.Figure`` out."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normvar_core.viz.labels import LEGEND_RIGHT, tidy_log_axes
from normvar_core.viz.overlay import depth_x, null_line
from normvar_core.viz.theme import PALETTE, QCOLORS, apply_theme


def decomposition_bars(decomp: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """Fig 5 + 6: stacked M/Q, V_B/Q, V_W/Q per layer (they sum to 1) and the V_W/V line."""
    d = decomp.sort_values("layer")
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.62, 0.38],
        horizontal_spacing=0.1,
        subplot_titles=("share of Q(X)", "V<sub>W</sub>(X) / V(X)"),
    )
    for key, name, color in (
        ("m_over_q", "M(X)/Q(X)", QCOLORS["M"]),
        ("v_b_over_q", "V<sub>B</sub>(X)/Q(X)", QCOLORS["V_B"]),
        ("v_w_over_q", "V<sub>W</sub>(X)/Q(X)", QCOLORS["V_W"]),
    ):
        fig.add_trace(
            go.Bar(
                x=d["layer"],
                y=d[key],
                name=name,
                marker_color=color,
                hovertemplate=f"layer %{{x}}<br>{name} = %{{y:.4f}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    fig.add_trace(
        go.Scatter(
            x=d["layer"],
            y=d["v_w_over_v"],
            mode="lines+markers",
            name="V<sub>W</sub>(X)/V(X)",
            line=dict(color="#6a3d9a", width=2.5),
            marker=dict(size=7),
            hovertemplate="layer %{x}<br>V_W/V = %{y:.4f}<extra></extra>",
        ),
        row=1,
        col=2,
    )
    fig.update_layout(barmode="stack", title=title, height=440 if presentation else 400, legend=LEGEND_RIGHT)
    fig.update_yaxes(range=[0, 1], row=1, col=1)
    fig.update_xaxes(title_text="layer")
    return apply_theme(fig, presentation)


def decomposition_ratios(
    decomp: pd.DataFrame,
    *,
    presentation: bool = False,
    title: str | None = None,
    null: pd.DataFrame | None = None,
    null_label: str = "Gaussian null",
) -> go.Figure:
    """Fig 18: M/Q, V/Q, V_W/Q, V_B/Q against layer; ``null``: a Gaussian null's, dashed grey."""
    d = decomp.sort_values("layer")
    fig = go.Figure()
    keys = (
        ("m_over_q", "M/Q", QCOLORS["M"]),
        ("v_over_q", "V/Q", QCOLORS["V"]),
        ("v_w_over_q", "V<sub>W</sub>/Q", QCOLORS["V_W"]),
        ("v_b_over_q", "V<sub>B</sub>/Q", QCOLORS["V_B"]),
    )
    if null is not None and len(null):
        nd = null.sort_values("layer")
        for i, (key, name, _) in enumerate(keys):
            null_line(fig, nd["layer"], nd[key], null_label, showlegend=i == 0, what=f"{name} =")
    for key, name, color in keys:
        fig.add_trace(
            go.Scatter(x=d["layer"], y=d[key], mode="lines+markers", name=name, line=dict(color=color, width=2.5))
        )
    fig.update_layout(title=title, xaxis_title="layer", yaxis_title="ratio", height=380, hovermode="x unified")
    return apply_theme(fig, presentation)


def decomposition_raw(
    decomp: pd.DataFrame,
    *,
    log_y: bool = False,
    presentation: bool = False,
    title: str | None = None,
    null: pd.DataFrame | None = None,
    null_label: str = "Gaussian null",
    q_pred: pd.DataFrame | None = None,
) -> go.Figure:
    """Fig 19 + 20: Q(X), M(X), V(X) and V_W(X), V_B(X) against layer (raw values). ``null``: a
    Gaussian null's, dashed grey; ``q_pred``: App. I's ‖γ‖² + ‖β‖² per layer (layer, q_pred), dotted,
    only at the layers that are outputs of a normalization."""
    d = decomp.sort_values("layer")
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("Q(X), M(X), V(X)", "V<sub>W</sub>(X), V<sub>B</sub>(X)"),
        horizontal_spacing=0.1,
    )
    if null is not None and len(null):
        nd = null.sort_values("layer")
        for i, (key, col) in enumerate((("q", 1), ("m", 1), ("v", 1), ("v_w", 2), ("v_b", 2))):
            null_line(fig, nd["layer"], nd[key], null_label, showlegend=i == 0, what=f"{key} =", row=1, col=col)
    if q_pred is not None and len(q_pred):
        fig.add_trace(
            go.Scatter(
                x=q_pred["layer"],
                y=q_pred["q_pred"],
                mode="markers+lines",
                name="‖γ‖² + ‖β‖² (App. I)",
                line=dict(color="#b15928", width=2, dash="dot"),
                marker=dict(symbol="x", size=9),
                hovertemplate="layer %{x}<br>LayerNorm prediction of Q = %{y:.5g}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    for key, name, col in (("q", "Q", 1), ("m", "M", 1), ("v", "V", 1), ("v_w", "V_W", 2), ("v_b", "V_B", 2)):
        fig.add_trace(
            go.Scatter(
                x=d["layer"],
                y=d[key],
                mode="lines+markers",
                name=name.replace("_W", "<sub>W</sub>").replace("_B", "<sub>B</sub>"),
                line=dict(color=QCOLORS[name], width=2.5),
                hovertemplate=f"layer %{{x}}<br>{name} = %{{y:.5g}}<extra></extra>",
            ),
            row=1,
            col=col,
        )
    fig.update_xaxes(title_text="layer")
    if log_y:
        fig.update_yaxes(type="log")
    fig.update_layout(title=title, height=400, legend=LEGEND_RIGHT)
    return tidy_log_axes(apply_theme(fig, presentation))


def decomposition_compare(
    decomps: Mapping[str, pd.DataFrame],
    *,
    relative: bool = True,
    num_hidden_states: Mapping[str, int] | None = None,
    presentation: bool = False,
    title: str | None = None,
) -> go.Figure:
    """Several runs' M/Q, V_W/Q, V_B/Q and V_W/V curves overlaid (solid, dashed... per run)."""
    fig = make_subplots(
        rows=1,
        cols=4,
        horizontal_spacing=0.06,
        subplot_titles=("M/Q", "V<sub>W</sub>/Q", "V<sub>B</sub>/Q", "V<sub>W</sub>/V"),
    )
    dashes = ["solid", "dash", "dot", "dashdot"]
    for i, (label, d) in enumerate(decomps.items()):
        d = d.sort_values("layer")
        x = depth_x(d, relative, (num_hidden_states or {}).get(label))
        for col, key in enumerate(("m_over_q", "v_w_over_q", "v_b_over_q", "v_w_over_v"), start=1):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=d[key],
                    mode="lines+markers",
                    name=label,
                    legendgroup=label,
                    showlegend=col == 1,
                    line=dict(color=PALETTE[i % len(PALETTE)], width=2.5, dash=dashes[i % len(dashes)]),
                    customdata=d["layer"],
                    hovertemplate=f"{label}<br>layer %{{customdata}}<br>%{{y:.4f}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="relative depth" if relative else "layer")
    fig.update_layout(title=title, height=380, legend=LEGEND_RIGHT)
    return apply_theme(fig, presentation)


__all__ = ["decomposition_bars", "decomposition_ratios", "decomposition_raw", "decomposition_compare"]
