"""The verdict rules of Yamagiwa & Shimodaira's and the Gaussian-geometry comment's claims on the moments
(``findings.CLAIMS`` 1–6): the identity,
the intermediate C.V. minimum, the trade-off slope, the depth trends of the shares, and the Gaussian null, each a
function of the run's ``RunView``; the bootstrap over the band's types that claims 2, 3 and 6 share
(``bootstrap_band``) and the point estimates per layer, computed once per view (``shared``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from normvar_core.constants import STUDY_BAND
from normvar_core.stats.bootstrap import bootstrap_tradeoff, split_half_interval
from normvar_core.stats.claims import (
    CROSS_TOL,
    DIP,
    IDENTITY_TOL,
    R2_MIN,
    RHO_MIN,
    SLOPE_TOL,
    STRADDLES,
    SUPPORT_MIN,
    UNSURE,
    Finding,
    RunView,
    finding,
    finite_interval,
    fmt,
    spearman,
)


def identity(rv: RunView) -> Finding:
    """Claim 1 (002 eq. 1): Q(X_t) = M(X_t) + V(X_t), max |Q − M − V| / Q ≤ IDENTITY_TOL over every
    (layer, type); and, on model runs with geometry, corpus Q(X) = E‖x‖² = (mean ‖x‖)² (1 + C.V.(‖x‖)²) of the
    geometry's own stream to CROSS_TOL."""
    with np.errstate(invalid="ignore", divide="ignore"):
        resid = np.abs(rv.q - rv.m - rv.v) / np.where(rv.q > 0, rv.q, 1.0)
    worst = float(np.nanmax(resid)) if resid.size else float("nan")
    if not np.isfinite(worst):
        return finding("identity", "untestable", why="the run holds no token types")
    cross, why_cross = float("nan"), "no independent stream to compare (no geometry, or a null run)"
    g = rv.geometry
    if g is not None and not rv.is_null and {"norm_mean", "norm_cv"} <= set(g.columns):
        ls = rv.layer_stats.set_index("layer")
        gi = g.set_index("layer")
        e_sq = gi["norm_mean"] ** 2 * (1.0 + gi["norm_cv"] ** 2)
        rel = (ls["q"].reindex(gi.index) - e_sq).abs() / e_sq
        cross = float(rel.max())
        why_cross = f"corpus Q(X) of the moments vs E‖x‖² of the geometry's own stream: max rel. diff {fmt(cross)}"
    ok = worst <= IDENTITY_TOL and (not np.isfinite(cross) or cross <= CROSS_TOL)
    why = f"max |Q − M − V| / Q over {rv.q.size:,} (layer, type) cells = {fmt(worst)}; {why_cross}"
    return finding(
        "identity",
        "holds" if ok else "fails",
        value=worst,
        why=why,
        details={"max_rel_residual": worst, "cross_check": cross},
    )


def bootstrap_band(rv: RunView, resamples: int, seed: int) -> dict:
    """The bootstrap over the band's types (``stats.bootstrap.bootstrap_tradeoff``): C.V. of Q(X_t), slope and R²
    per layer, with their replicates."""
    mask = rv.band()
    return bootstrap_tradeoff(rv.q[:, mask], rv.m[:, mask], rv.v[:, mask], resamples=resamples, seed=seed)


def point_estimates(rv: RunView) -> pd.DataFrame:
    """Per layer over the band's types: C.V.(Q(X_t)) = std / mean, and the OLS slope and R² of V(X_t) on
    M(X_t) (002 Fig. 4)."""
    from normvar_core.stats.analyses import ols

    mask = rv.band()
    q, m, v = rv.q[:, mask], rv.m[:, mask], rv.v[:, mask]
    with np.errstate(invalid="ignore", divide="ignore"):
        cv = q.std(1) / q.mean(1) if mask.any() else np.full(len(rv.layers), np.nan)
    slope, _, r2 = ols(m, v)
    return pd.DataFrame({"layer": rv.layers, "cv_q": cv, "slope": slope, "r2": r2})


