"""What a figure of token types draws: the types of a frequency band, the highlighted tokens, a
uniform sample when there are too many to draw, one row of an analysis table (a layer's fit), and the
numbers' labels. No statistics are estimated here (slopes, C.V.s and decompositions come from
``stats.analyses``). Pure pandas/numpy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from normvar_core.constants import STUDY_BAND
from normvar_core.stats.tokenstats import in_band
from normvar_core.viz.labels import MISSING, number

#: WebGL scatters stay interactive up to this many points; beyond it we draw a uniform sample.
MAX_POINTS = 100_000


def tradeoff_points(table: pd.DataFrame, n_min: float = STUDY_BAND[0], n_max: float = STUDY_BAND[1]) -> pd.DataFrame:
    """Rows of a token table (token_id, token, n, q, m, v) inside the band, plus ``log10_n``."""
    out = table.loc[in_band(table["n"].to_numpy(), n_min, n_max)]
    out = out.assign(log10_n=np.log10(out["n"].to_numpy(dtype=np.float64)))
    return out.reset_index(drop=True)


def _norm_token(s: str) -> str:
    from normvar_core.stats.analyses import strip_prefix  # the study's footnote 7: "##ing" and "ing" are the same token

    return strip_prefix(str(s)).strip().lower()


def find_tokens(table: pd.DataFrame, queries: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """Rows of ``table`` whose token matches one of ``queries``: exactly, else after stripping the
    subword prefix, case-insensitive. Returns (matched rows in query order, queries not found)."""
    if not len(queries) or table.empty:
        return table.iloc[:0], list(queries)
    tokens = table["token"].astype(str)
    norm = None
    rows: list = []
    missing: list = []
    for q in queries:
        hit = np.flatnonzero((tokens == q).to_numpy())
        if not hit.size:  # no exact match: the same key after stripping "##", "Ġ", "▁" (fn. 7)
            if norm is None:
                norm = tokens.map(_norm_token)
            hit = np.flatnonzero((norm == _norm_token(q)).to_numpy())
        if hit.size:
            rows.extend(int(i) for i in hit if int(i) not in rows)
        else:
            missing.append(q)
    return table.iloc[rows].reset_index(drop=True), missing


def downsample(points: pd.DataFrame, max_points: int = MAX_POINTS, seed: int = 0) -> tuple[pd.DataFrame, int]:
    """At most ``max_points`` rows (a fixed uniform random sample, original order kept) and the
    number of rows before sampling."""
    total = len(points)
    if total <= max_points:
        return points, total
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(total, size=max_points, replace=False))
    return points.iloc[keep].reset_index(drop=True), total


def fit_row(df: pd.DataFrame | None, **where: Any) -> dict[str, Any] | None:
    """The first row of an analysis table where every column ``where`` names has its value (a layer's
    fit: ``fit_row(analyses.tradeoff(...), layer=3)``), as a dict; None when there is none."""
    if df is None or df.empty:
        return None
    mask = np.ones(len(df), dtype=bool)
    for k, v in where.items():
        mask &= (df[k] == v).to_numpy()
    if not mask.any():
        return None
    return df.loc[mask].iloc[0].to_dict()


def fmt(x: Any, digits: int = 3) -> str:
    """A number's label: ``digits`` decimals, or significant digits from 1e4 up; ``labels.MISSING`` ("—") if
    missing or not finite."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return MISSING
    return number(x, f".{digits}f" if abs(x) < 1e4 else f".{digits}g")


#: Token clouds draws at most this many types at once
MAX_CLOUD_TYPES = 50


def cloud_handoff(tokens: Sequence[str], sampled: dict[str, int]) -> tuple[list[int], str | None]:
    """A selection of types handed to Token clouds: the ids of those with stored samples (``sampled``: token ->
    id), at most ``MAX_CLOUD_TYPES``, and a note saying how many of the selection that is and why (None when
    every selected type is drawn)."""
    have = [sampled[t] for t in dict.fromkeys(tokens) if t in sampled]
    ids = have[:MAX_CLOUD_TYPES]
    total = len(dict.fromkeys(tokens))
    if len(ids) == total:
        return ids, None
    why = []
    if len(have) < total:
        why.append(
            f"{total - len(have):,} have no stored samples (a run keeps samples for App. A's tokens and "
            "the most frequent types)"
        )
    if len(have) > len(ids):
        why.append(f"{len(have) - len(ids):,} more are past the cap of {MAX_CLOUD_TYPES} clouds")
    return ids, f"Showing {len(ids):,} of the {total:,} selected token types: " + "; ".join(why) + "."


