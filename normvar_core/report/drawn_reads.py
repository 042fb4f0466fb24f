"""What the deck's Frequency and Token clouds slides say, read from the points they draw, by robust summaries over
every drawn point or cloud (a rank correlation, medians), never one extreme point:

- the frequency scatter (``frequency_read``): per panel Z ∈ {M, V, Q}, Spearman's ρ of the drawn Z(X_t) against
  n_t over the drawn types (a rank statistic: the same on the panel's log axes), its direction word following the
  sign of the ρ it reports, and "no clear trend" when |ρ| < ``FLAT`` or the panel's fitted line runs the other way;
- the token clouds (``cloud_read``): per drawn cloud, in the drawn plane with the projected origin at (0, 0), the
  distance ‖c‖ of its centre c from the origin and its spread (the root mean ‖p − c‖²: mean ‖p‖² = ‖c‖² + mean
  ‖p − c‖², the drawn M and V); each one's medians over the rarer and the more frequent half of the drawn types
  and its Spearman's ρ against n_t, and the rarest and the most frequent drawn type each with its own numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from normvar_core.report.run_figures import MISSING, num

FLAT = 0.1
"""|Spearman ρ| below this reads as no clear trend."""


def spearman(x, y) -> float:
    """Spearman's rank correlation of ``x`` and ``y`` over the pairs where both are finite; NaN with fewer than three
    pairs or a constant side."""
    from scipy.stats import spearmanr

    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
        return float("nan")
    return float(spearmanr(a[ok], b[ok]).statistic)


def rho_text(rho: float) -> str:
    """ρ as the takeaways print it: signed, two decimals ("+0.31", "-0.45"), or "—"."""
    return MISSING if not math.isfinite(rho) else f"{rho:+.2f}"


def direction(rho: float, up: str, down: str, flat: str, *, agrees: bool = True) -> str:
    """``up`` when ρ ≥ ``FLAT``, ``down`` when ρ ≤ −``FLAT``, else (or when ``agrees`` is False: another drawn
    summary runs the other way) ``flat``. The word is decided by the ρ printed beside it, rounded as printed."""
    r = round(rho, 2) if math.isfinite(rho) else float("nan")
    if not math.isfinite(r) or not agrees or abs(r) < FLAT:
        return flat
    return up if r > 0 else down


def frequency_read(points: pd.DataFrame, regs: pd.DataFrame, layer: int) -> tuple[str, pd.DataFrame]:
    """The Frequency slide's reading of its scatter at ``layer``: ``points`` are the drawn types (n, m, v, q: the
    figure's ``tradeoff_points``), ``regs`` the fitted lines it draws (``analyses.frequency_regressions``). Returns
    the clause "over the 1,234 drawn types, Spearman's ρ against n_t: M falls (ρ -0.45), V shows no clear trend
    (ρ +0.03), Q falls (ρ -0.31)" and the table of each panel's ρ and fitted slope (for the notes)."""
    n = points["n"].to_numpy(dtype=np.float64)
    rows, said = [], []
    for name in ("M", "V", "Q"):
        rho = spearman(n, points[name.lower()])
        fit = regs[(regs["layer"] == layer) & (regs["quantity"] == name)]["slope"]
        slope = float(fit.iloc[0]) if len(fit) else float("nan")
        agrees = not math.isfinite(slope) or slope == 0 or (slope > 0) == (rho > 0)
        word = direction(rho, "rises", "falls", "shows no clear trend", agrees=agrees)
        said.append(f"{name} {word} (ρ {rho_text(rho)})")
        rows.append({"quantity": name, "spearman_rho": rho, "slope": slope, "types": int(np.isfinite(n).sum())})
    clause = f"over the {len(points):,} drawn types, Spearman's ρ against n_t: " + ", ".join(said)
    return clause, pd.DataFrame(rows)


def cloud_shares(coords: pd.DataFrame) -> pd.DataFrame:
    """Per drawn cloud (``coords``: a ``clouds.pca_cloud``'s points, origin at (0, 0)), ordered by n_t: token, n,
    points, centre (‖c‖), spread (the root mean ‖p − c‖²) and share (‖c‖² / mean ‖p‖²)."""
    out = []
    for tok, part in coords.groupby(coords["token"].astype(str), sort=False):
        p = part[["pc1", "pc2"]].to_numpy(dtype=np.float64)
        c = p.mean(axis=0)
        sq = float((p**2).sum(axis=1).mean())
        out.append(
            {
                "token": tok,
                "n": int(part["n"].iloc[0]),
                "points": len(p),
                "centre": float(np.sqrt(c @ c)),
                "spread": float(np.sqrt(((p - c) ** 2).sum(axis=1).mean())),
                "share": float(c @ c / sq) if sq > 0 else float("nan"),
            }
        )
    return pd.DataFrame(out).sort_values(["n", "token"], kind="stable").reset_index(drop=True)


def _halves(t: pd.DataFrame, col: str, rho_name: str = "Spearman's ρ against n_t") -> str:
    """ "median 2.2 vs 3.6 (Spearman's ρ against n_t +0.55: grows with n_t)": ``col``'s median over the rarer and
    over the more frequent half of the clouds ``t`` (ordered by n_t; the middle one of an odd count left out), and
    its ρ against n_t, whose word needs the medians to run the same way."""
    half = len(t) // 2
    rare, freq = t[col].iloc[:half].median(), t[col].iloc[len(t) - half :].median()
    rho = spearman(t["n"], t[col])
    agrees = math.isfinite(freq - rare) and (freq - rare) * rho > 0
    word = direction(rho, "grows with n_t", "shrinks with n_t", "no clear trend with n_t", agrees=agrees)
    return f"median {num(rare, '.3g')} vs {num(freq, '.3g')} ({rho_name} {rho_text(rho)}: {word})"


def cloud_read(coords: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The Token clouds slide's reading of its drawn clouds (``cloud_shares``): the distance of a cloud's centre
    from the drawn origin and its spread, each as its median over the rarer and over the more frequent half of the
    drawn types with Spearman's ρ against n_t (``_halves``), then the rarest and the most frequent drawn type, each
    with its own distance and spread. Returns the sentence and the per-cloud table (for the notes)."""
    t = cloud_shares(coords)
    k = len(t)
    if k < 2:
        return f"{MISSING} (fewer than two clouds drawn)", t
    half = k // 2

    def own(row) -> str:
        dist, spread = num(row["centre"], ".3g"), num(row["spread"], ".3g")
        return f"{row['token']} (n={int(row['n'])}): distance {dist}, spread {spread}"

    return (
        f"over the {k} drawn clouds, the rarer {half} vs the more frequent {half}: the centre's distance from the "
        f"origin (×), {_halves(t, 'centre')}; the spread, {_halves(t, 'spread', 'ρ')}; {own(t.iloc[0])}; "
        f"{own(t.iloc[-1])}",
        t,
    )


__all__ = ["FLAT", "spearman", "rho_text", "direction", "frequency_read", "cloud_shares", "cloud_read"]
