"""Plotly figure builders for the study's figures (used by the dashboard's pages and for export).

Pure functions: tables in (a Run's token table, analyses' tidy DataFrames), ``go.Figure`` out. No
statistics are estimated here — regression slopes, C.V.s and decompositions come from ``analyses``;
this module only selects rows (frequency band, highlighted tokens), downsamples what is drawn, and draws.
Static export (PNG/SVG) goes through kaleido (``to_image``); no Streamlit import here.
"""
from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normvar_core.viz.bands import add_band, band_rows
from normvar_core.viz.overlay import depth_x, null_cloud, null_line
from normvar_core.viz.viewstate import COLORSCALE, HIGHLIGHT, PALETTE, QCOLORS, apply_theme

#: WebGL scatters stay interactive up to this many points; beyond it we draw a uniform sample.
from normvar_core.constants import STUDY_BAND

MAX_POINTS = 100_000

_LABEL = {
    "q": "Q(X<sub>t</sub>)", "m": "M(X<sub>t</sub>)", "v": "V(X<sub>t</sub>)",
    "Q": "Q(X<sub>t</sub>)", "M": "M(X<sub>t</sub>)", "V": "V(X<sub>t</sub>)",
}


# ============================================================================ selection helpers
def band_mask(n: Any, n_min: float, n_max: float) -> np.ndarray:
    """Tokens with n_min <= n_t <= n_max (the study's 1 <= log10 n_t <= 5 is (10, 1e5))."""
    n = np.asarray(n)
    return (n >= n_min) & (n <= n_max)


def tradeoff_points(table: pd.DataFrame, n_min: float = STUDY_BAND[0], n_max: float = STUDY_BAND[1]) -> pd.DataFrame:
    """Rows of a token table (token_id, token, n, q, m, v) inside the band, plus ``log10_n``."""
    out = table.loc[band_mask(table["n"].to_numpy(), n_min, n_max)]
    out = out.assign(log10_n=np.log10(out["n"].to_numpy(dtype=np.float64)))
    return out.reset_index(drop=True)


def _norm_token(s: str) -> str:
    from normvar_core.stats.analyses import strip_prefix  # the study's footnote 7: "##ing" and "ing" are the same token

    return strip_prefix(str(s)).strip().lower()


def find_tokens(table: pd.DataFrame, queries: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """Rows of ``table`` whose token matches one of ``queries``: exactly, else after stripping the
    subword prefix, case-insensitive. Returns (matched rows in query order, queries not found)."""
    if not len(queries) or table.empty:
        return table.iloc[:0], list(queries)
    tokens = table["token"].astype(str)
    norm = None
    rows, missing = [], []
    for q in queries:
        hit = np.flatnonzero((tokens == q).to_numpy())
        if not hit.size:  # no exact match: the same key after stripping "##", "Ġ", "▁" (fn. 7)
            if norm is None:
                norm = tokens.map(_norm_token)
            hit = np.flatnonzero((norm == _norm_token(q)).to_numpy())
        if hit.size:
            rows.extend(int(i) for i in hit if int(i) not in rows)
        else:
            missing.append(q)
    return table.iloc[rows].reset_index(drop=True), missing


def downsample(points: pd.DataFrame, max_points: int = MAX_POINTS, seed: int = 0) -> tuple[pd.DataFrame, int]:
    """At most ``max_points`` rows (a fixed uniform random sample, original order kept) and the
    number of rows before sampling."""
    total = len(points)
    if total <= max_points:
        return points, total
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(total, size=max_points, replace=False))
    return points.iloc[keep].reset_index(drop=True), total


def _row(df: pd.DataFrame | None, **where: Any) -> dict[str, Any] | None:
    if df is None or df.empty:
        return None
    mask = np.ones(len(df), dtype=bool)
    for k, v in where.items():
        mask &= (df[k] == v).to_numpy()
    if not mask.any():
        return None
    return df.loc[mask].iloc[0].to_dict()


def _fmt(x: Any, digits: int = 3) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return "–"
    if not np.isfinite(x):
        return "–"
    return f"{x:.{digits}f}" if abs(x) < 1e4 else f"{x:.{digits}g}"


def _line_through(x: np.ndarray, slope: float, intercept: float) -> tuple[list[float], list[float]]:
    if x.size == 0:
        return [], []
    lo, hi = float(np.nanmin(x)), float(np.nanmax(x))
    return [lo, hi], [intercept + slope * lo, intercept + slope * hi]