def shared(rv: RunView) -> tuple[pd.DataFrame, dict, Finding, int | None]:
    """What claims 2, 3 and 6 share, computed once per view (kept in ``rv.memo``): the point estimates per layer,
    the bootstrap over the band's types (``rv.resamples``, ``rv.seed``; none with fewer than 3 band types), and
    claim 2's finding with the index of its C.V.-minimum layer."""
    if "tradeoff" not in rv.memo:
        pt = point_estimates(rv)
        boot = bootstrap_band(rv, rv.resamples, rv.seed) if rv.band().sum() >= 3 else {"replicates": {}}
        rv.memo["tradeoff"] = (pt, boot, *_cv_minimum(rv, pt, boot))
    return rv.memo["tradeoff"]


def cv_min_intermediate(rv: RunView) -> Finding:
    """Claim 2 (002 §5.2, Fig. 4): the smallest C.V.(Q(X_t)) is at an intermediate layer and, in ≥ SUPPORT_MIN of
    the resamples, an intermediate C.V. is below DIP × both ends' (``_cv_minimum``, through ``shared``)."""
    return shared(rv)[2]


def _cv_minimum(rv: RunView, pt: pd.DataFrame, boot: dict) -> tuple[Finding, int | None]:
    """Claim 2's finding from the point estimates and the bootstrap, and the index of the C.V.-minimum layer."""
    nb = int(rv.band().sum())
    if nb < 3:
        return finding(
            "cv_min_intermediate", "untestable", why=f"{nb} types in the band 10 ≤ n_t ≤ 1e5: compute a larger corpus"
        ), None
    cv = pt["cv_q"].to_numpy()
    if len(rv.layers) < 3 or not any(rv.interior(l) for l in rv.layers) or not np.isfinite(cv).any():
        return finding(
            "cv_min_intermediate",
            "untestable",
            why="fewer than 3 stored layers, or none intermediate: compute with all layers",
        ), None
    li = int(np.nanargmin(cv))
    layer = int(rv.layers[li])
    reps = np.where(np.isfinite(boot["replicates"]["cv_q"]), boot["replicates"]["cv_q"], np.inf)
    inner = np.array([rv.interior(l) for l in rv.layers])
    # the sampling support of a dip: resamples in which the smallest intermediate C.V. is below both ends
    share = float(np.mean(reps[:, inner].min(1) < DIP * np.minimum(reps[:, 0], reps[:, -1])))
    lo, hi = boot["cv_q"][0][li], boot["cv_q"][1][li]
    ok = rv.interior(layer) and share >= SUPPORT_MIN
    prof = ", ".join(f"{x:.3g}" for x in cv)
    why = (
        f"smallest C.V. {fmt(cv[li])} at layer {layer} of 0..{rv.num_hidden_states - 1} over {nb:,} band types; "
        f"an intermediate layer is below {DIP:g} × both ends in {share:.1%} of {reps.shape[0]:,} bootstrap resamples "
        f"(holds when intermediate and ≥ {SUPPORT_MIN:.0%}); C.V. per layer: {prof}"
    )
    return finding(
        "cv_min_intermediate",
        "holds" if ok else "fails",
        value=float(cv[li]),
        interval=finite_interval(lo, hi),
        layer=layer,
        why=why,
        details={"bootstrap_share_dip": share, "band_types": nb},
    ), li


def tradeoff_slope(rv: RunView) -> Finding:
    """Claim 3 (002 Fig. 4, §5.2): at the intermediate C.V. minimum the slope's 95 % interval lies within
    −1 ± SLOPE_TOL and R²'s above R2_MIN (post-LN encoders; untestable for other placements)."""
    pt, boot, cvf, li = shared(rv)
    dip = cvf.verdict == "holds"
    if li is None:
        return finding("tradeoff_slope", "untestable", why="no C.V.-minimum layer (see cv_min_intermediate)")
    layer = int(rv.layers[li])
    s, r2 = float(pt["slope"].iloc[li]), float(pt["r2"].iloc[li])
    lo, hi = boot["slope"][0][li], boot["slope"][1][li]
    r_lo, r_hi = boot["r2"][0][li], boot["r2"][1][li]
    nums = f"slope {fmt(s)} [{fmt(lo)}, {fmt(hi)}], R² {fmt(r2)} [{fmt(r_lo)}, {fmt(r_hi)}] at layer {layer}"
    det = {"r2": r2, "r2_low": float(r_lo), "r2_high": float(r_hi)}
    if rv.norm_placement != "post":
        return finding(
            "tradeoff_slope",
            "untestable",
            value=s,
            interval=finite_interval(lo, hi),
            layer=layer,
            why=f"{nums}; the study claims this for post-LN encoders, this model is "
            f"{rv.norm_placement or 'of unknown placement'}-LN (GPT-2: ≈ −0.2, R² ≈ 0.5)",
            details=det,
        )
    inside = -1.0 - SLOPE_TOL <= lo and hi <= -1.0 + SLOPE_TOL and r_lo >= R2_MIN
    outside = hi < -1.0 - SLOPE_TOL or lo > -1.0 + SLOPE_TOL or r_hi < R2_MIN
    verdict = "holds" if inside else "fails" if outside else UNSURE
    rule = (
        f"holds when this layer is an intermediate C.V. minimum (cv_min_intermediate), the slope's interval lies "
        f"within −1 ± {SLOPE_TOL} and R²'s interval above {R2_MIN}; fails when either lies beyond"
    )
    if verdict == UNSURE:
        rule += f" — {STRADDLES}"
    if not dip:
        verdict = "fails"
        rule = (
            "fails: no intermediate C.V. minimum (cv_min_intermediate fails), so no layer where the study expects it; "
            + rule
        )
    return finding(
        "tradeoff_slope",
        verdict,
        value=s,
        interval=finite_interval(lo, hi),
        layer=layer,
        why=f"{nums}; {rule}",
        details=det,
    )


