"""The Occurrences page's WebGL scatter: the binary payload of the hand-written WebGL component
(``scatter_gl.js`` beside this file, mounted by ``views/_scatter_gl.py``) of every kept occurrence of a layer,
coloured by token type, log frequency, position, M(X_t) or V(X_t).

The payload is bytes, not JSON (Streamlit v2 components take ``bytes`` as they are): ``b"NVSC"``, a uint32
(little-endian) header length, the JSON header (n, h, key, frame, shape, height) padded to 4 bytes, then
float32 (x, y) pairs, uint8 (r, g, b) triples padded to 4 bytes, and the searched token's float32 (x, y)
pairs: 11 bytes a point, 11 MB at a million (the deck.gl JSON was 51.6 MB). No streamlit here.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pandas as pd

COLOUR_BY = {"token type": "token", "log frequency": "n", "position": "position", "M(X_t)": "m", "V(X_t)": "v"}
TOP_TYPES = 10
"""Token-type colouring: the most frequent types of the layer each get a colour, the rest are grey."""
PALETTE = np.array(
    [
        [31, 119, 180],
        [255, 127, 14],
        [44, 160, 44],
        [214, 39, 40],
        [148, 103, 189],
        [140, 86, 75],
        [227, 119, 194],
        [188, 189, 34],
        [23, 190, 207],
        [127, 127, 127],
    ],
    np.uint8,
)
OTHER = np.array([190, 190, 190], np.uint8)
# viridis at 9 stops (matplotlib's), interpolated linearly
VIRIDIS = np.array(
    [
        [68, 1, 84],
        [71, 44, 122],
        [59, 81, 139],
        [44, 113, 142],
        [33, 144, 141],
        [39, 173, 129],
        [92, 200, 99],
        [170, 220, 50],
        [253, 231, 37],
    ],
    np.float64,
)
MAGIC = b"NVSC"
JS = Path(__file__).with_name("scatter_gl.js")
"""The component's JavaScript (an ES module, read as a string by the page)."""


def ramp(values: np.ndarray, *, log: bool = False) -> tuple[np.ndarray, tuple[float, float]]:
    """Continuous values -> viridis colours (uint8 (N, 3)), scaled between their 1st and 99th percentiles
    (log10 of the positive ones first when ``log``; the others at the bottom); returns the colours and that
    range (for the legend)."""
    v = np.asarray(values, np.float64)
    if log:  # zero (V of a type seen once) and below: no logarithm, drawn at the bottom of the scale
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(v > 0, np.log10(np.where(v > 0, v, 1.0)), np.nan)
    finite = v[np.isfinite(v)]
    lo, hi = np.percentile(finite, [1, 99]) if finite.size else (0.0, 1.0)
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
    return rgb, {
        "kind": "ramp",
        "label": ("log10 " if log else "") + {"n": "n_t", "m": "M(X_t)", "v": "V(X_t)", "position": "position"}[col],
        "lo": lo,
        "hi": hi,
    }


def frame(x: np.ndarray, y: np.ndarray) -> list[float]:
    """The initial view: the finite points' 0.5-99.5 % range [x0, x1, y0, y1] (the component fits it, 15 %
    margin); a span of zero (one point, or all at one place) is widened to 1."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return [-1.0, 1.0, -1.0, 1.0]
    out = []
    for v in (x[ok], y[ok]):
        lo, hi = (float(t) for t in np.percentile(v, [0.5, 99.5]))
        out += [lo - 0.5, hi + 0.5] if hi == lo else [lo, hi]
    return out


def _pad(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def points_block(x: np.ndarray, y: np.ndarray, rgb: np.ndarray) -> tuple[bytes, str]:
    """The large part of the payload: float32 (x, y) pairs then uint8 (r, g, b) triples padded to 4 bytes, and
    its digest (the component uploads the points to the GPU again only when the digest changes). A page builds
    it once per (run, layer, colouring)."""
    xy = np.empty((len(x), 2), "<f4")
    xy[:, 0], xy[:, 1] = x, y
    block = xy.tobytes() + _pad(np.ascontiguousarray(rgb, np.uint8).tobytes())
    return block, hashlib.blake2b(block, digest_size=12).hexdigest()


def scatter_payload(
    x: np.ndarray,
    y: np.ndarray,
    block: tuple[bytes, str] | None = None,
    *,
    rgb: np.ndarray | None = None,
    highlight: np.ndarray | None = None,
    shape: list[list[float]] | None = None,
    height: int = 620,
) -> bytes:
    """The component's bytes: every point (``block`` from ``points_block``, or built here from ``rgb``), the
    highlighted points (a boolean mask: a token search) drawn larger on top, and ``shape``, the selection's
    polygon in data coordinates (a box's four corners or a lasso), drawn dashed."""
    x, y = np.asarray(x), np.asarray(y)
    data, key = block if block is not None else points_block(x, y, rgb)  # type: ignore[arg-type]  # rgb without block
    hi = np.zeros(len(x), bool) if highlight is None else np.asarray(highlight, bool)
    hxy = np.empty((int(hi.sum()), 2), "<f4")
    hxy[:, 0], hxy[:, 1] = x[hi], y[hi]
    head = json.dumps(
        {"n": len(x), "h": len(hxy), "key": key, "frame": frame(x, y), "height": int(height), "shape": shape},
        allow_nan=False,
    ).encode()
    return MAGIC + struct.pack("<I", len(head)) + _pad(head) + data + hxy.tobytes()


def read_payload(raw: bytes) -> dict:
    """The payload back (what the component reads): header, xy (n, 2) float32, rgb (n, 3) uint8, highlight."""
    assert raw[:4] == MAGIC
    (size,) = struct.unpack("<I", raw[4:8])
    head = json.loads(raw[8 : 8 + size])
    at = 8 + size + (-size % 4)
    n, h = head["n"], head["h"]
    xy = np.frombuffer(raw, "<f4", 2 * n, at).reshape(n, 2)
    at += 8 * n
    rgb = np.frombuffer(raw, np.uint8, 3 * n, at).reshape(n, 3)
    at += 3 * n + (-3 * n % 4)
    return {"head": head, "xy": xy, "rgb": rgb, "highlight": np.frombuffer(raw, "<f4", 2 * h, at).reshape(h, 2)}


__all__ = [
    "COLOUR_BY",
    "JS",
    "ramp",
    "colours",
    "frame",
    "points_block",
    "scatter_payload",
    "read_payload",
    "TOP_TYPES",
]
