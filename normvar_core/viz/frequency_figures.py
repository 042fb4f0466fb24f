"""The frequency figures: Q, M, V against log10 n_t with their regressions (the study's Fig. 7, 11–13),
the slopes per layer (Fig. 17), the histograms of Q, M, V (Fig. 14–16) and the corpus's sentence
lengths and type counts (Fig. 9, 10). Tables of ``analyses`` in, ``go.Figure`` out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normvar_core.viz.labels import emptiest_corner
from normvar_core.viz.overlay import null_cloud, null_line
from normvar_core.viz.selection import fit_row, fmt
from normvar_core.viz.theme import LEGEND_BELOW, QCOLORS, apply_theme

_LABEL = {"Q": "Q(X<sub>t</sub>)", "M": "M(X<sub>t</sub>)", "V": "V(X<sub>t</sub>)"}


def frequency_scatter(
    points: pd.DataFrame,
    regs: pd.DataFrame | None = None,
    *,
    layer: int | None = None,
    log_y: bool = True,
    total: int | None = None,
    presentation: bool = False,
    title: str | None = None,
    null_points: pd.DataFrame | None = None,
    null_label: str = "Gaussian null",
) -> go.Figure:
    """Q, M, V against log10 n_t (three panels) with the regression lines of ``regs`` (rows of
    ``analyses.frequency_regressions``, which regresses log10(1 + Z) on log10 n_t, App. F).
    ``log_y``: plot log10(1 + Z), where the fitted lines are straight; else the raw Z (Fig. 7) with
    the same fit drawn as the curve Z = 10^(a + b log10 n) - 1. ``null_points``: a Gaussian null's
    types, a grey cloud behind each panel."""
    fig = make_subplots(
        rows=1,
        cols=3,
        horizontal_spacing=0.08,
        subplot_titles=tuple(("log<sub>10</sub>(1 + %s)" if log_y else "%s") % _LABEL[k] for k in ("Q", "M", "V")),
    )
    x = (points["log10_n"] if "log10_n" in points else np.log10(points["n"])).to_numpy(dtype=np.float64)
    tok = points["token"].to_numpy(dtype=str)
    for col, (key, qname) in enumerate((("q", "Q"), ("m", "M"), ("v", "V")), start=1):
        if null_points is not None and len(null_points):
            nraw = null_points[key].to_numpy(dtype=np.float64)
            nx = null_points["log10_n"] if "log10_n" in null_points else np.log10(null_points["n"])
            null_cloud(
                fig, nx, np.log10(1.0 + nraw) if log_y else nraw, null_label, size=4, row=1, col=col, legend=col == 1
            )
        raw = points[key].to_numpy(dtype=np.float64)
        y = np.log10(1.0 + raw) if log_y else raw
        fig.add_trace(
            go.Scattergl(
                x=x,
                y=y,
                mode="markers",
                name=qname,
                showlegend=False,
                marker=dict(size=4 if len(x) > 5000 else 6, color=QCOLORS[qname], opacity=0.45),
                text=tok,
                customdata=raw,
                hovertemplate=(
                    f"<b>%{{text}}</b><br>log10 n = %{{x:.2f}}<br>{qname} = %{{customdata:.4g}}<extra></extra>"
                ),
            ),
            row=1,
            col=col,
        )
        where = {"quantity": qname}
        if layer is not None and regs is not None and "layer" in regs:
            where["layer"] = layer  # type: ignore[assignment]  # the layer number
        row = fit_row(regs, **where)
        if row is not None and np.isfinite(float(row["slope"])) and x.size:
            a, b = float(row["intercept"]), float(row["slope"])
            lx = np.linspace(float(x.min()), float(x.max()), 2 if log_y else 40)
            ly = a + b * lx if log_y else 10.0 ** (a + b * lx) - 1.0
            fig.add_trace(
                go.Scatter(
                    x=lx,
                    y=ly,
                    mode="lines",
                    showlegend=False,
                    hoverinfo="skip",
                    line=dict(color="#222", width=2, dash="dash"),
                ),
                row=1,
                col=col,
            )
            # the note goes in the corner with the fewest points (the data's, the fit line's): never on the data
            cx, cy, xa, ya = emptiest_corner(
                np.concatenate([x, np.linspace(lx[0], lx[-1], 40)]),
                np.concatenate([y, np.interp(np.linspace(lx[0], lx[-1], 40), lx, ly)]),
            )
            fig.add_annotation(
                xref=f"x{'' if col == 1 else col} domain",
                yref=f"y{'' if col == 1 else col} domain",
                x=cx,
                y=cy,
                xanchor=xa,
                yanchor=ya,
                showarrow=False,
                name="fit note",
                text=f"slope = {fmt(b)}<br>R² = {fmt(row['r2'])}",
                bgcolor="rgba(255,255,255,0.85)",
                bordercolor="#bbb",
                borderwidth=1,
            )
    fig.update_xaxes(title_text="log<sub>10</sub> n<sub>t</sub>")
    if total is not None and total > len(points):
        title = (title or "") + f"  (random {len(points):,} of {total:,} types drawn)"
    fig.update_layout(title=title, height=420 if presentation else 380, hovermode="closest", legend=LEGEND_BELOW)
    return apply_theme(fig, presentation)


def frequency_slopes(
    regs: pd.DataFrame,
    *,
    presentation: bool = False,
    title: str | None = None,
    null_regs: pd.DataFrame | None = None,
    null_label: str = "Gaussian null",
) -> go.Figure:
    """Fig 17: slope of Q, M, V on log10 n_t against layer (and R^2 on hover); ``null_regs``: a
    Gaussian null's slopes, dashed grey (the Gaussian-geometry comment: M falls as 1/n_t for plain Gaussians too)."""
    fig = go.Figure()
    for i, qname in enumerate(("Q", "M", "V")):
        if null_regs is not None and len(null_regs):
            nd = null_regs.loc[null_regs["quantity"] == qname].sort_values("layer")
            null_line(fig, nd["layer"], nd["slope"], null_label, showlegend=i == 0, what=f"{qname} slope =")
    for qname in ("Q", "M", "V"):
        d = regs.loc[regs["quantity"] == qname].sort_values("layer")
        fig.add_trace(
            go.Scatter(
                x=d["layer"],
                y=d["slope"],
                mode="lines+markers",
                name=qname,
                line=dict(color=QCOLORS[qname], width=2.5),
                customdata=d["r2"],
                hovertemplate=f"{qname}: layer %{{x}}<br>slope = %{{y:.4g}}<br>R² = %{{customdata:.3f}}<extra></extra>",
            )
        )
    fig.add_hline(y=0, line=dict(color="#999", width=1))
    fig.update_layout(
        title=title,
        xaxis_title="layer",
        yaxis_title="slope of log<sub>10</sub>(1+Z) on log<sub>10</sub> n<sub>t</sub>",
        height=380,
        hovermode="x unified",
    )
    return apply_theme(fig, presentation)