# ============================================================================ Fig 2 / 8: trade-off
def tradeoff_scatter(points: pd.DataFrame, fit: Mapping[str, Any] | None = None, *,
                     highlight: pd.DataFrame | None = None, title: str | None = None,
                     total: int | None = None, presentation: bool = False,
                     colorbar: bool = True, height: int | None = None,
                     null_points: pd.DataFrame | None = None, null_label: str = "Gaussian null",
                     q_pred: float | None = None, color_by: str | None = None,
                     color_title: str | None = None, slope_interval: tuple[float, float] | None = None) -> go.Figure:
    """V(X_t) against M(X_t): one WebGL point per token type (coloured by log10 n_t, hover: token,
    n, Q, M, V), the regression line of V on M with its slope and R^2 (``fit``: a row of
    ``analyses.tradeoff``), highlighted tokens ringed and labelled. ``total`` > len(points) adds a
    notice that a sample is drawn. ``null_points``: a Gaussian null's types (m, v), a grey cloud
    behind; ``q_pred``: App. I's LayerNorm prediction Q ≈ ‖γ‖² + ‖β‖², drawn as V = Q_pred − M.
    ``color_by``: a column of ``points`` to colour by instead of log10 n_t (word runs: |T_w|, App. J).
    ``slope_interval``: the slope's 95 % bootstrap interval over types, a band of lines through the fit
    line's point at the mean M (the regression's pivot) with the interval's slopes."""
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
        null_cloud(fig, null_points["m"], null_points["v"], null_label, size=5 if len(null_points) > 5000 else 7)
    color, ctitle = logn, "log<sub>10</sub> n<sub>t</sub>"
    if color_by is not None and color_by in points:
        color, ctitle = points[color_by].to_numpy(dtype=np.float64), color_title or color_by
    fig.add_trace(go.Scattergl(
        x=x, y=y, mode="markers", name="token types",
        marker=dict(size=5 if len(x) > 5000 else 7, color=color, colorscale=COLORSCALE, opacity=0.75,
                    cmin=float(np.floor(np.nanmin(color))) if color.size else 0,
                    cmax=float(np.ceil(np.nanmax(color))) if color.size else 1,
                    showscale=colorbar, colorbar=dict(title=dict(text=ctitle), thickness=14, len=0.8)),
        text=text, customdata=custom,
        hovertemplate=("<b>%{text}</b><br>n = %{customdata[0]:,}<br>Q = %{customdata[1]:.4g}"
                       "<br>M = %{x:.4g}<br>V = %{y:.4g}<extra></extra>"),
    ))
    if fit is not None and np.isfinite(float(fit.get("slope", np.nan))):
        lx, ly = _line_through(x, float(fit["slope"]), float(fit["intercept"]))
        if slope_interval is not None and np.isfinite(slope_interval).all() and x.size:
            x0 = float(np.nanmean(x))
            y0 = float(fit["intercept"]) + float(fit["slope"]) * x0
            lo_y = [y0 + slope_interval[0] * (xx - x0) for xx in lx]
            hi_y = [y0 + slope_interval[1] * (xx - x0) for xx in lx]
            add_band(fig, lx, lo_y, hi_y, color="#222222", label="slope", what="95 % bootstrap interval of the slope")
        fig.add_trace(go.Scatter(x=lx, y=ly, mode="lines", name="regression",
                                 line=dict(color="#222", width=2, dash="dash"), hoverinfo="skip"))
        fig.add_annotation(
            xref="paper", yref="paper", x=0.99, y=0.99, xanchor="right", yanchor="top", showarrow=False,
            text=f"slope = {_fmt(fit['slope'])}<br>R² = {_fmt(fit['r2'])}" + (
                f"<br>95 %: [{_fmt(slope_interval[0])}, {_fmt(slope_interval[1])}]"
                if slope_interval is not None and np.isfinite(slope_interval).all() else ""),
            align="right", bgcolor="rgba(255,255,255,0.85)", bordercolor="#bbb", borderwidth=1,
            font=dict(size=15),
        )
    if q_pred is not None and np.isfinite(q_pred) and x.size:
        lx = np.array([0.0, min(float(q_pred), float(np.nanmax(x)) * 1.05)])
        fig.add_trace(go.Scatter(x=lx, y=q_pred - lx, mode="lines", name="LayerNorm prediction",
                                 line=dict(color="#b15928", width=2, dash="dot"),
                                 hovertemplate=f"App. I: V = ‖γ‖² + ‖β‖² − M, ‖γ‖² + ‖β‖² = {q_pred:.4g}<extra></extra>"))
    if highlight is not None and len(highlight):
        fig.add_trace(go.Scatter(
            x=highlight["m"], y=highlight["v"], mode="markers+text", name="highlighted",
            text=highlight["token"].astype(str), textposition="top center",
            textfont=dict(color=HIGHLIGHT, size=13),
            marker=dict(size=13, color="rgba(0,0,0,0)", line=dict(color=HIGHLIGHT, width=2.5)),
            customdata=np.column_stack([highlight["n"].to_numpy(dtype=np.float64),
                                        highlight["q"].to_numpy(dtype=np.float64)]),
            hovertemplate=("<b>%{text}</b><br>n = %{customdata[0]:,}<br>Q = %{customdata[1]:.4g}"
                           "<br>M = %{x:.4g}<br>V = %{y:.4g}<extra></extra>"),
        ))
    if total is not None and total > len(points):
        fig.add_annotation(xref="paper", yref="paper", x=0.01, y=0.01, xanchor="left", yanchor="bottom",
                           showarrow=False, font=dict(color="#a15c00"),
                           text=f"showing a random {len(points):,} of {total:,} token types")
    fig.update_layout(title=title, xaxis_title="M(X<sub>t</sub>)", yaxis_title="V(X<sub>t</sub>)",
                      showlegend=False, height=height or (620 if presentation else 540),
                      uirevision="tradeoff", hovermode="closest")
    return apply_theme(fig, presentation)


