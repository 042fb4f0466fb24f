"""What a figure of token types draws: the types of a frequency band, the highlighted tokens, a
uniform sample when there are too many to draw, one row of an analysis table (a layer's fit), and the
numbers' labels. No statistics are estimated here (slopes, C.V.s and decompositions come from
``stats.analyses``). Pure pandas/numpy."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from normvar_core.constants import STUDY_BAND
from normvar_core.stats.tokenstats import in_band

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
    rows, missing = [], []
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
    """A number's label: ``digits`` decimals, or significant digits from 1e4 up; "–" if not finite."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return "–"
    if not np.isfinite(x):
        return "–"
    return f"{x:.{digits}f}" if abs(x) < 1e4 else f"{x:.{digits}g}"


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
        why.append(f"{total - len(have):,} have no stored samples (a run keeps samples for App. A's tokens and "
                   "the most frequent types)")
    if len(have) > len(ids):
        why.append(f"{len(have) - len(ids):,} more are past the cap of {MAX_CLOUD_TYPES} clouds")
    return ids, f"Showing {len(ids):,} of the {total:,} selected token types: " + "; ".join(why) + "."


__all__ = ["MAX_POINTS", "MAX_CLOUD_TYPES", "tradeoff_points", "find_tokens", "downsample", "fit_row", "fmt",
           "cloud_handoff"]
