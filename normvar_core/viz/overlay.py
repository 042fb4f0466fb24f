"""What every figure builder shares: the depth axis (layer, or layer / (hidden states − 1) so models of
different depth line up) and the Gaussian null overlay of seed 003 — dashed grey lines, or a grey
cloud behind a scatter, always drawn first so the real data sit on top."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normvar_core.viz.viewstate import relative_depth

NULL_COLOR = "#9a9a9a"
NULL_CLOUD = "rgba(150, 150, 150, 0.35)"


def depth_x(df: pd.DataFrame, relative: bool, num_hidden_states: int | None) -> np.ndarray:
    """The x of a per-layer table: its layers, or their relative depth."""
    layers = df["layer"].to_numpy()
    if not relative:
        return layers
    n = num_hidden_states or (int(layers.max()) + 1 if layers.size else 1)
    return np.array([relative_depth(int(l), n) for l in layers])


def null_line(fig: go.Figure, x: Any, y: Any, label: str, *, showlegend: bool = True, what: str = "",
              row: int | None = None, col: int | None = None) -> None:
    """One dashed grey line of a Gaussian null run (``label``: e.g. "Gaussian null (isotropic)")."""
    trace = go.Scatter(x=x, y=y, mode="lines", name=label, legendgroup=label, showlegend=showlegend,
                       line=dict(color=NULL_COLOR, width=2, dash="dash"),
                       hovertemplate=f"{label}<br>{what} %{{y:.4g}}<extra></extra>")
    if row is None:
        fig.add_trace(trace)
    else:
        fig.add_trace(trace, row=row, col=col)


def null_cloud(fig: go.Figure, x: Any, y: Any, label: str, *, size: int = 5, row: int | None = None,
               col: int | None = None) -> None:
    """The null's points as a grey cloud (WebGL), no hover: it is the backdrop of the real points."""
    trace = go.Scattergl(x=x, y=y, mode="markers", name=label, showlegend=False, hoverinfo="skip",
                         marker=dict(size=size, color=NULL_CLOUD))
    if row is None:
        fig.add_trace(trace)
    else:
        fig.add_trace(trace, row=row, col=col)


def null_label(meta: dict) -> str:
    """"Gaussian null (kind)" from a null run's ``source`` ('null:<kind>:<run>')."""
    parts = str(meta.get("source") or "").split(":")
    return f"Gaussian null ({parts[1]})" if len(parts) > 2 else "Gaussian null"


__all__ = ["NULL_COLOR", "NULL_CLOUD", "depth_x", "null_line", "null_cloud", "null_label"]