# ============================================================================ Fig 4: layers
def layers_figure(curves: Mapping[str, pd.DataFrame], *, relative: bool = False,
                  num_hidden_states: Mapping[str, int] | None = None, mark_layer: Mapping[str, int] | None = None,
                  presentation: bool = False, title: str | None = None,
                  null_curves: Mapping[str, pd.DataFrame] | None = None,
                  bands: Mapping[str, pd.DataFrame] | None = None) -> go.Figure:
    """C.V. of Q(X_t), slope and R^2 of V on M, against layer; one line per run (``curves``: label ->
    ``analyses.tradeoff`` table). ``relative``: x = layer / (hidden states - 1). ``null_curves``: the
    same for Gaussian null runs (seed 003), drawn as dashed grey lines. ``bands``: label -> the run's
    ``stats.intervals`` table: the bootstrap intervals over types, drawn as bands under each line."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=("C.V. of Q(X<sub>t</sub>)", "slope (V on M)", "R²"),
                        horizontal_spacing=0.08)
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
            fig.add_trace(go.Scatter(
                x=x, y=df[key], mode="lines+markers", name=label, legendgroup=label, showlegend=col == 1,
                line=dict(color=color, width=2.5), marker=dict(size=7),
                customdata=df["layer"], hovertemplate=f"{label}<br>layer %{{customdata}}<br>{key} = %{{y:.4g}}<extra></extra>",
            ), row=1, col=col)
        if mark_layer and label in mark_layer:
            sel = df.loc[df["layer"] == mark_layer[label]]
            if len(sel):
                xs = depth_x(sel, relative, (num_hidden_states or {}).get(label))
                for col, key in enumerate(("cv_q", "slope", "r2"), start=1):
                    fig.add_trace(go.Scatter(x=xs, y=sel[key], mode="markers", showlegend=False, hoverinfo="skip",
                                             marker=dict(size=15, color="rgba(0,0,0,0)",
                                                         line=dict(color=HIGHLIGHT, width=2.5))), row=1, col=col)
    fig.update_xaxes(title_text="relative depth" if relative else "layer")
    fig.update_layout(title=title, height=460 if presentation else 400, hovermode="closest",
                      legend=dict(orientation="h", yanchor="bottom", y=-0.35, x=0))
    return apply_theme(fig, presentation)


# ============================================================================ Fig 5, 6, 18-20: decomposition
def decomposition_bars(decomp: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """Fig 5 + 6: stacked M/Q, V_B/Q, V_W/Q per layer (they sum to 1) and the V_W/V line."""
    d = decomp.sort_values("layer")
    fig = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38], horizontal_spacing=0.1,
                        subplot_titles=("share of Q(X)", "V<sub>W</sub>(X) / V(X)"))
    for key, name, color in (("m_over_q", "M(X)/Q(X)", QCOLORS["M"]), ("v_b_over_q", "V<sub>B</sub>(X)/Q(X)", QCOLORS["V_B"]),
                             ("v_w_over_q", "V<sub>W</sub>(X)/Q(X)", QCOLORS["V_W"])):
        fig.add_trace(go.Bar(x=d["layer"], y=d[key], name=name, marker_color=color,
                             hovertemplate=f"layer %{{x}}<br>{name} = %{{y:.4f}}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=d["layer"], y=d["v_w_over_v"], mode="lines+markers", name="V<sub>W</sub>(X)/V(X)",
                             line=dict(color="#6a3d9a", width=2.5), marker=dict(size=7),
                             hovertemplate="layer %{x}<br>V_W/V = %{y:.4f}<extra></extra>"), row=1, col=2)
    fig.update_layout(barmode="stack", title=title, height=440 if presentation else 400,
                      legend=dict(orientation="h", yanchor="bottom", y=-0.3, x=0))
    fig.update_yaxes(range=[0, 1], row=1, col=1)
    fig.update_xaxes(title_text="layer")
    return apply_theme(fig, presentation)


def decomposition_ratios(decomp: pd.DataFrame, *, presentation: bool = False, title: str | None = None,
                         null: pd.DataFrame | None = None, null_label: str = "Gaussian null") -> go.Figure:
    """Fig 18: M/Q, V/Q, V_W/Q, V_B/Q against layer; ``null``: a Gaussian null's, dashed grey."""
    d = decomp.sort_values("layer")
    fig = go.Figure()
    keys = (("m_over_q", "M/Q", QCOLORS["M"]), ("v_over_q", "V/Q", QCOLORS["V"]),
            ("v_w_over_q", "V<sub>W</sub>/Q", QCOLORS["V_W"]), ("v_b_over_q", "V<sub>B</sub>/Q", QCOLORS["V_B"]))
    if null is not None and len(null):
        nd = null.sort_values("layer")
        for i, (key, name, _) in enumerate(keys):
            null_line(fig, nd["layer"], nd[key], null_label, showlegend=i == 0, what=f"{name} =")
    for key, name, color in keys:
        fig.add_trace(go.Scatter(x=d["layer"], y=d[key], mode="lines+markers", name=name, line=dict(color=color, width=2.5)))
    fig.update_layout(title=title, xaxis_title="layer", yaxis_title="ratio", height=380, hovermode="x unified")
    return apply_theme(fig, presentation)


