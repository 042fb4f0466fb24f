"""Token clouds' presentation: one distinguishable colour per token (a greedy max-min palette in
CIELAB, glasbey-style) and label placement in pixels so that no two labels overlap and each label
covers as few points as possible (drawn as annotations above the points, with a leader line to its
cloud's centroid). Pure numpy; the figure size and axis ranges are fixed by the caller
(``cloud_figures.clouds_figure``) so that the pixel layout is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


# ---------------------------------------------------------------------------------------- colours
def srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """(n, 3) sRGB in [0, 1] -> (n, 3) CIELAB (D65)."""
    c = np.asarray(rgb, dtype=np.float64)
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    m = np.array(
        [[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750], [0.0193339, 0.1191920, 0.9503041]]
    )
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=1)


def hex_to_rgb(h: str) -> tuple[float, float, float]:
    h = h.lstrip("#")
    return tuple(int(h[i : i + 2], 16) / 255 for i in (0, 2, 4))  # type: ignore[return-value]  # three components


@lru_cache(maxsize=4)
def token_palette(n: int = 64) -> tuple[str, ...]:
    """``n`` colours, each chosen to maximise its smallest CIELAB distance (ΔE76) to those before it,
    among the sRGB grid with lightness 30 ≤ L* ≤ 78 (readable on white). Deterministic."""
    g = np.linspace(0, 1, 18)
    grid = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    lab = srgb_to_lab(grid)
    ok = (lab[:, 0] >= 30) & (lab[:, 0] <= 78)
    grid, lab = grid[ok], lab[ok]
    first = int(np.argmin(np.linalg.norm(lab - srgb_to_lab(np.array([hex_to_rgb("#1f77b4")])), axis=1)))
    chosen = [first]
    dmin = np.linalg.norm(lab - lab[first], axis=1)
    for _ in range(n - 1):
        k = int(np.argmax(dmin))
        chosen.append(k)
        dmin = np.minimum(dmin, np.linalg.norm(lab - lab[k], axis=1))
    return tuple("#{:02x}{:02x}{:02x}".format(*(int(round(v * 255)) for v in grid[k])) for k in chosen)


def token_colours(tokens: list) -> dict:
    """{token: colour} in the given order (the first token gets the palette's first colour)."""
    pal = token_palette(max(64, len(tokens)))
    return {t: pal[i] for i, t in enumerate(tokens)}


# ---------------------------------------------------------------------------------------- labels
@dataclass(frozen=True)
class Frame:
    """The plot area in pixels and the data ranges it shows (equal scale on both axes)."""

    width: float
    height: float
    xrange: tuple[float, float]
    yrange: tuple[float, float]

    def to_px(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Data -> pixels from the plot area's top-left corner (y grows downwards)."""
        px = (np.asarray(x, float) - self.xrange[0]) / (self.xrange[1] - self.xrange[0]) * self.width
        py = (self.yrange[1] - np.asarray(y, float)) / (self.yrange[1] - self.yrange[0]) * self.height
        return px, py


def equal_frame(x: np.ndarray, y: np.ndarray, width: float, height: float, pad: float = 0.08) -> Frame:
    """Ranges holding every (x, y) with a margin, widened so that one data unit is as many pixels on
    both axes (the clouds' geometry is not distorted)."""
    x0, x1 = float(np.min(x)), float(np.max(x))
    y0, y1 = float(np.min(y)), float(np.max(y))
    sx, sy = max(x1 - x0, 1e-12), max(y1 - y0, 1e-12)
    x0, x1, y0, y1 = x0 - pad * sx, x1 + pad * sx, y0 - pad * sy, y1 + pad * sy
    per_px = max((x1 - x0) / width, (y1 - y0) / height)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    return Frame(
        width,
        height,
        (cx - per_px * width / 2, cx + per_px * width / 2),
        (cy - per_px * height / 2, cy + per_px * height / 2),
    )


def label_box(text: str, font_px: float) -> tuple[float, float]:
    """A generous estimate of a label's box (width, height) in pixels, padding and border included."""
    return 0.62 * font_px * max(len(text), 1) + 10, 1.35 * font_px + 8


def place_labels(
    centroids: np.ndarray,
    texts: list[str],
    points: np.ndarray,
    frame: Frame,
    font_px: float,
) -> np.ndarray:
    """Offsets (k, 2) in pixels (dx right, dy down) of each label's centre from its centroid such that no
    two label boxes overlap, every box lies in the plot area, and, among such places, the box covers as
    few points as possible and sits close to its centroid (greedy, largest clouds first)."""
    k = len(texts)
    cx, cy = frame.to_px(centroids[:, 0], centroids[:, 1])
    px, py = frame.to_px(points[:, 0], points[:, 1]) if len(points) else (np.zeros(0), np.zeros(0))
    radii = np.array([0.0, 22, 36, 52, 72, 96, 124, 160, 200, 250, 310])
    angles = np.deg2rad(np.arange(0, 360, 22.5))
    cand = np.concatenate([[[0.0, 0.0]]] + [np.stack([r * np.cos(angles), -r * np.sin(angles)], 1) for r in radii[1:]])
    dist = np.hypot(cand[:, 0], cand[:, 1])
    placed: list[tuple[float, float, float, float]] = []
    out = np.zeros((k, 2))
    for i in range(k):
        w, h = label_box(texts[i], font_px)
        mx, my = cx[i] + cand[:, 0], cy[i] + cand[:, 1]
        ok = (mx - w / 2 >= 2) & (mx + w / 2 <= frame.width - 2) & (my - h / 2 >= 2) & (my + h / 2 <= frame.height - 2)
        for a, b, c, d in placed:  # boxes as (left, top, right, bottom), 3 px apart at least
            ok &= ~((mx - w / 2 < c + 3) & (mx + w / 2 > a - 3) & (my - h / 2 < d + 3) & (my + h / 2 > b - 3))
        if not ok.any():  # nowhere free in reach: the least bad free spot is still better than an overlap
            ok = np.ones_like(ok)
        covered = ((np.abs(px[None, :] - mx[:, None]) <= w / 2) & (np.abs(py[None, :] - my[:, None]) <= h / 2)).sum(1)
        score = np.where(ok, covered * 4.0 + dist * 0.05, np.inf)
        j = int(np.argmin(score))
        out[i] = cand[j]
        placed.append((mx[j] - w / 2, my[j] - h / 2, mx[j] + w / 2, my[j] + h / 2))
    return out


__all__ = [
    "token_palette",
    "token_colours",
    "srgb_to_lab",
    "hex_to_rgb",
    "Frame",
    "equal_frame",
    "label_box",
    "place_labels",
]
