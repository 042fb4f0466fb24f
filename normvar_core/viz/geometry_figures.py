"""Figures of the layer geometry (seed 004 Fig. 1; outlier dimensions), from a run's
``layer_geometry``, ``layer_spectrum``, ``dim_stats``, ``top_activations`` and ``token_selfsim`` tables."""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normvar_core.viz.bands import add_band, band_rows
from normvar_core.viz.overlay import depth_x, null_line
from normvar_core.viz.viewstate import COLORSCALE, PALETTE, apply_theme

PANELS = (("anisotropy", "anisotropy λ₁/Σλ (exact)"), ("twonn_id", "intrinsic dimension (TwoNN)"),
          ("participation_ratio", "participation ratio (Σλ)²/Σλ²"), ("mean_cosine", "mean cosine (all pairs)"))


def geometry_profiles(curves: Mapping[str, pd.DataFrame], *, relative: bool = True,
                      num_hidden_states: Mapping[str, int] | None = None, presentation: bool = False,
                      title: str | None = None, null_curves: Mapping[str, pd.DataFrame] | None = None,
                      bands: Mapping[str, pd.DataFrame] | None = None) -> go.Figure:
    """Four panels against (relative) depth, one line per run: exact anisotropy with seed 004's batch
    estimate (± std, dashed), TwoNN ID ± std, participation ratio, mean cosine. ``null_curves``: the
    same tables of Gaussian null runs, dashed grey. ``bands``: label -> the run's ``stats.intervals``
    table: the anisotropy's split-half interval as a band; the TwoNN band is mean ± 1.96 std / √batches."""
    fig = make_subplots(rows=2, cols=2, subplot_titles=[t for _, t in PANELS], vertical_spacing=0.16,
                        horizontal_spacing=0.09)
    for label, df in (null_curves or {}).items():
        df = df.sort_values("layer")
        x = depth_x(df, relative, (num_hidden_states or {}).get(label))
        for k, (key, _) in enumerate(PANELS):
            r, c = divmod(k, 2)
            null_line(fig, x, df[key], label, showlegend=k == 0, what=f"{key} =", row=r + 1, col=c + 1)
    for i, (label, df) in enumerate(curves.items()):
        df = df.sort_values("layer")
        x = depth_x(df, relative, (num_hidden_states or {}).get(label))
        color = PALETTE[i % len(PALETTE)]
        if label in (bands or {}):
            band = band_rows(bands[label], "anisotropy", df["layer"])
            if band is not None:
                add_band(fig, x, *band, color=color, label=label, what="95 % split-half interval", row=1, col=1)
            if "twonn_batches" in df:
                half = 1.959963984540054 * df["twonn_id_std"] / np.sqrt(df["twonn_batches"].clip(lower=1))
                add_band(fig, x, df["twonn_id"] - half, df["twonn_id"] + half, color=color, label=label,
                         what="95 % interval over TwoNN batches", row=1, col=2)
        for k, (key, _) in enumerate(PANELS):
            r, c = divmod(k, 2)
            err = dict(type="data", array=df["twonn_id_std"], visible=True) if key == "twonn_id" else None
            fig.add_trace(go.Scatter(x=x, y=df[key], mode="lines+markers", name=label, legendgroup=label,
                                     showlegend=k == 0, line=dict(color=color, width=2.5), error_y=err,
                                     customdata=df["layer"],
                                     hovertemplate=f"{label}<br>layer %{{customdata}}<br>{key} = %{{y:.4g}}<extra></extra>"),
                          row=r + 1, col=c + 1)
        fig.add_trace(go.Scatter(x=x, y=df["anisotropy_batch_mean"], mode="lines+markers", name=f"{label} (batches of 4,096)",
                                 legendgroup=label, line=dict(color=color, width=1.5, dash="dash"), marker=dict(size=5),
                                 error_y=dict(type="data", array=df["anisotropy_batch_std"], visible=True),
                                 customdata=df["layer"],
                                 hovertemplate=f"{label}: seed 004 estimate<br>layer %{{customdata}}<br>%{{y:.4g}}<extra></extra>"),
                      row=1, col=1)
    fig.update_xaxes(title_text="relative depth" if relative else "layer")
    fig.update_layout(title=title, height=720 if presentation else 640, hovermode="closest",
                      legend=dict(orientation="h", yanchor="bottom", y=-0.25, x=0))
    return apply_theme(fig, presentation)