def decomposition_raw(decomp: pd.DataFrame, *, log_y: bool = False, presentation: bool = False,
                      title: str | None = None, null: pd.DataFrame | None = None,
                      null_label: str = "Gaussian null", q_pred: pd.DataFrame | None = None) -> go.Figure:
    """Fig 19 + 20: Q(X), M(X), V(X) and V_W(X), V_B(X) against layer (raw values). ``null``: a
    Gaussian null's, dashed grey; ``q_pred``: App. I's ‖γ‖² + ‖β‖² per layer (layer, q_pred), dotted,
    only at the layers that are outputs of a normalization."""
    d = decomp.sort_values("layer")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Q(X), M(X), V(X)", "V<sub>W</sub>(X), V<sub>B</sub>(X)"),
                        horizontal_spacing=0.1)
    if null is not None and len(null):
        nd = null.sort_values("layer")
        for i, (key, col) in enumerate((("q", 1), ("m", 1), ("v", 1), ("v_w", 2), ("v_b", 2))):
            null_line(fig, nd["layer"], nd[key], null_label, showlegend=i == 0, what=f"{key} =", row=1, col=col)
    if q_pred is not None and len(q_pred):
        fig.add_trace(go.Scatter(x=q_pred["layer"], y=q_pred["q_pred"], mode="markers+lines", name="‖γ‖² + ‖β‖² (App. I)",
                                 line=dict(color="#b15928", width=2, dash="dot"), marker=dict(symbol="x", size=9),
                                 hovertemplate="layer %{x}<br>LayerNorm prediction of Q = %{y:.5g}<extra></extra>"),
                      row=1, col=1)
    for key, name, col in (("q", "Q", 1), ("m", "M", 1), ("v", "V", 1), ("v_w", "V_W", 2), ("v_b", "V_B", 2)):
        fig.add_trace(go.Scatter(x=d["layer"], y=d[key], mode="lines+markers", name=name.replace("_W", "<sub>W</sub>").replace("_B", "<sub>B</sub>"),
                                 line=dict(color=QCOLORS[name], width=2.5),
                                 hovertemplate=f"layer %{{x}}<br>{name} = %{{y:.5g}}<extra></extra>"), row=1, col=col)
    fig.update_xaxes(title_text="layer")
    if log_y:
        fig.update_yaxes(type="log")
    fig.update_layout(title=title, height=400, legend=dict(orientation="h", yanchor="bottom", y=-0.3, x=0))
    return apply_theme(fig, presentation)


