"""Reading a run's occurrences (the Occurrences page): every kept occurrence of a layer with its
token and its type's statistics, a box as a DuckDB predicate, the types and contexts inside it. DuckDB
queries on the run file (``Run.query``: reopened read-only, checked to be the same file); no torch.

The predicate is built from numbers only (``box_predicate``), so it can be shown, copied and reused:
``layer = 3 AND x BETWEEN -1.5 AND 0.25 AND y BETWEEN 0.0 AND 2.0``; a lasso is a polygon predicate
(``polygon_predicate``: the even-odd ray-casting rule written out over the polygon's edges, no extension).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from normvar_core.errors import NormvarError
from normvar_core.stats.token_text import with_readable

POINT_COLUMNS = ("x", "y", "token_id", "sentence_id", "position", "token", "n", "m", "v")


def has_occurrences(run) -> bool:
    return "occurrences" in run.table_names


def _layer(run, layer: int) -> int:
    run.check_layer(int(layer))
    return int(layer)


def occurrence_points(run, layer: int) -> pd.DataFrame:
    """Every kept occurrence of ``layer``: x, y (float32), token_id, sentence_id, position, and its type's
    token, n (= n_t), m = M(X_t), v = V(X_t) from ``token_stats``; in (sentence, position) order."""
    if not has_occurrences(run):
        raise NormvarError(
            f"run {run.name!r} keeps no occurrences",
            fix="recompute it with --occurrences above 0 (the default keeps 1,000,000 per layer)",
        )
    layer = _layer(run, layer)
    sql = (
        f"SELECT o.x, o.y, o.token_id, o.sentence_id, o.position, s.token, s.n, s.m, s.v "
        f"FROM occurrences o JOIN token_stats s ON s.layer = o.layer AND s.token_id = o.token_id "
        f"WHERE o.layer = {layer} ORDER BY o.sentence_id, o.position"
    )
    return with_readable(run.query(sql, "occurrences").to_pandas())  # tokens as read (``stats.token_text``)


def occurrence_count(run, layer: int) -> int:
    """Occurrences kept for ``layer`` (the number the page draws)."""
    layer = _layer(run, layer)
    return int(
        run.query(f"SELECT count(*) AS c FROM occurrences WHERE layer = {layer}", "occurrences").column("c")[0].as_py()
    )


def occurrence_axes(run) -> pd.DataFrame:
    """One row per layer: how the axes were found, k, the early positions, the angles to the exact axes."""
    return run.table("occurrence_axes") if "occurrence_axes" in run.table_names else pd.DataFrame()


def _num(x: float) -> str:
    x = float(x)
    if not math.isfinite(x):
        raise NormvarError(f"box bound {x} is not a finite number", fix="give finite numbers for the box")
    return repr(x)


def box_predicate(layer: int, x: tuple[float, float], y: tuple[float, float]) -> str:
    """The DuckDB predicate of a box on ``layer`` (bounds inclusive, ordered)."""
    x0, x1 = sorted(float(v) for v in x)
    y0, y1 = sorted(float(v) for v in y)
    return f"layer = {int(layer)} AND x BETWEEN {_num(x0)} AND {_num(x1)} AND y BETWEEN {_num(y0)} AND {_num(y1)}"


def _dbl(x: float) -> str:
    """A DOUBLE literal (DuckDB reads ``0.25`` as a DECIMAL, ``0.25e0`` as the double Python holds)."""
    r = _num(x)
    return r if "e" in r else r + "e0"


def polygon_predicate(layer: int, polygon) -> str:
    """The DuckDB predicate of a closed polygon (vertices [[x, y], ...], at least 3) on ``layer``: a point is
    inside when a ray from it towards +x crosses an odd number of edges; an edge (xi, yi)-(xj, yj) is crossed
    when min(yi, yj) <= y < max(yi, yj) and x < xi + (y - yi)(xj - xi)/(yj - yi) (half-open, so a point on an
    edge shared by two polygons is in exactly one; horizontal edges are never crossed). A bounding-box test
    comes first (DuckDB evaluates it before the edges)."""
    v = np.asarray(polygon, np.float64)
    if v.ndim != 2 or v.shape[1] != 2 or len(v) < 3:
        raise NormvarError(
            f"a lasso needs at least 3 vertices (x, y), got shape {v.shape}",
            fix="draw the lasso around an area, or give [[x, y], ...] with 3 vertices or more",
        )
    terms = []
    for (xi, yi), (xj, yj) in zip(v, np.roll(v, -1, axis=0)):
        if yi == yj:
            continue
        lo, hi = sorted((yi, yj))
        terms.append(
            f"(y >= {_dbl(lo)} AND y < {_dbl(hi)} AND x < {_dbl(xi)} + (y - {_dbl(yi)}) * "
            f"{_dbl((xj - xi) / (yj - yi))})::INTEGER"
        )
    (x0, y0), (x1, y1) = v.min(axis=0), v.max(axis=0)
    return (
        f"layer = {int(layer)} AND x BETWEEN {_dbl(x0)} AND {_dbl(x1)} AND y BETWEEN {_dbl(y0)} AND {_dbl(y1)} "
        f"AND ({' + '.join(terms) or '0'}) % 2 = 1"
    )


def in_box(points: pd.DataFrame, x: tuple[float, float], y: tuple[float, float]) -> np.ndarray:
    """The same box on loaded points (float32 coordinates compared as DuckDB compares FLOAT with DOUBLE)."""
    x0, x1 = sorted(float(v) for v in x)
    y0, y1 = sorted(float(v) for v in y)
    px, py = points["x"].to_numpy(np.float64), points["y"].to_numpy(np.float64)
    return (px >= x0) & (px <= x1) & (py >= y0) & (py <= y1)


def selected_types(run, predicate: str) -> pd.DataFrame:
    """token_id, token, count of the occurrences matching ``predicate`` (``box_predicate``), most first."""
    sql = (
        f"SELECT o.token_id, any_value(s.token) AS token, count(*) AS count FROM {_matching(predicate)} o "
        f"JOIN token_stats s ON s.layer = o.layer AND s.token_id = o.token_id "
        f"GROUP BY o.token_id ORDER BY count DESC, o.token_id"
    )
    return with_readable(run.query(sql, "occurrences").to_pandas())  # tokens as read (``stats.token_text``)


def selected_contexts(run, predicate: str, *, token_id: int | None = None, limit: int = 200) -> pd.DataFrame:
    """Occurrences matching ``predicate`` (optionally of one type) with their sentence: token, sentence_id,
    position, x, y, text; at most ``limit`` rows, in (sentence, position) order."""
    where = "TRUE" if token_id is None else f"o.token_id = {int(token_id)}"
    sql = (
        f"SELECT s.token, o.sentence_id, o.position, o.x, o.y, t.text FROM {_matching(predicate)} o "
        f"JOIN token_stats s ON s.layer = o.layer AND s.token_id = o.token_id "
        f"LEFT JOIN sentences t ON t.sentence_id = o.sentence_id WHERE {where} "
        f"ORDER BY o.sentence_id, o.position LIMIT {int(limit)}"
    )
    return with_readable(run.query(sql, "occurrences").to_pandas())  # tokens as read (``stats.token_text``)


def _matching(predicate: str) -> str:
    """The occurrences matching ``predicate`` as a subquery."""
    return f"(SELECT * FROM occurrences WHERE {predicate})"


__all__ = [
    "POINT_COLUMNS",
    "has_occurrences",
    "occurrence_points",
    "occurrence_count",
    "occurrence_axes",
    "box_predicate",
    "polygon_predicate",
    "in_box",
    "selected_types",
    "selected_contexts",
]
