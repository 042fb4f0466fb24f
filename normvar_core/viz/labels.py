"""Labels that do not overlap, and axis ranges from the data.

``place_labels``: each point's label is an annotation on a leader line, at an offset chosen greedily (nearest
ring first, eight directions) so that its box meets no label placed before, no labelled point and stays in
the plot; where every candidate collides the least-overlapping one is taken. Boxes are estimated from the
font size (0.62 em per character), in the plot's pixels (``size``: the plot area's width and height).
``data_range``: an axis range that holds the given values with a margin (lines drawn past it are clipped).
``number``: a number's text, or "—" with the reason when it is missing (the one place that says how).
``readable``: the words a page or a slide shows for a run-file column (``twonn_id_cross`` -> "TwoNN ID
(cross-context)"), never the column's name itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

MISSING = "—"
"""What a page shows for a value that is missing or not finite (never "nan"), with the reason beside it."""


def number(x, spec: str = ".4g", why: str | None = None) -> str:
    """``x`` formatted with ``spec`` (``format(x, spec)``), or ``MISSING`` when it is missing or not finite: with
    ``why``, "— (why)", so a page never prints "nan" and says why the number is absent."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        x = float("nan")
    if np.isfinite(x):
        return format(x, spec)
    return f"{MISSING} ({why})" if why else MISSING


COLUMN_NAMES = {
    "isoscore": "IsoScore ι",
    "twonn_id": "TwoNN ID (Razzhigaev et al. 2024 protocol)",
    "twonn_id_cross": "TwoNN ID (cross-context)",
    "same_sentence_nn": "nearest neighbour in the same sentence",
    "anisotropy": "anisotropy",
    "anisotropy_batch_mean": "anisotropy (Razzhigaev et al. 2024 protocol)",
    "participation_ratio": "participation ratio",
    "mean_cosine": "mean cosine",
    "cv_q": "C.V. of Q(X_t)",
    "r2": "R²",
}
"""Run-file column -> its name in words, for the columns that a slide's takeaway or a page's text names."""


def readable(column: str, default: str | None = None) -> str:
    """The words for run-file ``column``: ``COLUMN_NAMES``, else ``default`` (a declared curve's title), else the
    column with its underscores as spaces."""
    return COLUMN_NAMES.get(column) or default or column.replace("_", " ")


#: a legend beside the plot, right of the last panel: never over the x ticks or the axis title below
LEGEND_RIGHT = dict(orientation="v", x=1.02, xanchor="left", y=1.0, yanchor="top")
_DIRECTIONS = ((0, -1), (1, -1), (1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1))
_RINGS = (22.0, 40.0, 60.0, 84.0)


def label_box(cx: float, cy: float, text: str, font_px: float) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) of a one-line label centred at (cx, cy), pixels."""
    w = 0.62 * font_px * max(len(text), 1) + 8.0
    h = 1.35 * font_px + 4.0
    return cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2


def _overlap(a, b) -> float:
    dx = min(a[2], b[2]) - max(a[0], b[0])
    dy = min(a[3], b[3]) - max(a[1], b[1])
    return dx * dy if dx > 0 and dy > 0 else 0.0


def place_labels(
    px: Sequence[float],
    py: Sequence[float],
    texts: Sequence[str],
    *,
    size: tuple[float, float],
    font_px: float = 13.0,
    marker_px: float = 16.0,
) -> list[tuple[float, float]]:
    """Pixel offsets (ax, ay) of each label's centre from its point (y grows downwards)."""
    pts = [(float(x), float(y)) for x, y in zip(px, py)]
    half = marker_px / 2
    marks = [(x - half, y - half, x + half, y + half) for x, y in pts]
    width, height = size
    placed: list[tuple[float, float, float, float]] = []
    out: list[tuple[float, float]] = []
    for (x, y), text in zip(pts, texts):
        best, best_cost = (0.0, -_RINGS[0]), np.inf
        for r in _RINGS:
            for dx, dy in _DIRECTIONS:
                ax, ay = dx * r, dy * r * 0.75
                box = label_box(x + ax, y + ay, str(text), font_px)
                cost = sum(_overlap(box, b) for b in placed) + sum(_overlap(box, m) for m in marks)
                outside = (max(0.0, -box[0]) + max(0.0, box[2] - width)) + (
                    max(0.0, -box[1]) + max(0.0, box[3] - height)
                )
                cost += 50.0 * outside
                if cost < best_cost:
                    best, best_cost = (ax, ay), cost
            if best_cost == 0:
                break
        placed.append(label_box(x + best[0], y + best[1], str(text), font_px))
        out.append(best)
    return out


