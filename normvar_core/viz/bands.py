"""Interval bands for the per-layer figures: a translucent area between an interval's low
and high per layer, in the run's colour, drawn under its line. ``intervals`` tables come from
``stats.intervals`` (columns layer, quantity, value, low, high, method)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go


def rgba(hex_color: str, alpha: float = 0.18) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r}, {g}, {b}, {alpha})"


def band_rows(intervals: pd.DataFrame | None, quantity: str, layers) -> tuple[np.ndarray, np.ndarray] | None:
    """(low, high) aligned with ``layers`` for one quantity, or None when the table lacks it."""
    if intervals is None or not len(intervals):
        return None
    sel = intervals[intervals["quantity"] == quantity].set_index("layer")
    if sel.empty:
        return None
    sel = sel.reindex(list(layers))
    return sel["low"].to_numpy(float), sel["high"].to_numpy(float)


def add_band(
    fig: go.Figure,
    x: Any,
    low: Any,
    high: Any,
    *,
    color: str,
    label: str,
    what: str = "95 % interval",
    row: int | None = None,
    col: int | None = None,
) -> None:
    """A filled area between ``low`` and ``high`` (two traces: the upper edge, then the lower edge
    filled to it). Layers without an interval (NaN) leave a gap."""
    x = np.asarray(x)
    lo, hi = np.asarray(low, float), np.asarray(high, float)
    kw = {} if row is None else dict(row=row, col=col)
    edge = dict(width=0, color=rgba(color, 0.0))  # no visible edge, in any theme: a band is its fill
    fig.add_trace(
        go.Scatter(
            x=x,
            y=hi,
            mode="lines",
            line=edge,
            showlegend=False,
            legendgroup=label,
            name=f"{label}: {what} (upper edge)",
            hoverinfo="skip",
        ),
        **kw,
    )
    # the first band of each run and kind has a legend entry (its colour, named): no colour the legend lacks
    name = f"{label}: {what}"
    shown = any(t.name == name and t.showlegend for t in fig.data)
    fig.add_trace(
        go.Scatter(
            x=x,
            y=lo,
            mode="lines",
            line=edge,
            fill="tonexty",
            fillcolor=rgba(color),
            showlegend=not shown,
            legendgroup=label,
            name=name,
            customdata=np.column_stack([lo, hi]),
            hovertemplate=f"{label}<br>{what}: [%{{customdata[0]:.4g}}, %{{customdata[1]:.4g}}]<extra></extra>",
        ),
        **kw,
    )


__all__ = ["rgba", "band_rows", "add_band"]
