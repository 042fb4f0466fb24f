"""The Occurrences page's WebGL scatter: a deck.gl JSON spec (``st.pydeck_chart`` draws it with the deck.gl
bundled in Streamlit: OrthographicView, ScatterplotLayer, no basemap, nothing fetched) of every kept
occurrence of a layer, coloured by token type, log frequency, position, M(X_t) or V(X_t).

The spec is written here, not by pydeck: pydeck turns a DataFrame into a list of dicts and then into JSON
(seconds at 1,000,000 points); pandas' C writer makes the point records directly. ``DeckSpec`` is what
``st.pydeck_chart`` needs of a pydeck Deck (``to_json``, ``_tooltip``). No streamlit here.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

COLOUR_BY = {"token type": "token", "log frequency": "n", "position": "position", "M(X_t)": "m", "V(X_t)": "v"}
TOP_TYPES = 10
"""Token-type colouring: the most frequent types of the layer each get a colour, the rest are grey."""
PALETTE = np.array([[31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40], [148, 103, 189],
                    [140, 86, 75], [227, 119, 194], [188, 189, 34], [23, 190, 207], [127, 127, 127]], np.uint8)
OTHER = np.array([190, 190, 190], np.uint8)
# viridis at 9 stops (matplotlib's), interpolated linearly
VIRIDIS = np.array([[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141], [39, 173, 129],
                    [92, 200, 99], [170, 220, 50], [253, 231, 37]], np.float64)
HIGHLIGHT = [0, 0, 0]
LAYER_ID = "occurrences"


class DeckSpec:
    """A ready deck.gl JSON spec with the two attributes ``st.pydeck_chart`` reads of a pydeck Deck."""

    layers = None

    def __init__(self, spec: str, tooltip: dict | None = None):
        self._spec, self._tooltip = spec, tooltip

    def to_json(self) -> str:
        return self._spec


def ramp(values: np.ndarray, *, log: bool = False) -> tuple[np.ndarray, tuple[float, float]]:
    """Continuous values -> viridis colours (uint8 (N, 3)), scaled between their 1st and 99th percentiles
    (log10 of the positive ones first when ``log``; the others at the bottom); returns the colours and that
    range (for the legend)."""
    v = np.asarray(values, np.float64)
    if log:  # zero (V of a type seen once) and below: no logarithm, drawn at the bottom of the scale
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(v > 0, np.log10(np.where(v > 0, v, 1.0)), np.nan)
    finite = v[np.isfinite(v)]
    lo, hi = (np.percentile(finite, [1, 99]) if finite.size else (0.0, 1.0))
    t = np.clip((v - lo) / (hi - lo if hi > lo else 1.0), 0, 1)
    t = np.where(np.isfinite(t), t, 0.0) * (len(VIRIDIS) - 1)
    i = np.minimum(t.astype(np.int64), len(VIRIDIS) - 2)
    f = (t - i)[:, None]
    return (VIRIDIS[i] * (1 - f) + VIRIDIS[i + 1] * f).round().astype(np.uint8), (float(lo), float(hi))


def colours(points: pd.DataFrame, by: str) -> tuple[np.ndarray, dict]:
    """(N, 3) uint8 colours of the points for ``by`` (a key of COLOUR_BY) and a legend: {"kind": "types",
    "items": [(token, count, [r, g, b]), ...]} or {"kind": "ramp", "label", "lo", "hi"}."""
    col = COLOUR_BY[by]
    if col == "token":
        counts = points["token_id"].value_counts()
        top = counts.index[:TOP_TYPES].to_numpy()
        rgb = np.tile(OTHER, (len(points), 1))
        tok = points["token_id"].to_numpy()
        items = []
        for j, t in enumerate(top):
            rgb[tok == t] = PALETTE[j]
            name = str(points.loc[points["token_id"] == t, "token"].iloc[0])
            items.append((name, int(counts.loc[t]), PALETTE[j].tolist()))
        return rgb, {"kind": "types", "items": items, "other": int(len(points) - counts.iloc[:TOP_TYPES].sum())}
    log = col in ("n", "m", "v")
    rgb, (lo, hi) = ramp(points[col].to_numpy(), log=log)
    return rgb, {"kind": "ramp", "label": ("log10 " if log else "") + {"n": "n_t", "m": "M(X_t)", "v": "V(X_t)",
                                                                      "position": "position"}[col],
                 "lo": lo, "hi": hi}


def _records(x: np.ndarray, y: np.ndarray, rgb: np.ndarray) -> str:
    """[{"x":..,"y":..,"r":..,"g":..,"b":..}, ...] by pandas' C JSON writer, with the decimals that keep about 7
    significant digits of the largest coordinate (float32's)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    frame = pd.DataFrame({"x": x, "y": y, "r": rgb[:, 0], "g": rgb[:, 1], "b": rgb[:, 2]})
    top = float(max(np.abs(x).max(initial=0.0), np.abs(y).max(initial=0.0)))
    digits = int(np.clip(6 - np.floor(np.log10(top)), 0, 15)) if top > 0 else 6
    return frame.to_json(orient="records", double_precision=digits)


def view_state(x: np.ndarray, y: np.ndarray, *, width: int = 900, height: int = 620) -> dict:
    """An OrthographicView's initial state framing the points' 0.5-99.5 % range."""
    if len(x) == 0:
        return {"target": [0, 0, 0], "zoom": 0}
    x0, x1 = np.percentile(x, [0.5, 99.5])
    y0, y1 = np.percentile(y, [0.5, 99.5])
    span = max(float(x1 - x0) / width, float(y1 - y0) / height, 1e-9) * 1.15
    return {"target": [float(x0 + x1) / 2, float(y0 + y1) / 2, 0], "zoom": float(np.log2(1.0 / span))}


def points_layer(x: np.ndarray, y: np.ndarray, rgb: np.ndarray, *, radius: float = 1.5) -> str:
    """The JSON of the scatter of every point (pickable: a click or shift-clicks select points): the large
    part of ``deck_spec``, which a page can build once per (run, layer, colouring) and pass as ``base``."""
    return (f'{{"@@type":"ScatterplotLayer","id":"{LAYER_ID}","data":{_records(x, -np.asarray(y, np.float64), rgb)},'
            f'"getPosition":"@@=[x, y]","getFillColor":"@@=[r, g, b]","getRadius":{radius},'
            f'"radiusUnits":"pixels","pickable":true,"stroked":false}}')


def deck_spec(x: np.ndarray, y: np.ndarray, rgb: np.ndarray, *, highlight: np.ndarray | None = None,
              box: tuple[tuple[float, float], tuple[float, float]] | None = None, radius: float = 1.5,
              height: int = 620, base: str | None = None) -> DeckSpec:
    """The scatter of every point (``points_layer``, or ``base`` when given: the same points' layer built
    before), the highlighted points (a token search) drawn larger on top, and the box outline. y grows upwards
    (the data's y is negated: deck.gl's orthographic y grows downwards)."""
    ny = -np.asarray(y, np.float64)
    layers = [base if base is not None else points_layer(x, y, rgb, radius=radius)]
    if highlight is not None and highlight.any():
        hx, hy = np.asarray(x)[highlight], ny[highlight]
        hrgb = np.tile(np.array(HIGHLIGHT, np.uint8), (len(hx), 1))
        layers.append(f'{{"@@type":"ScatterplotLayer","id":"search","data":{_records(hx, hy, hrgb)},'
                      f'"getPosition":"@@=[x, y]","getFillColor":"@@=[r, g, b]","getRadius":{radius * 2.5},'
                      f'"radiusUnits":"pixels","pickable":false}}')
    if box is not None:
        (x0, x1), (y0, y1) = (sorted(box[0]), sorted(box[1]))
        path = [[x0, -y0], [x1, -y0], [x1, -y1], [x0, -y1], [x0, -y0]]
        layers.append(json.dumps({"@@type": "PathLayer", "id": "box", "data": [{"path": path}],
                                  "getPath": "@@=path", "getColor": [0, 0, 0], "getWidth": 2,
                                  "widthUnits": "pixels", "pickable": False}))
    vs = view_state(np.asarray(x, np.float64), ny, height=height)
    spec = (f'{{"initialViewState":{json.dumps(vs)},"views":[{{"@@type":"OrthographicView","controller":true}}],'
            f'"layers":[{",".join(layers)}]}}')
    return DeckSpec(spec)


__all__ = ["COLOUR_BY", "DeckSpec", "ramp", "colours", "deck_spec", "points_layer", "view_state", "LAYER_ID", "TOP_TYPES"]