def decomposition_compare(decomps: Mapping[str, pd.DataFrame], *, relative: bool = True,
                          num_hidden_states: Mapping[str, int] | None = None,
                          presentation: bool = False, title: str | None = None) -> go.Figure:
    """Several runs' M/Q, V_W/Q, V_B/Q and V_W/V curves overlaid (solid, dashed... per run)."""
    fig = make_subplots(rows=1, cols=4, horizontal_spacing=0.06,
                        subplot_titles=("M/Q", "V<sub>W</sub>/Q", "V<sub>B</sub>/Q", "V<sub>W</sub>/V"))
    dashes = ["solid", "dash", "dot", "dashdot"]
    for i, (label, d) in enumerate(decomps.items()):
        d = d.sort_values("layer")
        x = depth_x(d, relative, (num_hidden_states or {}).get(label))
        for col, key in enumerate(("m_over_q", "v_w_over_q", "v_b_over_q", "v_w_over_v"), start=1):
            fig.add_trace(go.Scatter(x=x, y=d[key], mode="lines+markers", name=label, legendgroup=label,
                                     showlegend=col == 1, line=dict(color=PALETTE[i % len(PALETTE)], width=2.5,
                                                                    dash=dashes[i % len(dashes)]),
                                     customdata=d["layer"],
                                     hovertemplate=f"{label}<br>layer %{{customdata}}<br>%{{y:.4f}}<extra></extra>"),
                          row=1, col=col)
    fig.update_xaxes(title_text="relative depth" if relative else "layer")
    fig.update_layout(title=title, height=380, legend=dict(orientation="h", yanchor="bottom", y=-0.4, x=0))
    return apply_theme(fig, presentation)


# ============================================================================ Fig 7, 11-17: frequency
def frequency_scatter(points: pd.DataFrame, regs: pd.DataFrame | None = None, *, layer: int | None = None,
                      log_y: bool = True, total: int | None = None, presentation: bool = False,
                      title: str | None = None, null_points: pd.DataFrame | None = None,
                      null_label: str = "Gaussian null") -> go.Figure:
    """Q, M, V against log10 n_t (three panels) with the regression lines of ``regs`` (rows of
    ``analyses.frequency_regressions``, which regresses log10(1 + Z) on log10 n_t, App. F).
    ``log_y``: plot log10(1 + Z), where the fitted lines are straight; else the raw Z (Fig. 7) with
    the same fit drawn as the curve Z = 10^(a + b log10 n) - 1. ``null_points``: a Gaussian null's
    types, a grey cloud behind each panel."""
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08,
                        subplot_titles=tuple(("log<sub>10</sub>(1 + %s)" if log_y else "%s") % _LABEL[k]
                                             for k in ("Q", "M", "V")))
    x = (points["log10_n"] if "log10_n" in points else np.log10(points["n"])).to_numpy(dtype=np.float64)
    tok = points["token"].to_numpy(dtype=str)
    for col, (key, qname) in enumerate((("q", "Q"), ("m", "M"), ("v", "V")), start=1):
        if null_points is not None and len(null_points):
            nraw = null_points[key].to_numpy(dtype=np.float64)
            nx = (null_points["log10_n"] if "log10_n" in null_points else np.log10(null_points["n"]))
            null_cloud(fig, nx, np.log10(1.0 + nraw) if log_y else nraw, null_label, size=4, row=1, col=col)
        raw = points[key].to_numpy(dtype=np.float64)
        y = np.log10(1.0 + raw) if log_y else raw
        fig.add_trace(go.Scattergl(x=x, y=y, mode="markers", name=qname, showlegend=False,
                                   marker=dict(size=4 if len(x) > 5000 else 6, color=QCOLORS[qname], opacity=0.45),
                                   text=tok, customdata=raw,
                                   hovertemplate=(f"<b>%{{text}}</b><br>log10 n = %{{x:.2f}}<br>"
                                                  f"{qname} = %{{customdata:.4g}}<extra></extra>")),
                      row=1, col=col)
        where = {"quantity": qname}
        if layer is not None and regs is not None and "layer" in regs:
            where["layer"] = layer
        row = _row(regs, **where)
        if row is not None and np.isfinite(float(row["slope"])) and x.size:
            a, b = float(row["intercept"]), float(row["slope"])
            lx = np.linspace(float(x.min()), float(x.max()), 2 if log_y else 40)
            ly = a + b * lx if log_y else 10.0 ** (a + b * lx) - 1.0
            fig.add_trace(go.Scatter(x=lx, y=ly, mode="lines", showlegend=False, hoverinfo="skip",
                                     line=dict(color="#222", width=2, dash="dash")), row=1, col=col)
            fig.add_annotation(xref=f"x{'' if col == 1 else col} domain", yref=f"y{'' if col == 1 else col} domain",
                               x=0.98, y=0.98, xanchor="right", yanchor="top", showarrow=False,
                               text=f"slope = {_fmt(b)}<br>R² = {_fmt(row['r2'])}",
                               bgcolor="rgba(255,255,255,0.85)", bordercolor="#bbb", borderwidth=1)
    fig.update_xaxes(title_text="log<sub>10</sub> n<sub>t</sub>")
    if total is not None and total > len(points):
        title = (title or "") + f"  (random {len(points):,} of {total:,} types drawn)"
    fig.update_layout(title=title, height=420 if presentation else 380, hovermode="closest")
    return apply_theme(fig, presentation)


