"""Side-by-side scatters that share their axes and colour scale (Compare's two trade-off scatters): the
same point sits at the same place and in the same colour in both, so the panels can be read across."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go


def padded(lo: float, hi: float, pad: float = 0.04) -> list[float]:
    """[lo, hi] widened by ``pad`` of its span on each side (a point never sits on the frame)."""
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    return [lo - pad * span, hi + pad * span]


def share_ranges(figs: Sequence[go.Figure]) -> dict[str, list[float]]:
    """Give every figure the union of their x and y ranges and of their marker colour ranges (traces
    with a numeric marker colour array, i.e. the coloured points; the null cloud and lines are not).
    Returns the ranges set: {"x": [..], "y": [..], "color": [cmin, cmax]} (keys absent when no data)."""
    xs, ys, cs = [], [], []
    for fig in figs:
        for t in fig.data:
            if getattr(t, "x", None) is not None and getattr(t, "y", None) is not None:
                x = np.asarray(t.x, dtype=np.float64)
                y = np.asarray(t.y, dtype=np.float64)
                if t.mode and "markers" in t.mode:
                    xs.append(x)
                    ys.append(y)
            c = getattr(getattr(t, "marker", None), "color", None)
            if c is not None and not isinstance(c, str) and np.asarray(c).dtype.kind in "fiu":
                cs.append(np.asarray(c, dtype=np.float64))
    out: dict[str, list[float]] = {}
    for key, arrs in (("x", xs), ("y", ys)):
        v = np.concatenate(arrs) if arrs else np.zeros(0)
        v = v[np.isfinite(v)]
        if v.size:
            out[key] = padded(float(v.min()), float(v.max()))
    c = np.concatenate(cs) if cs else np.zeros(0)
    c = c[np.isfinite(c)]
    if c.size:
        out["color"] = [float(np.floor(c.min())), float(np.ceil(c.max()))]
    for fig in figs:
        if "x" in out:
            fig.update_xaxes(range=out["x"], autorange=False)
        if "y" in out:
            fig.update_yaxes(range=out["y"], autorange=False)
        if "color" in out:
            for t in fig.data:
                c = getattr(getattr(t, "marker", None), "color", None)
                if c is not None and not isinstance(c, str) and np.asarray(c).dtype.kind in "fiu":
                    t.marker.cmin, t.marker.cmax = out["color"]
    return out


__all__ = ["share_ranges", "padded"]
