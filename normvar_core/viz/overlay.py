"""What every figure builder shares: the depth axis (layer, or layer / (hidden states − 1) so models of
different depth line up) and the Gaussian null overlay of the Gaussian-geometry comment — dashed grey lines, or a grey
cloud behind a scatter, always drawn first so the real data sit on top."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normvar_core.viz.depth import relative_depth

NULL_COLOR = "#9a9a9a"
NULL_CLOUD = "rgba(150, 150, 150, 0.35)"


def depth_x(df: pd.DataFrame, relative: bool, num_hidden_states: int | None) -> np.ndarray:
    """The x of a per-layer table: its layers, or their relative depth."""
    layers = df["layer"].to_numpy()
    if not relative:
        return layers
    n = num_hidden_states or (int(layers.max()) + 1 if layers.size else 1)
    return np.array([relative_depth(int(l), n) for l in layers])


def null_line(
    fig: go.Figure,
    x: Any,
    y: Any,
    label: str,
    *,
    showlegend: bool = True,
    what: str = "",
    row: int | None = None,
    col: int | None = None,
    color: str = NULL_COLOR,
) -> None:
    """One dashed line (grey unless ``color``: the colour of the run it was drawn from) of a Gaussian
    null run (``label``: e.g. "Gaussian null (isotropic)")."""
    trace = go.Scatter(
        x=x,
        y=y,
        mode="lines",
        name=label,
        legendgroup=label,
        showlegend=showlegend,
        line=dict(color=color, width=2, dash="dash"),
        opacity=0.85 if color == NULL_COLOR else 0.6,
        hovertemplate=f"{label}<br>{what} %{{y:.4g}}<extra></extra>",
    )
    if row is None:
        fig.add_trace(trace)
    else:
        fig.add_trace(trace, row=row, col=col)


NULL_CLOUD_GROUP = "null cloud"  # the legendgroup of a figure's grey clouds (one legend entry for them all)


def null_cloud(
    fig: go.Figure,
    x: Any,
    y: Any,
    label: str,
    *,
    size: int = 5,
    row: int | None = None,
    col: int | None = None,
    legend: bool = False,
) -> None:
    """The null's points as a grey cloud (WebGL), no hover: it is the backdrop of the real points. ``legend``:
    this cloud carries the legend entry that names the null (one per figure)."""
    trace = go.Scattergl(
        x=x,
        y=y,
        mode="markers",
        name=label,
        showlegend=legend,
        hoverinfo="skip",
        legendgroup=NULL_CLOUD_GROUP,
        marker=dict(size=size, color=NULL_CLOUD),
    )
    if row is None:
        fig.add_trace(trace)
    else:
        fig.add_trace(trace, row=row, col=col)


def null_label(meta: dict) -> str:
    """ "Gaussian null (kind)" from a null run's ``source`` ('null:<kind>:<run>')."""
    parts = str(meta.get("source") or "").split(":")
    return f"Gaussian null ({parts[1]})" if len(parts) > 2 else "Gaussian null"


def null_source(source: Any) -> str | None:
    """The run a null was drawn from ('null:<kind>:<run>' -> run), else None (a real run)."""
    parts = str(source or "").split(":", 2)
    return parts[2] if parts[0] == "null" and len(parts) == 3 else None


def runs_in_order(runs: pd.DataFrame) -> list[str]:
    """Run names for a picker: the real runs in the table's order (newest first), each followed by its
    Gaussian nulls; nulls whose run is gone come last."""
    names = runs["name"].astype(str).tolist()
    sources = runs["source"].tolist() if "source" in runs else [None] * len(names)
    parent = {n: null_source(s) for n, s in zip(names, sources)}
    out: list[str] = []
    for n in names:
        if parent[n] is None:
            out.append(n)
            out += [m for m in names if parent[m] == n]
    return out + [n for n in names if n not in out]


def null_kind(name_or_label: str) -> str | None:
    """The kind of a null from its run name ('<run>__null-<kind>-s<seed>') or label ('Gaussian null (kind)')."""
    s = str(name_or_label or "")
    if "__null-" in s:
        return s.rsplit("__null-", 1)[1].rsplit("-s", 1)[0]
    if s.startswith("Gaussian null (") and s.endswith(")"):
        return s[len("Gaussian null (") : -1]
    return None


__all__ = [
    "null_source",
    "runs_in_order",
    "null_kind",
    "NULL_COLOR",
    "NULL_CLOUD",
    "NULL_CLOUD_GROUP",
    "depth_x",
    "null_line",
    "null_cloud",
    "null_label",
]