def frequency_slopes(regs: pd.DataFrame, *, presentation: bool = False, title: str | None = None,
                     null_regs: pd.DataFrame | None = None, null_label: str = "Gaussian null") -> go.Figure:
    """Fig 17: slope of Q, M, V on log10 n_t against layer (and R^2 on hover); ``null_regs``: a
    Gaussian null's slopes, dashed grey (seed 003: M falls as 1/n_t for plain Gaussians too)."""
    fig = go.Figure()
    for i, qname in enumerate(("Q", "M", "V")):
        if null_regs is not None and len(null_regs):
            nd = null_regs.loc[null_regs["quantity"] == qname].sort_values("layer")
            null_line(fig, nd["layer"], nd["slope"], null_label, showlegend=i == 0, what=f"{qname} slope =")
    for qname in ("Q", "M", "V"):
        d = regs.loc[regs["quantity"] == qname].sort_values("layer")
        fig.add_trace(go.Scatter(x=d["layer"], y=d["slope"], mode="lines+markers", name=qname,
                                 line=dict(color=QCOLORS[qname], width=2.5), customdata=d["r2"],
                                 hovertemplate=f"{qname}: layer %{{x}}<br>slope = %{{y:.4g}}<br>R² = %{{customdata:.3f}}<extra></extra>"))
    fig.add_hline(y=0, line=dict(color="#999", width=1))
    fig.update_layout(title=title, xaxis_title="layer", yaxis_title="slope of log<sub>10</sub>(1+Z) on log<sub>10</sub> n<sub>t</sub>",
                      height=380, hovermode="x unified")
    return apply_theme(fig, presentation)


def histograms_figure(hist: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """Fig 14-16: histograms of Q, M, V (``analyses.histograms``: quantity, left, right, count)."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=("Q(X<sub>t</sub>)", "M(X<sub>t</sub>)", "V(X<sub>t</sub>)"),
                        horizontal_spacing=0.08)
    for col, qname in enumerate(("Q", "M", "V"), start=1):
        d = hist.loc[hist["quantity"].astype(str).str.upper() == qname]
        fig.add_trace(go.Bar(x=(d["left"] + d["right"]) / 2, y=d["count"], width=(d["right"] - d["left"]),
                             marker_color=QCOLORS[qname], name=qname, showlegend=False,
                             customdata=np.column_stack([d["left"], d["right"]]) if len(d) else None,
                             hovertemplate="[%{customdata[0]:.4g}, %{customdata[1]:.4g})<br>%{y:,} types<extra></extra>"),
                      row=1, col=col)
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


def corpus_histograms(sentence_lengths: pd.DataFrame, frequencies: pd.DataFrame, *, presentation: bool = False,
                      title: str | None = None) -> go.Figure:
    """Fig 9 + 10: the corpus's sentence-length histogram and the histogram of log10 n_t."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("sentence length (words)", "log<sub>10</sub> n<sub>t</sub>"),
                        horizontal_spacing=0.1)
    for col, df, color, unit in ((1, sentence_lengths, "#4c78a8", "sentences"), (2, frequencies, "#72b7b2", "token types")):
        if df is None or df.empty:
            continue
        x, y, w = _hist_xy(df)
        fig.add_trace(go.Bar(x=x, y=y, width=w, marker_color=color, showlegend=False,
                             hovertemplate=f"%{{x}}<br>%{{y:,}} {unit}<extra></extra>"), row=1, col=col)
        fig.update_yaxes(title_text=unit, row=1, col=col)
    fig.update_layout(title=title, height=340, bargap=0.02)
    return apply_theme(fig, presentation)


