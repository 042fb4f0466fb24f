"""The run's intervals, one table for the figures, the findings and the run file.

``half_values`` turns one half's (or the whole corpus') statistics into the per-layer quantities the
study plots (Yamagiwa & Shimodaira 2024 Fig. 5, 6, 18: M/Q, V/Q, V_W/Q, V_B/Q, V_W/V over the band's types, eqs. 8–15;
Razzhigaev et al. §2.3: anisotropy λ₁/Σλ of the exact covariance; the share of Q(X) carried by position 0), plus every
column computed from the covariance's eigenvalues (``geometry.SPECTRAL_COLUMNS``: IsoScore).
``interval_table`` gives per layer and quantity: value, low, high, method —
``bootstrap-types`` for the trade-off (C.V. of Q(X_t), slope, R²; ``stats.bootstrap``) and
``split-half`` for the corpus-level and geometry quantities (θ ± 1.96 |θ_A − θ_B| / 2).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from normvar_core.stats.analyses import ols
from normvar_core.stats.bootstrap import RESAMPLES, bootstrap_tradeoff, split_half_interval
from normvar_core.stats.layer_geometry import SPECTRAL_COLUMNS, spectral_columns
from normvar_core.stats.tokenstats import TokenStats, in_band

SPLIT_QUANTITIES = (
    "m_over_q",
    "v_over_q",
    "v_w_over_q",
    "v_b_over_q",
    "v_w_over_v",  # the moments' (eqs. 8–15)
    "anisotropy",
    "isoscore",
    "q_share_pos0",
)  # the geometry's, IsoScore's, the outliers'
"""The quantities with a split-half interval, in the ``intervals`` table's order."""
BOOT_QUANTITIES = ("cv_q", "slope", "r2")
COLUMNS = ["layer", "quantity", "value", "low", "high", "method"]
RANGES: dict[str, tuple[float, float]] = {
    "cv_q": (0.0, np.inf),  # a standard deviation over a mean of norms ≥ 0
    "r2": (0.0, 1.0),
    **{
        q: (0.0, 1.0)
        for q in (
            "m_over_q",
            "v_over_q",
            "v_w_over_q",
            "v_b_over_q",
            "v_w_over_v",  # shares of Q, V
            "anisotropy",
            "isoscore",
            "q_share_pos0",
        )
    },  # λ₁/Σλ, ι (Algorithm 1), a share of Q
}
"""The range each bounded quantity can take; an interval's ends are clipped to it (``clip_to_range``). The
slope has none."""


def clip_to_range(table: pd.DataFrame) -> pd.DataFrame:
    """The interval rows with ``low`` and ``high`` clipped to their quantity's ``RANGES`` entry: a split-half
    interval θ ± 1.96 |θ_A − θ_B| / 2 is symmetric and knows no bounds, so near 0 or 1 it would otherwise claim
    values the quantity never takes (an IsoScore below 0, a share above 1). Also applied to stored tables, which
    run files written before the clipping hold unclipped."""
    if table.empty:
        return table
    lo = table["quantity"].map(lambda q: RANGES.get(q, (-np.inf, np.inf))[0]).to_numpy(np.float64)
    hi = table["quantity"].map(lambda q: RANGES.get(q, (-np.inf, np.inf))[1]).to_numpy(np.float64)
    with np.errstate(invalid="ignore"):
        return table.assign(
            low=np.clip(table["low"].to_numpy(np.float64), lo, hi),
            high=np.clip(table["high"].to_numpy(np.float64), lo, hi),
        )


def band_types(n_full: np.ndarray, band: tuple[float, float]) -> np.ndarray:
    """Mask of the types whose count in the whole run lies in the band (the halves use the same types)."""
    return in_band(n_full, *band)