def _ratio_curves(rv: RunView, cols) -> dict | None:
    """{half: DataFrame indexed by layer} from the halves table, else {'all': live decomposition}."""
    if rv.halves is not None and len(rv.halves):
        return {h: g.set_index("layer").sort_index() for h, g in rv.halves.groupby("half")}
    return None


def vw_share_grows(rv: RunView) -> Finding:
    """Claim 4 (002 Fig. 6): V_W(X)/V(X) grows with depth (``depth_trend``)."""
    return depth_trend(rv, "vw_share_grows", [("v_w_over_v", +1)])


def m_grows_vb_shrinks(rv: RunView) -> Finding:
    """Claim 5 (002 §5.3, Fig. 5): M(X)/Q(X) grows and V_B(X)/Q(X) shrinks with depth (``depth_trend``)."""
    return depth_trend(rv, "m_grows_vb_shrinks", [("m_over_q", +1), ("v_b_over_q", -1)])


RATIO_WORDS = {"v_w_over_v": "V_W(X)/V(X)", "m_over_q": "M(X)/Q(X)", "v_b_over_q": "V_B(X)/Q(X)"}
"""The depth trends' ratios in words (a finding names no raw column)."""


def depth_trend(rv: RunView, cid: str, parts) -> Finding:
    """Shared rule of vw_share_grows / m_grows_vb_shrinks: parts = [(column, sign)]."""
    if len(rv.layers) < 3:
        return finding(cid, "untestable", why="fewer than 3 stored layers")
    curves = _ratio_curves(rv, [p for p, _ in parts])
    if curves is None:
        from normvar_core.stats.analyses import decomposition

        df = decomposition(rv.run.stats(), *STUDY_BAND).set_index("layer").sort_index()
        df["v_w_over_v"] = df["v_w"] / df["v"]
        curves = {"all": df}
    full = curves["all"]
    if full["n_types"].max() < 2 if "n_types" in full else False:
        return finding(cid, "untestable", why="fewer than 2 types in the band")
    ok, bits, det = True, [], {}
    value = interval = None
    for col, sign in parts:
        y = full[col].to_numpy(float)
        delta = float(y[-1] - y[0])
        rho = spearman(np.asarray(full.index, float), y)
        iv = None
        if {"a", "b"} <= set(curves):
            da = float(curves["a"][col].iloc[-1] - curves["a"][col].iloc[0])
            db = float(curves["b"][col].iloc[-1] - curves["b"][col].iloc[0])
            iv = finite_interval(*split_half_interval(delta, da, db))
        good = np.isfinite(rho) and sign * delta > 0 and sign * rho >= RHO_MIN
        ok &= bool(good)
        ivs = f" [{fmt(iv[0])}, {fmt(iv[1])}]" if iv else " (no split halves: no interval)"
        bits.append(f"{RATIO_WORDS.get(col, col)}: last − first = {fmt(delta)}{ivs}, Spearman ρ = {fmt(rho, 2)}")
        det[f"{col}_delta"], det[f"{col}_rho"] = delta, rho
        if value is None:
            value, interval = delta, iv
    need = " and ".join(f"{'Δ > 0, ρ ≥ ' if s > 0 else 'Δ < 0, ρ ≤ −'}{RHO_MIN}" for _, s in parts)
    return finding(
        cid,
        "holds" if ok else "fails",
        value=value,
        interval=interval,
        why="; ".join(bits) + f" (holds when {need})",
        details=det,
    )