# ============================================================================ Fig 1: token clouds
def clouds_figure(coords: pd.DataFrame, *, explained: Sequence[float] | None = None, presentation: bool = False,
                  title: str | None = None, label_tokens: bool = True, color_by: str | None = None,
                  color_title: str | None = None, method: str = "pca", width: int | None = None,
                  height: int | None = None, token_order: Sequence[str] | None = None) -> go.Figure:
    """Scatter of the selected tokens' sampled embeddings (``clouds.pca_cloud``; ``method="tsne"``: the
    columns tsne1, tsne2 of ``clouds.tsne_map``): one colour per token from a max-min CIELAB palette
    (``cloud_layout.token_palette``) with a per-token legend — or, with ``color_by``, a colour scale of
    that column (word runs' |T_w|, App. J Fig. 22). Each token is labelled by an annotation drawn above
    the points with a leader line to its cloud's centroid, placed in pixels so that no two labels
    overlap (``cloud_layout.place_labels``): the figure's size, margins and equal-scale axis ranges are
    fixed here so that the placement is exact. PCA: the origin (0, 0) is marked with x (App. A)."""
    from normvar_core.viz.cloud_layout import equal_frame, place_labels, token_colours

    tsne = method == "tsne"
    xc, yc = ("tsne1", "tsne2") if tsne else ("pc1", "pc2")
    W = int(width or (1100 if presentation else 900))
    H = int(height or (640 if presentation else 600))
    font = 20 if presentation else 13
    margin = dict(l=80 if presentation else 70, r=250 if presentation else 190, t=70 if presentation else 60,
                  b=80 if presentation else 60, autoexpand=False)
    fig = go.Figure()
    names = [str(t) for t in (token_order if token_order is not None else pd.unique(coords["token"].astype(str)))]
    names = [t for t in names if t in set(coords["token"].astype(str))] if len(coords) else []
    colours = token_colours(names)
    continuous = color_by is not None and color_by in coords
    ctx = coords["context"].to_numpy(dtype=object) if "context" in coords else np.full(len(coords), "", dtype=object)
    ii = coords["i"].to_numpy(dtype=np.float64) if "i" in coords else np.full(len(coords), -1.0)
    tok_of = coords["token"].astype(str).to_numpy() if len(coords) else np.zeros(0, dtype=str)
    hover = ("<b>%{text}</b> (n = %{customdata[0]:,})<br>%{customdata[1]}<br>"
             + ("t-SNE %{x:.3g}, %{y:.3g}" if tsne else "PC1 %{x:.3g}, PC2 %{y:.3g}") + "<extra></extra>")
    for k, t in enumerate(names):
        sel = tok_of == t
        part = coords.loc[sel]
        marker = dict(size=7 if presentation else 6, color=colours[t], opacity=0.75)
        if continuous:
            allc = coords[color_by].to_numpy(dtype=np.float64)
            marker = dict(size=marker["size"], opacity=0.75, color=part[color_by].to_numpy(dtype=np.float64),
                          colorscale=COLORSCALE, cmin=float(np.nanmin(allc)), cmax=float(np.nanmax(allc)),
                          showscale=k == 0, colorbar=dict(title=dict(text=color_title or color_by), thickness=14,
                                                          len=0.8, x=1.0))
        fig.add_trace(go.Scattergl(
            x=part[xc], y=part[yc], mode="markers", name=t, legendgroup=t, showlegend=not continuous,
            marker=marker, text=part["token"].astype(str).to_numpy(dtype=str),
            customdata=np.column_stack([part["n"].to_numpy(dtype=object), ctx[sel],
                                        part["token_id"].to_numpy(dtype=object), ii[sel].astype(object)]),
            hovertemplate=hover))
    px_x = np.concatenate([coords[xc].to_numpy(dtype=np.float64), [] if tsne else [0.0]]) if len(coords) else np.zeros(1)
    px_y = np.concatenate([coords[yc].to_numpy(dtype=np.float64), [] if tsne else [0.0]]) if len(coords) else np.zeros(1)
    frame = equal_frame(px_x, px_y, W - margin["l"] - margin["r"], H - margin["t"] - margin["b"])
    if label_tokens and names:
        cent = coords.groupby(coords["token"].astype(str), sort=False)[[xc, yc]].mean().reindex(names)
        sizes = coords["token"].astype(str).value_counts().reindex(names).to_numpy()
        order = np.argsort(-sizes, kind="stable")
        offs = np.zeros((len(names), 2))
        pts = np.column_stack([coords[xc], coords[yc]])
        if not tsne:  # the origin's × weighs as 25 points: labels keep off it
            pts = np.vstack([pts, np.zeros((25, 2))])
        offs[order] = place_labels(cent.to_numpy()[order], [names[j] for j in order], pts, frame, font)
        for j, t in enumerate(names):
            fig.add_annotation(x=float(cent.iloc[j, 0]), y=float(cent.iloc[j, 1]), text=t, name=f"label:{t}",
                               showarrow=True, arrowhead=0, arrowwidth=1.2, arrowcolor=colours[t],
                               ax=float(offs[j, 0]), ay=float(offs[j, 1]), standoff=2,
                               font=dict(size=font, color="#111"), bgcolor="rgba(255,255,255,0.88)",
                               bordercolor=colours[t], borderwidth=1.5, borderpad=2)
    if not tsne:
        fig.add_trace(go.Scatter(x=[0], y=[0], mode="markers", name="origin", showlegend=False,
                                 hovertemplate="origin<extra></extra>",
                                 marker=dict(symbol="x-thin", size=18, line=dict(width=3, color="#111"))))
    ex = list(explained or [])
    fig.update_layout(title=title, showlegend=not continuous, width=W, height=H, hovermode="closest",
                      legend=dict(title=dict(text="token"), x=1.02, xanchor="left", y=1.0, yanchor="top",
                                  itemsizing="constant"),
                      xaxis_title="t-SNE 1" if tsne else "PC1" + (f" ({ex[0]:.0%})" if len(ex) > 0 else ""),
                      yaxis_title="t-SNE 2" if tsne else "PC2" + (f" ({ex[1]:.0%})" if len(ex) > 1 else ""))
    fig.update_xaxes(range=list(frame.xrange))
    fig.update_yaxes(range=list(frame.yrange), scaleanchor="x", scaleratio=1)
    apply_theme(fig, presentation)
    fig.update_layout(margin=margin, legend=dict(font=dict(size=font - 1)))
    fig.update_annotations(selector=dict(showarrow=True), font=dict(size=font))
    return fig