# ----------------------------------------------------------------------------- messages from the charts
# A chart's selection or click comes back from the browser as JSON that anyone can craft: each reader below takes
# what it needs only when it has the expected shape (finite numbers, integers in range, strings), and returns None
# (or nothing) otherwise, so a malformed message is ignored rather than ending the page in a traceback.
MAX_TEXT_CHARS = 200
"""A point's text (a token) longer than this is not a token of any run: such a point is ignored."""
MAX_COORD = 1e300
"""A coordinate beyond ±this is not a place on a chart (and would overflow the box's bounds)."""


def _finite(x: Any) -> float | None:
    """``x`` as a float when it is a real number (not a bool, not a string) and finite; else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        return None
    try:
        f = float(x)
    except (OverflowError, ValueError):  # an int too large for a float
        return None
    return f if np.isfinite(f) and abs(f) <= MAX_COORD else None


def _index(x: Any, n: int) -> int | None:
    """``x`` as an index into ``n`` rows when it is an integer (or an integral float) in [0, n); else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        return None
    if isinstance(x, (float, np.floating)) and not (np.isfinite(x) and float(x).is_integer()):
        return None
    i = int(x)
    return i if 0 <= i < n else None


def picked_point(picked: Any, n: int) -> tuple[int, float, float] | None:
    """A click message of the Occurrences scatter, ``{"index": i, "x": x, "y": y}``, as (i, x, y) when i indexes
    one of the ``n`` points drawn and x, y are finite numbers; None for anything else."""
    if not isinstance(picked, dict):
        return None
    i, x, y = _index(picked.get("index"), n), _finite(picked.get("x")), _finite(picked.get("y"))
    return None if i is None or x is None or y is None else (i, x, y)


def scatter_region(sel: Any, max_vertices: int = 100) -> tuple[str, Any] | None:
    """A selection message of the Occurrences scatter as ("box", ((x0, x1), (y0, y1))) with ordered finite bounds,
    ("lasso", [[x, y], ...]) with 3 or more finite vertices (a longer polygon thinned to at most ``max_vertices``:
    every k-th vertex, k = ⌈len / max_vertices⌉; each vertex costs a term of the SQL predicate), or ("clear", None);
    None for anything else."""
    if not isinstance(sel, dict):
        return None
    kind = sel.get("kind")
    if kind == "clear":
        return ("clear", None)
    if kind == "box":
        xs, ys = sel.get("x"), sel.get("y")
        if not (isinstance(xs, list) and isinstance(ys, list) and len(xs) == len(ys) == 2):
            return None
        bounds = [_finite(v) for v in (*xs, *ys)]
        if any(b is None for b in bounds):
            return None
        x0, x1, y0, y1 = bounds
        return ("box", (tuple(sorted((x0, x1))), tuple(sorted((y0, y1)))))  # type: ignore[type-var]  # None excluded above
    if kind == "lasso":
        poly = sel.get("polygon")
        if not isinstance(poly, list) or len(poly) < 3:
            return None
        poly = poly[:: max(1, -(-len(poly) // max_vertices))]
        out = []
        for vertex in poly:
            if not (isinstance(vertex, list) and len(vertex) == 2):
                return None
            x, y = _finite(vertex[0]), _finite(vertex[1])
            if x is None or y is None:
                return None
            out.append([x, y])
        return ("lasso", out) if len(out) >= 3 else None
    return None


def event_points(event: Any) -> list[dict]:
    """The points of a plotly chart's selection event (Trade-off, Token clouds) that are dicts; [] when the event
    has no such list."""
    sel = getattr(event, "selection", None) if event is not None else None
    points = getattr(sel, "points", None) if sel is not None else None
    if points is None and isinstance(sel, dict):
        points = sel.get("points")
    return [p for p in points if isinstance(p, dict)] if isinstance(points, list) else []


def point_texts(points: list[dict]) -> list[str]:
    """The distinct texts (tokens) of selected points, in selection order: non-empty strings of at most
    ``MAX_TEXT_CHARS`` characters; points without one are left out."""
    texts = (p.get("text") for p in points)
    return list(dict.fromkeys(t for t in texts if isinstance(t, str) and 0 < len(t) <= MAX_TEXT_CHARS))


def clicked_sample(point: Any) -> tuple[int, int] | None:
    """(token id, sample index) of a clicked Token clouds point, from its customdata [.., .., token id, i]: two
    integers in [0, 2³¹); None for anything else."""
    cd = point.get("customdata") if isinstance(point, dict) else None
    if not isinstance(cd, list) or len(cd) < 4:
        return None
    tid, i = _index(cd[2], 2**31), _index(cd[3], 2**31)
    return None if tid is None or i is None else (tid, i)


__all__ = [
    "MAX_POINTS",
    "MAX_CLOUD_TYPES",
    "tradeoff_points",
    "find_tokens",
    "downsample",
    "fit_row",
    "fmt",
    "cloud_handoff",
    "picked_point",
    "scatter_region",
    "event_points",
    "point_texts",
    "clicked_sample",
    "MAX_TEXT_CHARS",
    "MAX_COORD",
]