def null_vs_run(rv: RunView) -> Finding:
    """Claim 6 (003): an isotropic Gaussian null N(0, Q(X)/d I) of the same types and counts reproduces the
    trade-off at the C.V.-minimum layer: the paired bootstrap interval of C.V._run / C.V._null holds 1 and that of
    slope_run − slope_null holds 0."""
    from normvar_core.stats.null import null_stats
    from normvar_core.stats.tokenstats import TokenStats

    if rv.is_null:
        return finding("null_vs_run", "untestable", why="this run is itself a Gaussian null")
    pt, _, _, li = shared(rv)
    resamples, seed = rv.resamples, rv.seed
    mask = rv.band()
    if mask.sum() < 3 or not len(rv.layers):
        return finding("null_vs_run", "untestable", why="fewer than 3 types in the band")
    li = li if li is not None else len(rv.layers) // 2
    layer = int(rv.layers[li])
    d = int(rv.layer_stats.attrs.get("dim", 0)) or None
    if d is None:
        return finding("null_vs_run", "untestable", why="the run's dimension is unknown")
    one = TokenStats(
        token_ids=rv.token_ids,
        n=rv.n,
        mean=np.broadcast_to(np.float32(0), (1, rv.n.size, d)),
        q=rv.q[li : li + 1],
        m=rv.m[li : li + 1],
        v=rv.v[li : li + 1],
        layer_index=np.array([layer]),
    )
    totals = rv.layer_stats[rv.layer_stats["layer"] == layer]
    nul = null_stats("isotropic", one, totals, seed=seed)
    nb = bootstrap_tradeoff(nul.q[:, mask], nul.m[:, mask], nul.v[:, mask], resamples=resamples, seed=seed)
    rb = bootstrap_tradeoff(
        rv.q[li : li + 1, mask], rv.m[li : li + 1, mask], rv.v[li : li + 1, mask], resamples=resamples, seed=seed
    )  # same seed, same T: the same resamples (paired)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = rb["replicates"]["cv_q"][:, 0] / nb["replicates"]["cv_q"][:, 0]
        sdiff = rb["replicates"]["slope"][:, 0] - nb["replicates"]["slope"][:, 0]
        q_n = nul.q[0, mask]
        cv_null = float(q_n.std() / q_n.mean())
    from normvar_core.stats.analyses import ols

    s_null, _, r2_null = ols(nul.m[:, mask], nul.v[:, mask])
    cv_run, s_run = float(pt["cv_q"].iloc[li]), float(pt["slope"].iloc[li])
    r_lo, r_hi = np.nanquantile(ratio, [0.025, 0.975])
    s_lo, s_hi = np.nanquantile(sdiff, [0.025, 0.975])
    same = (r_lo <= 1.0 <= r_hi) and (s_lo <= 0.0 <= s_hi)
    why = (
        f"layer {layer}: C.V. run {fmt(cv_run)} vs null {fmt(cv_null)} (ratio {fmt(cv_run / cv_null)} "
        f"[{fmt(r_lo)}, {fmt(r_hi)}]); slope run {fmt(s_run)} vs null {fmt(float(s_null[0]))} (difference "
        f"[{fmt(s_lo)}, {fmt(s_hi)}]); isotropic null N(0, Q(X)/d I), seed {seed}, paired bootstrap over types"
    )
    return finding(
        "null_vs_run",
        "holds" if same else "fails",
        value=cv_run / cv_null,
        interval=finite_interval(r_lo, r_hi),
        layer=layer,
        why=why,
        details={
            "cv_run": cv_run,
            "cv_null": cv_null,
            "slope_run": s_run,
            "slope_null": float(s_null[0]),
            "r2_null": float(r2_null[0]),
            "slope_diff_low": float(s_lo),
            "slope_diff_high": float(s_hi),
        },
    )


__all__ = [
    "identity",
    "bootstrap_band",
    "point_estimates",
    "shared",
    "cv_min_intermediate",
    "tradeoff_slope",
    "vw_share_grows",
    "m_grows_vb_shrinks",
    "depth_trend",
    "null_vs_run",
]