def spectrum_figure(spectrum: pd.DataFrame, layer: int, *, presentation: bool = False,
                    title: str | None = None) -> go.Figure:
    """Eigenvalues of the covariance of one layer (log y), k = 1 the largest, and the cumulative share."""
    s = spectrum[spectrum["layer"] == layer].sort_values("k")
    lam = s["eigenvalue"].to_numpy()
    k = s["k"].to_numpy() + 1
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=k, y=np.where(lam > 0, lam, np.nan), mode="lines", name="eigenvalue λ_k",
                             line=dict(color=PALETTE[0], width=2.5)), secondary_y=False)
    cum = np.cumsum(lam) / lam.sum() if lam.sum() > 0 else lam
    fig.add_trace(go.Scatter(x=k, y=cum, mode="lines", name="cumulative share", line=dict(color=PALETTE[1], dash="dot")),
                  secondary_y=True)
    fig.update_yaxes(type="log", title_text="λ_k", secondary_y=False)
    fig.update_yaxes(title_text="Σ_{j≤k} λ_j / Σλ", range=[0, 1.02], secondary_y=True)
    fig.update_xaxes(type="log", title_text="k")
    fig.update_layout(title=title or f"Covariance spectrum, layer {layer}", height=460 if presentation else 400)
    return apply_theme(fig, presentation)


def outlier_heatmap(dim_stats: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """max |h_j| / median_j max |h| per (dimension, layer): the outlier dimensions light up."""
    piv = dim_stats.pivot(index="layer", columns="dim", values="max_abs").sort_index()
    ratio = piv.to_numpy() / np.median(piv.to_numpy(), axis=1, keepdims=True)
    fig = go.Figure(go.Heatmap(z=np.log10(ratio), x=piv.columns, y=piv.index, colorscale=COLORSCALE,
                               colorbar=dict(title="log₁₀ max|h| / median"),
                               customdata=ratio,
                               hovertemplate="layer %{y}, dim %{x}<br>max|h| / median = %{customdata:.3g}<extra></extra>"))
    fig.update_xaxes(title_text="dimension")
    fig.update_yaxes(title_text="layer")
    fig.update_layout(title=title or "Outlier dimensions: max |h| relative to the layer's median dimension",
                      height=460 if presentation else 420)
    return apply_theme(fig, presentation)


def shares_figure(outliers: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """Share of Q(X) = E‖x‖² carried by position 0, by the largest dimension and by the top 5."""
    df = outliers.sort_values("layer")
    fig = go.Figure()
    for i, (key, name) in enumerate((("q_share_pos0", "position 0"), ("q_share_top1dim", "largest dimension"),
                                     ("q_share_top5dim", "top 5 dimensions"))):
        fig.add_trace(go.Scatter(x=df["layer"], y=df[key], mode="lines+markers", name=name,
                                 line=dict(color=PALETTE[i], width=2.5)))
    fig.update_xaxes(title_text="layer")
    fig.update_yaxes(title_text="share of Q(X)", range=[0, 1.02])
    fig.update_layout(title=title or "Who carries the squared norm", height=420 if presentation else 380)
    return apply_theme(fig, presentation)


def selfsim_scatter(points: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """Self-similarity of each token type against log10 n_t (Ethayarajh's measure, exact)."""
    df = points.dropna(subset=["self_similarity"])
    fig = go.Figure(go.Scattergl(x=np.log10(df["n"]), y=df["self_similarity"], mode="markers",
                                 marker=dict(size=5, color=PALETTE[0], opacity=0.6), text=df.get("token"),
                                 hovertemplate="%{text}<br>log₁₀ n = %{x:.2f}<br>self-similarity = %{y:.3f}<extra></extra>"))
    fig.update_xaxes(title_text="log₁₀ n_t")
    fig.update_yaxes(title_text="self-similarity (mean cosine between occurrences)")
    fig.update_layout(title=title or "Self-similarity against frequency", height=440 if presentation else 400)
    return apply_theme(fig, presentation)


__all__ = ["geometry_profiles", "spectrum_figure", "outlier_heatmap", "shares_figure", "selfsim_scatter", "PANELS"]