def data_range(*values, pad: float = 0.04) -> list[float] | None:
    """[lo, hi] over the finite values of every array given, widened by ``pad`` of the span on each side."""
    parts = [np.asarray(v, dtype=np.float64).ravel() for v in values if v is not None]
    allv = np.concatenate(parts) if parts else np.empty(0)
    allv = allv[np.isfinite(allv)]
    if allv.size == 0:
        return None
    lo, hi = float(allv.min()), float(allv.max())
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    return [lo - pad * span, hi + pad * span]


def _axis_values(fig, name: str) -> np.ndarray:
    """Every finite positive value the figure's traces put on layout axis ``name`` (``xaxis2``, ``yaxis``...)."""
    letter, suffix = name[0], name[5:]
    vals = []
    for tr in fig.data:
        if (getattr(tr, f"{letter}axis", None) or letter) == letter + suffix:
            v = getattr(tr, letter, None)
            if v is not None:
                a = np.asarray(v, dtype=np.float64).ravel()
                vals.append(a[np.isfinite(a) & (a > 0)])
    return np.concatenate(vals) if vals else np.empty(0)


def tidy_log_axes(fig, *, plain: bool = False, max_labels: int = 6):
    """Every log axis of ``fig``: labels on whole decades only, one per ``ceil(decades / max_labels)`` decades
    (no crowded 2 and 5 labels between them), printed as powers of ten (10⁻⁶), or with ``plain`` as plain
    numbers (1,000,000 and 0.0001: never SI prefixes such as 1M or 100µ, which read as units on a ratio)."""
    for name in [k for k in fig.layout.to_plotly_json() if k.startswith(("xaxis", "yaxis"))]:
        axis = fig.layout[name]
        if axis.type != "log":
            continue
        fmt: dict[str, Any] = (
            dict(exponentformat="none", tickformat=",~r") if plain else dict(exponentformat="power", showexponent="all")
        )
        v = _axis_values(fig, name)
        span = float(np.log10(v.max()) - np.log10(v.min())) if v.size else 0.0
        if span >= 1.0:
            fmt.update(tick0=0, dtick=max(1, int(np.ceil(span / max_labels))))
        axis.update(**fmt)
    return fig


CORNERS = (
    (0.98, 0.98, "right", "top"),
    (0.02, 0.98, "left", "top"),
    (0.98, 0.02, "right", "bottom"),
    (0.02, 0.02, "left", "bottom"),
)


def emptiest_corner(x, y, *, box: tuple[float, float] = (0.34, 0.2)) -> tuple[float, float, str, str]:
    """The corner of a panel (x, y, xanchor, yanchor in its domain's 0..1 coordinates) whose box of
    ``box`` (width, height, as fractions of the panel) covers the fewest of the points (x, y): where a
    note such as a fit's slope and R² hides the least data. Points are placed on the data's ranges."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    rx, ry = data_range(x[ok]), data_range(y[ok])
    if rx is None or ry is None:
        return CORNERS[0]
    u = (x[ok] - rx[0]) / (rx[1] - rx[0])
    v = (y[ok] - ry[0]) / (ry[1] - ry[0])
    w, h = box

    def covered(corner) -> int:
        cx, cy, xa, ya = corner
        inx = (u >= cx - w) & (u <= cx) if xa == "right" else (u >= cx) & (u <= cx + w)
        iny = (v >= cy - h) & (v <= cy) if ya == "top" else (v >= cy) & (v <= cy + h)
        return int((inx & iny).sum())

    return min(CORNERS, key=covered)


__all__ = [
    "MISSING",
    "COLUMN_NAMES",
    "readable",
    "number",
    "place_labels",
    "label_box",
    "data_range",
    "tidy_log_axes",
    "emptiest_corner",
    "CORNERS",
    "LEGEND_RIGHT",
]
