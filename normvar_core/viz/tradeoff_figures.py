"""The trade-off figures: V(X_t) against M(X_t) at one layer (the study's Fig. 2, 8) and the
trade-off's strength per layer — C.V. of Q(X_t), slope and R² of V on M (Fig. 4). Tables in
(``selection.tradeoff_points``, ``analyses.tradeoff``), ``go.Figure`` out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normvar_core.viz.bands import add_band, band_rows
from normvar_core.viz.labels import data_range, emptiest_corner, place_labels
from normvar_core.viz.overlay import NULL_CLOUD_GROUP, depth_x, null_cloud, null_line
from normvar_core.viz.selection import fmt
from normvar_core.viz.theme import COLORSCALE, HIGHLIGHT, LEGEND_BELOW, PALETTE, apply_theme, point_trace


def _line_through(x: np.ndarray, slope: float, intercept: float) -> tuple[list[float], list[float]]:
    if x.size == 0:
        return [], []
    lo, hi = float(np.nanmin(x)), float(np.nanmax(x))
    return [lo, hi], [intercept + slope * lo, intercept + slope * hi]


def _add_fit(
    fig: go.Figure, x: np.ndarray, y: np.ndarray, fit: Mapping[str, Any], slope_interval: tuple[float, float] | None
) -> None:
    """The regression line V = a + b M over the drawn range of M, its slope and R² in the emptiest corner, and the
    slope's interval as a band of lines through the fit line's point at the mean M (the pivot)."""
    lx, ly = _line_through(x, float(fit["slope"]), float(fit["intercept"]))
    if slope_interval is not None and np.isfinite(slope_interval).all() and x.size:
        x0 = float(np.nanmean(x))
        y0 = float(fit["intercept"]) + float(fit["slope"]) * x0
        lo_y = [y0 + slope_interval[0] * (xx - x0) for xx in lx]
        hi_y = [y0 + slope_interval[1] * (xx - x0) for xx in lx]
        add_band(fig, lx, lo_y, hi_y, color="#222222", label="slope", what="95 % bootstrap interval of the slope")
    fig.add_trace(
        go.Scatter(
            x=lx, y=ly, mode="lines", name="regression", line=dict(color="#222", width=2, dash="dash"), hoverinfo="skip"
        )
    )
    cx, cy, xa, ya = emptiest_corner(x, y)
    fig.add_annotation(
        xref="x domain",
        yref="y domain",
        x=cx,
        y=cy,
        xanchor=xa,
        yanchor=ya,
        showarrow=False,
        name="fit note",
        text=f"slope = {fmt(fit['slope'])}<br>R² = {fmt(fit['r2'])}"
        + (
            f"<br>95 %: [{fmt(slope_interval[0])}, {fmt(slope_interval[1])}]"
            if slope_interval is not None and np.isfinite(slope_interval).all()
            else ""
        ),
        align=xa,
        bgcolor="rgba(255,255,255,0.85)",
        bordercolor="#bbb",
        borderwidth=1,
        font=dict(size=15),
    )


def _add_highlight(
    fig: go.Figure,
    highlight: pd.DataFrame,
    box: tuple[list[float], list[float]],
    size: tuple[float, float],
    font_px: float,
) -> None:
    """Highlighted token types: filled red points with a white rim, each labelled on a leader line placed so
    that no two labels overlap (``labels.place_labels``, in the plot's pixels); the same hover as the cloud's."""
    hx = highlight["m"].to_numpy(dtype=np.float64)
    hy = highlight["v"].to_numpy(dtype=np.float64)
    tokens = highlight["token"].astype(str).tolist()
    fig.add_trace(
        go.Scatter(
            x=hx,
            y=hy,
            mode="markers",
            name="highlighted",
            text=tokens,
            marker=dict(size=14, color=HIGHLIGHT, opacity=0.9, line=dict(color="white", width=2)),
            customdata=np.column_stack(
                [highlight["n"].to_numpy(dtype=np.float64), highlight["q"].to_numpy(dtype=np.float64)]
            ),
            hovertemplate=(
                "<b>%{text}</b><br>n = %{customdata[0]:,}<br>Q = %{customdata[1]:.4g}"
                "<br>M = %{x:.4g}<br>V = %{y:.4g}<extra></extra>"
            ),
        )
    )
    (x0, x1), (y0, y1) = box
    px = (hx - x0) / (x1 - x0) * size[0]
    py = (y1 - hy) / (y1 - y0) * size[1]
    for xx, yy, tok, (ax, ay) in zip(hx, hy, tokens, place_labels(px, py, tokens, size=size, font_px=font_px)):
        fig.add_annotation(
            x=xx,
            y=yy,
            text=tok,
            ax=ax,
            ay=ay,
            xanchor="center",
            yanchor="middle",
            showarrow=True,
            arrowhead=0,
            arrowwidth=1,
            arrowcolor=HIGHLIGHT,
            standoff=7,
            font=dict(color=HIGHLIGHT, size=font_px),
            bgcolor="rgba(255,255,255,0.8)",
            name="highlight label",
        )


def _add_layernorm_line(fig: go.Figure, q_pred: float, box: tuple[list[float], list[float]]) -> None:
    """App. I's line V = Q_pred − M, clipped to the view the data sets; a note where it misses the view."""
    (x0, x1), (y0, y1) = box
    lo, hi = max(x0, q_pred - y1), min(x1, q_pred - y0)
    hover = f"App. I: V = ‖γ‖² + ‖β‖² − M, ‖γ‖² + ‖β‖² = {q_pred:.4g}<extra></extra>"
    if hi > lo:
        lx = np.array([lo, hi])
        fig.add_trace(
            go.Scatter(
                x=lx,
                y=q_pred - lx,
                mode="lines",
                name="LayerNorm prediction",
                line=dict(color="#b15928", width=2, dash="dot"),
                hovertemplate=hover,
            )
        )
        return
    fig.add_annotation(
        xref="paper",
        yref="paper",
        x=0.01,
        y=0.99,
        xanchor="left",
        yanchor="top",
        showarrow=False,
        font=dict(color="#b15928"),
        bgcolor="rgba(255,255,255,0.85)",
        text=f"App. I line V = {q_pred:.4g} − M lies {'above' if q_pred > x1 + y1 else 'below'} this view",
    )


# ============================================================================ Fig 2 / 8: trade-off
def tradeoff_scatter(
    points: pd.DataFrame,
    fit: Mapping[str, Any] | None = None,
    *,
    highlight: pd.DataFrame | None = None,
    title: str | None = None,
    total: int | None = None,
    presentation: bool = False,
    colorbar: bool = True,
    height: int | None = None,
    null_points: pd.DataFrame | None = None,
    null_label: str = "Gaussian null",
    q_pred: float | None = None,
    color_by: str | None = None,
    color_title: str | None = None,
    slope_interval: tuple[float, float] | None = None,
    aspect: float = 1.6,
) -> go.Figure:
    """V(X_t) against M(X_t): one point per token type (SVG or WebGL by their number: ``theme.point_trace``;
    coloured by log10 n_t, hover: token, n, Q, M, V), the regression line of V on M with its slope and R^2 (``fit``: a
    row of
    ``analyses.tradeoff``), highlighted tokens ringed and labelled. ``total`` > len(points) adds a
    notice that a sample is drawn. ``null_points``: a Gaussian null's types (m, v), a grey cloud
    behind; ``q_pred``: App. I's LayerNorm prediction Q ≈ ‖γ‖² + ‖β‖², drawn as V = Q_pred − M.
    ``color_by``: a column of ``points`` to colour by instead of log10 n_t (word runs: |T_w|, App. J).
    ``slope_interval``: the slope's 95 % bootstrap interval over types, a band of lines through the fit
    line's point at the mean M (the regression's pivot) with the interval's slopes. The axes span the data
    (types, null, highlights), not the lines; ``aspect``: the figure's expected width / height, for the labels."""
    x = points["m"].to_numpy(dtype=np.float64)
    y = points["v"].to_numpy(dtype=np.float64)
    logn = (points["log10_n"] if "log10_n" in points else np.log10(points["n"])).to_numpy(dtype=np.float64)
    # tokens as ``text`` (a list of strings) and numbers as a float customdata matrix: plotly sends
    # the numbers base64-encoded, which keeps 100k-point figures cheap to serialize (an object
    # array would go through JSON value by value).
    text = points["token"].to_numpy(dtype=str)
    custom = np.column_stack([points["n"].to_numpy(dtype=np.float64), points["q"].to_numpy(dtype=np.float64)])
    fig = go.Figure()
    if null_points is not None and len(null_points):
        null_cloud(
            fig, null_points["m"], null_points["v"], null_label, size=5 if len(null_points) > 5000 else 7, legend=True
        )
    color, ctitle = logn, "log<sub>10</sub> n<sub>t</sub>"
    if color_by is not None and color_by in points:
        color, ctitle = points[color_by].to_numpy(dtype=np.float64), color_title or color_by
    # SVG for a small cloud (``point_trace``), unless a null's WebGL cloud is drawn: it must stay under the types
    has_null = null_points is not None and len(null_points) > 0
    fig.add_trace(
        (go.Scattergl if has_null else point_trace(len(x)))(
            x=x,
            y=y,
            mode="markers",
            name="token types",
            marker=dict(
                size=5 if len(x) > 5000 else 7,
                color=color,
                colorscale=COLORSCALE,
                opacity=0.75,
                cmin=float(np.floor(np.nanmin(color))) if color.size else 0,
                cmax=float(np.ceil(np.nanmax(color))) if color.size else 1,
                showscale=colorbar,
                colorbar=dict(title=dict(text=ctitle), thickness=14, len=0.8),
            ),
            text=text,
            customdata=custom,
            hovertemplate=(
                "<b>%{text}</b><br>n = %{customdata[0]:,}<br>Q = %{customdata[1]:.4g}"
                "<br>M = %{x:.4g}<br>V = %{y:.4g}<extra></extra>"
            ),
        )
    )
    if fit is not None and np.isfinite(float(fit.get("slope", np.nan))):
        _add_fit(fig, x, y, fit, slope_interval)
    has_hl = highlight is not None and len(highlight) > 0
    null_m, null_v = (
        (null_points["m"], null_points["v"]) if null_points is not None and len(null_points) else (None, None)
    )
    box = (
        data_range(x, null_m, highlight["m"] if has_hl else None) or [0.0, 1.0],  # type: ignore[index]  # has_hl: highlight is set
        data_range(y, null_v, highlight["v"] if has_hl else None) or [0.0, 1.0],  # type: ignore[index]
    )
    if q_pred is not None and np.isfinite(q_pred) and x.size:
        _add_layernorm_line(fig, float(q_pred), box)
    height = height or (620 if presentation else 540)
    if has_hl:  # the plot area: the figure less the theme's margins (and the colour bar)
        size = (
            max(aspect * height - 100 - (70 if colorbar else 0), 100.0),
            max(height - 120 - 10 * presentation, 100.0),
        )
        _add_highlight(fig, highlight, box, size, 22.0 if presentation else 13.0)
    if total is not None and total > len(points):
        fig.add_annotation(
            xref="paper",
            yref="paper",
            x=0.01,
            y=0.01,
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
            font=dict(color="#a15c00"),
            text=f"showing a random {len(points):,} of {total:,} token types",
        )
    fig.update_layout(
        title=title,
        xaxis_title="M(X<sub>t</sub>)",
        yaxis_title="V(X<sub>t</sub>)",
        showlegend=False,
        height=height,
        uirevision="tradeoff",
        hovermode="closest",
    )
    if null_m is not None:  # the grey cloud's one legend entry names the null; nothing else is listed
        fig.for_each_trace(lambda t: t.update(showlegend=t.legendgroup == NULL_CLOUD_GROUP))
        fig.update_layout(showlegend=True, legend=LEGEND_BELOW)
    fig.update_xaxes(range=box[0])  # the data's extent: a far line (App. I, an interval's edge) is clipped
    fig.update_yaxes(range=box[1])
    return apply_theme(fig, presentation)


# ============================================================================ Fig 4: layers
def layers_figure(
    curves: Mapping[str, pd.DataFrame],
    *,
    relative: bool = False,
    num_hidden_states: Mapping[str, int] | None = None,
    mark_layer: Mapping[str, int] | None = None,
    presentation: bool = False,
    title: str | None = None,
    null_curves: Mapping[str, pd.DataFrame] | None = None,
    bands: Mapping[str, pd.DataFrame] | None = None,
) -> go.Figure:
    """C.V. of Q(X_t), slope and R^2 of V on M, against layer; one line per run (``curves``: label ->
    ``analyses.tradeoff`` table). ``relative``: x = layer / (hidden states - 1). ``null_curves``: the
    same for Gaussian null runs (the Gaussian-geometry comment), drawn as dashed grey lines. ``bands``: label -> the
    run's
    ``stats.intervals`` table: the bootstrap intervals over types, drawn as bands under each line."""
    fig = make_subplots(
        rows=1, cols=3, subplot_titles=("C.V. of Q(X<sub>t</sub>)", "slope (V on M)", "R²"), horizontal_spacing=0.08
    )
    for label, df in (null_curves or {}).items():
        df = df.sort_values("layer")
        x = depth_x(df, relative, (num_hidden_states or {}).get(label))
        for col, key in enumerate(("cv_q", "slope", "r2"), start=1):
            null_line(fig, x, df[key], label, showlegend=col == 1, what=f"{key} =", row=1, col=col)
    for i, (label, df) in enumerate(curves.items()):
        df = df.sort_values("layer")
        x = depth_x(df, relative, (num_hidden_states or {}).get(label))
        color = PALETTE[i % len(PALETTE)]
        for col, key in enumerate(("cv_q", "slope", "r2"), start=1):
            band = band_rows((bands or {}).get(label), key, df["layer"])
            if band is not None:
                add_band(fig, x, *band, color=color, label=label, what="95 % bootstrap interval", row=1, col=col)
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=df[key],
                    mode="lines+markers",
                    name=label,
                    legendgroup=label,
                    showlegend=col == 1,
                    line=dict(color=color, width=2.5),
                    marker=dict(size=7),
                    customdata=df["layer"],
                    hovertemplate=f"{label}<br>layer %{{customdata}}<br>{key} = %{{y:.4g}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        if mark_layer and label in mark_layer:
            sel = df.loc[df["layer"] == mark_layer[label]]
            if len(sel):
                xs = depth_x(sel, relative, (num_hidden_states or {}).get(label))
                for col, key in enumerate(("cv_q", "slope", "r2"), start=1):
                    fig.add_trace(
                        go.Scatter(
                            x=xs,
                            y=sel[key],
                            mode="markers",
                            showlegend=False,
                            hoverinfo="skip",
                            marker=dict(size=15, color="rgba(0,0,0,0)", line=dict(color=HIGHLIGHT, width=2.5)),
                        ),
                        row=1,
                        col=col,
                    )
    fig.update_xaxes(title_text="relative depth" if relative else "layer")
    fig.update_layout(title=title, height=460 if presentation else 400, hovermode="closest", legend=LEGEND_BELOW)
    return apply_theme(fig, presentation)


__all__ = ["tradeoff_scatter", "layers_figure"]