def histograms_figure(hist: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """Fig 14-16: histograms of Q, M, V (``analyses.histograms``: quantity, left, right, count)."""
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=("Q(X<sub>t</sub>)", "M(X<sub>t</sub>)", "V(X<sub>t</sub>)"),
        horizontal_spacing=0.08,
    )
    for col, qname in enumerate(("Q", "M", "V"), start=1):
        d = hist.loc[hist["quantity"].astype(str).str.upper() == qname]
        fig.add_trace(
            go.Bar(
                x=(d["left"] + d["right"]) / 2,
                y=d["count"],
                width=(d["right"] - d["left"]),
                marker_color=QCOLORS[qname],
                name=qname,
                showlegend=False,
                customdata=np.column_stack([d["left"], d["right"]]) if len(d) else None,
                hovertemplate="[%{customdata[0]:.4g}, %{customdata[1]:.4g})<br>%{y:,} types<extra></extra>",
            ),
            row=1,
            col=col,
        )
    fig.update_yaxes(title_text="token types", row=1, col=1)
    fig.update_layout(title=title, height=360, bargap=0.02)
    return apply_theme(fig, presentation)


def _hist_xy(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Accept either (left, right, count) bins or (value, count) rows."""
    cols = list(df.columns)
    if {"left", "right"} <= set(cols):
        cnt = df["count"] if "count" in df else df[cols[-1]]
        return ((df["left"] + df["right"]) / 2).to_numpy(), cnt.to_numpy(), (df["right"] - df["left"]).to_numpy()
    ycol = "count" if "count" in cols else cols[-1]
    xcol = next(c for c in cols if c != ycol)
    return df[xcol].to_numpy(), df[ycol].to_numpy(), None


def corpus_histograms(
    sentence_lengths: pd.DataFrame, frequencies: pd.DataFrame, *, presentation: bool = False, title: str | None = None
) -> go.Figure:
    """Fig 9 + 10: the corpus's sentence-length histogram and the histogram of log10 n_t."""
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("sentence length (words)", "log<sub>10</sub> n<sub>t</sub>"),
        horizontal_spacing=0.1,
    )
    for col, df, color, unit in (
        (1, sentence_lengths, "#4c78a8", "sentences"),
        (2, frequencies, "#72b7b2", "token types"),
    ):
        if df is None or df.empty:
            continue
        x, y, w = _hist_xy(df)
        fig.add_trace(
            go.Bar(
                x=x,
                y=y,
                width=w,
                marker_color=color,
                showlegend=False,
                hovertemplate=f"%{{x}}<br>%{{y:,}} {unit}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_yaxes(title_text=unit, row=1, col=col)
    fig.update_layout(title=title, height=340, bargap=0.02)
    return apply_theme(fig, presentation)


__all__ = ["frequency_scatter", "frequency_slopes", "histograms_figure", "corpus_histograms"]
