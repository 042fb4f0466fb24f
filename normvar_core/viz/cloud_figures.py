"""The token clouds figure (the study's Fig. 1, App. A): sampled embeddings of a few token types,
PCA- or t-SNE-mapped, one colour per token, labels placed so that none overlap. Coordinates of
``clouds.pca_cloud`` / ``clouds.tsne_map`` in, ``go.Figure`` out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normvar_core.viz.cloud_layout import equal_frame, place_labels, token_colours
from normvar_core.viz.theme import COLORSCALE, apply_theme, point_trace


def clouds_figure(
    coords: pd.DataFrame,
    *,
    explained: Sequence[float] | None = None,
    presentation: bool = False,
    title: str | None = None,
    label_tokens: bool = True,
    color_by: str | None = None,
    color_title: str | None = None,
    method: str = "pca",
    width: int | None = None,
    height: int | None = None,
    token_order: Sequence[str] | None = None,
) -> go.Figure:
    """Scatter of the selected tokens' sampled embeddings (``clouds.pca_cloud``; ``method="tsne"``: the
    columns tsne1, tsne2 of ``clouds.tsne_map``): one colour per token from a max-min CIELAB palette
    (``cloud_layout.token_palette``) with a per-token legend — or, with ``color_by``, a colour scale of
    that column (word runs' |T_w|, App. J Fig. 22). SVG or WebGL by the number of embeddings (``theme.point_trace``).
    Each token is labelled by an annotation drawn above
    the points with a leader line to its cloud's centroid, placed in pixels so that no two labels
    overlap (``cloud_layout.place_labels``): the figure's size, margins and equal-scale axis ranges are
    fixed here so that the placement is exact. PCA: the origin (0, 0) is marked with x (App. A)."""
    tsne = method == "tsne"
    xc, yc = ("tsne1", "tsne2") if tsne else ("pc1", "pc2")
    W = int(width or (1100 if presentation else 900))
    H = int(height or (640 if presentation else 600))
    font = 20 if presentation else 13
    margin = dict(
        l=80 if presentation else 70,
        r=250 if presentation else 190,
        t=70 if presentation else 60,
        b=80 if presentation else 60,
        autoexpand=False,
    )
    fig = go.Figure()
    names = [str(t) for t in (token_order if token_order is not None else pd.unique(coords["token"].astype(str)))]
    names = [t for t in names if t in set(coords["token"].astype(str))] if len(coords) else []
    colours = token_colours(names)
    continuous = color_by is not None and color_by in coords
    ctx = coords["context"].to_numpy(dtype=object) if "context" in coords else np.full(len(coords), "", dtype=object)
    ii = coords["i"].to_numpy(dtype=np.float64) if "i" in coords else np.full(len(coords), -1.0)
    tok_of = coords["token"].astype(str).to_numpy() if len(coords) else np.zeros(0, dtype=str)
    hover = (
        "<b>%{text}</b> (n = %{customdata[0]:,})<br>%{customdata[1]}<br>"
        + ("t-SNE %{x:.3g}, %{y:.3g}" if tsne else "PC1 %{x:.3g}, PC2 %{y:.3g}")
        + "<extra></extra>"
    )
    cloud_trace = point_trace(len(coords))  # SVG for a small cloud, WebGL for a large one
    for k, t in enumerate(names):
        sel = tok_of == t
        part = coords.loc[sel]
        marker = dict(size=7 if presentation else 6, color=colours[t], opacity=0.75)
        if continuous:
            allc = coords[color_by].to_numpy(dtype=np.float64)
            marker = dict(
                size=marker["size"],
                opacity=0.75,
                color=part[color_by].to_numpy(dtype=np.float64),
                colorscale=COLORSCALE,
                cmin=float(np.nanmin(allc)),
                cmax=float(np.nanmax(allc)),
                showscale=k == 0,
                colorbar=dict(title=dict(text=color_title or color_by), thickness=14, len=0.8, x=1.0),
            )
        fig.add_trace(
            cloud_trace(
                x=part[xc],
                y=part[yc],
                mode="markers",
                name=t,
                legendgroup=t,
                showlegend=not continuous,
                marker=marker,
                text=part["token"].astype(str).to_numpy(dtype=str),
                customdata=np.column_stack(
                    [
                        part["n"].to_numpy(dtype=object),
                        ctx[sel],
                        part["token_id"].to_numpy(dtype=object),
                        ii[sel].astype(object),
                    ]
                ),
                hovertemplate=hover,
            )
        )
    px_x = (
        np.concatenate([coords[xc].to_numpy(dtype=np.float64), [] if tsne else [0.0]]) if len(coords) else np.zeros(1)
    )
    px_y = (
        np.concatenate([coords[yc].to_numpy(dtype=np.float64), [] if tsne else [0.0]]) if len(coords) else np.zeros(1)
    )
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
        # all labels in one layout update: add_annotation copies every earlier annotation again (quadratic)
        fig.update_layout(
            annotations=[
                dict(
                    x=float(cent.iloc[j, 0]),
                    y=float(cent.iloc[j, 1]),
                    text=t,
                    name=f"label:{t}",
                    showarrow=True,
                    arrowhead=0,
                    arrowwidth=1.2,
                    arrowcolor=colours[t],
                    ax=float(offs[j, 0]),
                    ay=float(offs[j, 1]),
                    standoff=2,
                    font=dict(size=font, color="#111"),
                    bgcolor="rgba(255,255,255,0.88)",
                    bordercolor=colours[t],
                    borderwidth=1.5,
                    borderpad=2,
                )
                for j, t in enumerate(names)
            ]
        )
    if not tsne:
        fig.add_trace(
            go.Scatter(
                x=[0],
                y=[0],
                mode="markers",
                name="origin",
                showlegend=False,
                hovertemplate="origin<extra></extra>",
                marker=dict(symbol="x-thin", size=18, line=dict(width=3, color="#111")),
            )
        )
    ex = list(explained or [])
    fig.update_layout(
        title=title,
        showlegend=not continuous,
        width=W,
        height=H,
        hovermode="closest",
        legend=dict(title=dict(text="token"), x=1.02, xanchor="left", y=1.0, yanchor="top", itemsizing="constant"),
        xaxis_title="t-SNE 1" if tsne else "PC1" + (f" ({ex[0]:.0%})" if len(ex) > 0 else ""),
        yaxis_title="t-SNE 2" if tsne else "PC2" + (f" ({ex[1]:.0%})" if len(ex) > 1 else ""),
    )
    fig.update_xaxes(range=list(frame.xrange))
    fig.update_yaxes(range=list(frame.yrange), scaleanchor="x", scaleratio=1)
    apply_theme(fig, presentation)
    fig.update_layout(margin=margin, legend=dict(font=dict(size=font - 1)))
    fig.update_annotations(selector=dict(showarrow=True), font=dict(size=font))
    return fig


__all__ = ["clouds_figure"]