def half_values(
    stats: TokenStats,
    keep_ids: np.ndarray,
    cov: np.ndarray | None = None,
    sq_all: np.ndarray | None = None,
    sq_pos0: np.ndarray | None = None,
) -> pd.DataFrame:
    """Per layer: n, n_types, q, m, v, v_w, v_b (eqs. 8–15 over the types ``keep_ids`` that this
    ``stats`` holds), their ratios, and, when given, the anisotropy λ₁/Σλ and trace of ``cov``
    (L, d, d), the declared spectral columns (``geometry.spectral_columns``; NaN without ``cov``) and the share
    Σ‖x‖²(position 0) / Σ‖x‖²."""
    sub = stats.subset(np.isin(stats.token_ids, keep_ids))
    df = sub.corpus(1, np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        for part in ("m", "v", "v_w", "v_b"):
            df[f"{part}_over_q"] = df[part] / df["q"]
        df["v_w_over_v"] = df["v_w"] / df["v"]
    L = stats.num_layers
    an, tr = np.full(L, np.nan), np.full(L, np.nan)
    spec = {c: np.full(L, np.nan) for c in SPECTRAL_COLUMNS}
    if cov is not None:
        for li in range(L):
            lam = np.clip(np.linalg.eigvalsh(cov[li]), 0.0, None)
            tr[li] = lam.sum()
            an[li] = lam[-1] / tr[li] if tr[li] > 0 else np.nan
            for c, val in spectral_columns(lam).items():
                spec[c][li] = val
    df["anisotropy"], df["trace"] = an, tr
    for c, vals in spec.items():
        df[c] = vals
    with np.errstate(invalid="ignore", divide="ignore"):
        df["q_share_pos0"] = (
            np.asarray(sq_pos0, float) / np.asarray(sq_all, float) if sq_all is not None else np.full(L, np.nan)
        )
    return df


def split_rows(halves: pd.DataFrame, quantities=SPLIT_QUANTITIES) -> pd.DataFrame:
    """Interval rows from a ``halves_layer`` table (rows half = all / a / b per layer); a quantity whose column
    the table lacks (a run file written before the measure existed) has no rows."""
    rows = []
    by = {h: g.set_index("layer") for h, g in halves.groupby("half")}
    if not {"all", "a", "b"} <= set(by):
        return pd.DataFrame(columns=COLUMNS)
    full, a, b = by["all"], by["a"].reindex(by["all"].index), by["b"].reindex(by["all"].index)
    for qn in quantities:
        if qn not in full:
            continue
        lo, hi = split_half_interval(full[qn], a[qn], b[qn])
        for layer, val, l, h in zip(full.index, full[qn], lo, hi):
            if np.isfinite(val):
                rows.append((int(layer), qn, float(val), float(l), float(h), "split-half"))
    return pd.DataFrame(rows, columns=COLUMNS)


def bootstrap_rows(
    stats_q: np.ndarray, stats_m: np.ndarray, stats_v: np.ndarray, layers, *, seed: int = 0, resamples: int = RESAMPLES
) -> pd.DataFrame:
    """Interval rows of C.V.(Q), slope, R² per layer: point estimate on all band types, percentile
    bootstrap interval over types (arrays (L, T) of the band's types)."""
    q, m, v = (np.asarray(a, dtype=np.float64) for a in (stats_q, stats_m, stats_v))
    boot = bootstrap_tradeoff(q, m, v, resamples=resamples, seed=seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        cv = q.std(1) / q.mean(1) if q.shape[1] else np.full(q.shape[0], np.nan)
    slope, _, r2 = ols(m, v)
    point = {"cv_q": cv, "slope": slope, "r2": r2}
    rows = []
    for qn in BOOT_QUANTITIES:
        lo, hi = boot[qn]
        for li, layer in enumerate(layers):
            rows.append((int(layer), qn, float(point[qn][li]), float(lo[li]), float(hi[li]), "bootstrap-types"))
    return pd.DataFrame(rows, columns=COLUMNS)


def tradeoff_intervals(
    stats: TokenStats, band: tuple[float, float], *, seed: int = 0, resamples: int = RESAMPLES
) -> pd.DataFrame:
    """``bootstrap_rows`` over the types of ``stats`` in ``band``."""
    mask = stats.band(*band)
    return bootstrap_rows(
        stats.q[:, mask], stats.m[:, mask], stats.v[:, mask], stats.layer_index, seed=seed, resamples=resamples
    )


def interval_table(
    stats: TokenStats,
    band: tuple[float, float],
    halves: pd.DataFrame | None = None,
    *,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> pd.DataFrame:
    """All interval rows of a run: bootstrap over types + split-half (when ``halves`` is given)."""
    parts = [tradeoff_intervals(stats, band, seed=seed, resamples=resamples)]
    if halves is not None and len(halves):
        parts.append(split_rows(halves))
    return clip_to_range(pd.concat(parts, ignore_index=True))


def run_intervals(run, band: tuple[float, float] | None = None, *, stats: TokenStats | None = None) -> pd.DataFrame:
    """The intervals of a run (a ``runs.reader.Run``) for the figures: its stored ``intervals`` table
    when the band is the study's (the run file's); else the bootstrap over the band's types, computed
    now from ``stats`` (default ``run.stats()``); split-half rows only from the stored table."""
    from normvar_core.constants import STUDY_BAND

    band = tuple(band) if band is not None else STUDY_BAND  # type: ignore[assignment]  # two values
    stored = run.table("intervals") if "intervals" in run.table_names else None
    if stored is not None and np.allclose(band, STUDY_BAND):  # type: ignore[arg-type]  # set above
        return clip_to_range(stored)
    live = tradeoff_intervals(stats if stats is not None else run.stats(), band)  # type: ignore[arg-type]  # set above
    if stored is not None:
        live = pd.concat([live, stored[stored["method"] == "split-half"]], ignore_index=True)
    return clip_to_range(live)


__all__ = [
    "run_intervals",
    "SPLIT_QUANTITIES",
    "BOOT_QUANTITIES",
    "COLUMNS",
    "RANGES",
    "clip_to_range",
    "band_types",
    "half_values",
    "split_rows",
    "bootstrap_rows",
    "tradeoff_intervals",
    "interval_table",
]