# ============================================================================ export
_kaleido_lock = threading.Lock()
_kaleido_started = False


def _start_kaleido() -> None:
    global _kaleido_started
    with _kaleido_lock:
        if _kaleido_started:
            return
        try:
            import kaleido

            kaleido.start_sync_server(silence_warnings=True)
        except TypeError:  # older signature
            import kaleido

            kaleido.start_sync_server()
        except Exception:  # noqa: BLE001 — a server already running, or none possible: to_image still works
            pass
        _kaleido_started = True


def to_image(fig: go.Figure, fmt: str = "png", *, width: int | None = None, height: int | None = None,
             scale: float = 2.0) -> bytes:
    """PNG/SVG/PDF bytes through kaleido (Debian's chromium). The first call starts a persistent
    kaleido server (~1 s per image afterwards)."""
    fmt = fmt.lower()
    if fmt not in ("png", "svg", "pdf", "jpeg", "webp"):
        raise ValueError(f"unsupported image format {fmt!r}")
    _start_kaleido()
    w = width or fig.layout.width or 1100
    h = height or fig.layout.height or 500
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The kopts argument is ignored")
        return fig.to_image(format=fmt, width=w, height=h, scale=scale if fmt in ("png", "jpeg", "webp") else 1)


SLIDE_SIZE = (1600, 900)  # 16:9, the report's slides and presentation-mode downloads


def export_image(fig: go.Figure, fmt: str = "png", *, presentation: bool = False) -> bytes:
    """A figure download: at its on-screen size, or in presentation mode at slide size (16:9)."""
    if presentation:
        return to_image(fig, fmt, width=SLIDE_SIZE[0], height=SLIDE_SIZE[1])
    return to_image(fig, fmt)


def to_csv(df: pd.DataFrame) -> bytes:
    """A figure's data as CSV (UTF-8)."""
    return df.to_csv(index=False).encode("utf-8")


def figure_data(fig: go.Figure) -> pd.DataFrame:
    """Every trace's x/y (and text) as one long table — the CSV fallback for any figure."""
    rows: list[pd.DataFrame] = []
    for i, tr in enumerate(fig.data):
        x = getattr(tr, "x", None)
        y = getattr(tr, "y", None)
        if x is None or y is None:
            continue
        d = pd.DataFrame({"trace": tr.name or f"trace{i}", "x": np.asarray(x), "y": np.asarray(y)})
        rows.append(d)
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["trace", "x", "y"])



#: public names for the pages
fit_row = _row
fmt = _fmt
