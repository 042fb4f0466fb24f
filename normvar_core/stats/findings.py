"""The claims of seeds 002, 003 and 004, each tested on one run, with its number, its interval and a
verdict — one function (``findings``) for the CLI, the Findings page and the deck.

Verdicts: ``holds``, ``fails``, ``untestable`` (with why). Intervals: bootstrap over token types
(``stats.bootstrap``: 1,000 seeded resamples, percentile) for the per-type statistics; split-half
(θ ± 1.96 |θ_A − θ_B| / 2, the run's ``halves_layer`` table) for the corpus-level and geometry
quantities; for TwoNN the spread over seed 004's batches (mean ± 1.96 std / √batches).

Claims, in this order (stable ids), with the rule that decides each verdict:

1. ``identity`` (002 eq. 1): Q(X_t) = M(X_t) + V(X_t) for every type: max |Q − M − V| / Q ≤ 1e-12; and
   the corpus Q(X) of the moments equals E‖x‖² of the geometry's separate stream to 1e-9 (model runs).
2. ``cv_min_intermediate`` (002 §5.2, Fig. 4): the layer of smallest C.V.(Q(X_t)) over the band's
   types (10 ≤ n_t ≤ 1e5) is neither the first nor the last hidden state of the model, and the dip is
   a clear, supported dip: in ≥ ``SUPPORT_MIN`` of the bootstrap resamples the smallest intermediate
   C.V. is below ``DIP`` × both end layers' (a flat profile — a Gaussian null's — puts its minimum anywhere).
3. ``tradeoff_slope`` (002 Fig. 4, §5.2): in that layer (an intermediate C.V. minimum) the slope's 95 %
   interval lies within −1 ± ``SLOPE_TOL`` and R²'s interval above ``R2_MIN`` — the study's claim
   for post-LN encoders (BERT, RoBERTa); untestable on other placements (GPT-2: ≈ −0.2, R² ≈ 0.5).
4. ``vw_share_grows`` (002 Fig. 6): V_W(X)/V(X) grows with depth: last − first > 0 and Spearman
   ρ(layer, ratio) ≥ ``RHO_MIN``.
5. ``m_grows_vb_shrinks`` (002 §5.3, Fig. 5): M(X)/Q(X) grows (Δ > 0, ρ ≥ RHO_MIN) and V_B(X)/Q(X)
   shrinks (Δ < 0, ρ ≤ −RHO_MIN) with depth.
6. ``null_vs_run`` (003): an isotropic Gaussian null of the same types, counts and Q(X) per layer
   reproduces the run's trade-off at the C.V.-minimum layer: the paired bootstrap interval of
   C.V._run / C.V._null contains 1 and that of slope_run − slope_null contains 0.
7. ``anisotropy_profile`` (004 §4.1, Fig. 1): λ₁/Σλ across layers is flat in encoders
   ((max − min) / mean ≤ ``FLAT_MAX``) and bell-shaped in decoders (an interior layer at least
   ``BELL_MIN`` × both ends).
8. ``id_profile`` (004, Fig. 2 read across layers as the issue asks): the TwoNN dimension peaks at an
   interior layer (above the first and the last).
9. ``position0_share`` (ENVIRONMENT.md on massive activations; 004 / 003 on outliers): where outliers
   dominate (max |h| ≥ ``OUTLIER_MIN`` × the median in some layer), position 0 carries ≥ half of Q(X)
   in the most dominated layer.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from normvar_core.constants import STUDY_BAND
from normvar_core.stats.bootstrap import RESAMPLES, Z95, bootstrap_tradeoff, split_half_interval
from normvar_core.stats.tokenstats import in_band

SLOPE_TOL = 0.2
R2_MIN = 0.8
RHO_MIN = 0.5
FLAT_MAX = 0.5
BELL_MIN = 1.25
OUTLIER_MIN = 100.0
SUPPORT_MIN = 0.95
DIP = 0.8
IDENTITY_TOL = 1e-12
CROSS_TOL = 1e-9

CLAIMS = (
    ("identity", "002", "Q(X_t) = M(X_t) + V(X_t) for every type, to machine precision (eq. 1)"),
    ("cv_min_intermediate", "002", "C.V. of Q(X_t) is smallest in an intermediate layer (§5.2, Fig. 4)"),
    ("tradeoff_slope", "002", "in that layer V(X_t) on M(X_t) has slope ≈ −1 and high R² (post-LN encoders, Fig. 4)"),
    ("vw_share_grows", "002", "V_W(X)/V(X) grows with depth (Fig. 6)"),
    ("m_grows_vb_shrinks", "002", "M(X)/Q(X) grows and V_B(X)/Q(X) shrinks with depth (§5.3, Fig. 5)"),
    ("null_vs_run", "003", "random Gaussian vectors of the same shape reproduce the trade-off (C.V. of Q(X_t), slope)"),
    ("anisotropy_profile", "004", "anisotropy is flat across layers in encoders, bell-shaped in decoders (Fig. 1)"),
    ("id_profile", "004", "intrinsic dimension (TwoNN) rises then falls across layers"),
    ("position0_share", "ENV", "where outliers dominate, position 0 carries most of Q(X)"),
)
CLAIM_IDS = tuple(c[0] for c in CLAIMS)


@dataclass
class Finding:
    id: str
    claim: str
    seed: str
    verdict: str                    # holds | fails | untestable
    value: float | None = None
    interval: list | None = None    # [low, high] or None
    layer: int | None = None
    why: str = ""
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["value"] = _num(self.value)
        d["interval"] = [_num(x) for x in self.interval] if self.interval is not None else None
        d["details"] = {k: _num(v) if isinstance(v, (float, np.floating)) else v for k, v in self.details.items()}
        return d


def _num(x):
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def _f(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}g}"


def _interval(lo, hi) -> list | None:
    return [float(lo), float(hi)] if np.isfinite(lo) and np.isfinite(hi) else None


def spearman(x, y) -> float:
    """Spearman's ρ (ranks by argsort; ties are rare for real-valued curves)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3:
        return float("nan")
    rx, ry = np.argsort(np.argsort(x[ok])), np.argsort(np.argsort(y[ok]))
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / den) if den > 0 else float("nan")


# ---------------------------------------------------------------------------------------- inputs
@dataclass
class RunView:
    """What the claims read from a run (a ``runs.reader.Run``), gathered once."""

    name: str
    layers: list
    num_hidden_states: int
    is_decoder: bool
    norm_placement: str
    is_null: bool
    exclude_position0: bool
    token_ids: np.ndarray
    n: np.ndarray
    q: np.ndarray
    m: np.ndarray
    v: np.ndarray
    layer_stats: pd.DataFrame
    halves: pd.DataFrame | None
    geometry: pd.DataFrame | None
    outliers: pd.DataFrame | None

    @classmethod
    def of(cls, run) -> "RunView":
        L = len(run.layers)
        tabs = [run.token_table(layer) for layer in run.layers]
        first = tabs[0]
        grid = lambda c: np.stack([t[c].to_numpy(np.float64) for t in tabs]) if L else np.zeros((0, 0))  # noqa: E731
        notes = run.meta.get("notes") or {}
        opts = run.meta.get("options") or {}
        get = lambda t: run.table(t) if t in run.table_names else None  # noqa: E731
        return cls(name=run.name, layers=list(run.layers), num_hidden_states=run.num_hidden_states,
                   is_decoder=bool(notes.get("is_decoder", False)),
                   norm_placement=str(run.meta.get("norm_placement") or ""),
                   is_null=str(run.meta.get("source") or "model").startswith("null:"),
                   exclude_position0=bool(opts.get("exclude_position0", False)),
                   token_ids=first["token_id"].to_numpy(np.int64), n=first["n"].to_numpy(np.int64),
                   q=grid("q"), m=grid("m"), v=grid("v"), layer_stats=run.layer_stats(),
                   halves=get("halves_layer"), geometry=get("layer_geometry"), outliers=get("layer_outliers"))

    def band(self) -> np.ndarray:
        return in_band(self.n, *STUDY_BAND)

    def interior(self, layer: int) -> bool:
        return 0 < int(layer) < self.num_hidden_states - 1


# ---------------------------------------------------------------------------------------- claims
def _identity(rv: RunView) -> Finding:
    with np.errstate(invalid="ignore", divide="ignore"):
        resid = np.abs(rv.q - rv.m - rv.v) / np.where(rv.q > 0, rv.q, 1.0)
    worst = float(np.nanmax(resid)) if resid.size else float("nan")
    if not np.isfinite(worst):
        return Finding(*_c("identity"), "untestable", why="the run holds no token types")
    cross, why_cross = float("nan"), "no independent stream to compare (no geometry, or a null run)"
    g = rv.geometry
    if g is not None and not rv.is_null and {"norm_mean", "norm_cv"} <= set(g.columns):
        ls = rv.layer_stats.set_index("layer")
        gi = g.set_index("layer")
        e_sq = gi["norm_mean"] ** 2 * (1.0 + gi["norm_cv"] ** 2)
        rel = (ls["q"].reindex(gi.index) - e_sq).abs() / e_sq
        cross = float(rel.max())
        why_cross = f"corpus Q(X) of the moments vs E‖x‖² of the geometry's own stream: max rel. diff {_f(cross)}"
    ok = worst <= IDENTITY_TOL and (not np.isfinite(cross) or cross <= CROSS_TOL)
    why = f"max |Q − M − V| / Q over {rv.q.size:,} (layer, type) cells = {_f(worst)}; {why_cross}"
    return Finding(*_c("identity"), "holds" if ok else "fails", value=worst, why=why,
                   details={"max_rel_residual": worst, "cross_check": cross})


def _c(cid: str) -> tuple:
    for i, s, c in CLAIMS:
        if i == cid:
            return i, c, s
    raise KeyError(cid)


def _boot(rv: RunView, resamples: int, seed: int) -> dict:
    mask = rv.band()
    return bootstrap_tradeoff(rv.q[:, mask], rv.m[:, mask], rv.v[:, mask], resamples=resamples, seed=seed)


def _point(rv: RunView) -> pd.DataFrame:
    from normvar_core.stats.analyses import _ols

    mask = rv.band()
    q, m, v = rv.q[:, mask], rv.m[:, mask], rv.v[:, mask]
    with np.errstate(invalid="ignore", divide="ignore"):
        cv = q.std(1) / q.mean(1) if mask.any() else np.full(len(rv.layers), np.nan)
    slope, _, r2 = _ols(m, v)
    return pd.DataFrame({"layer": rv.layers, "cv_q": cv, "slope": slope, "r2": r2})


def _cv_min(rv: RunView, pt: pd.DataFrame, boot: dict) -> tuple[Finding, int | None]:
    nb = int(rv.band().sum())
    if nb < 3:
        return Finding(*_c("cv_min_intermediate"), "untestable",
                       why=f"{nb} types in the band 10 ≤ n_t ≤ 1e5: compute a larger corpus"), None
    cv = pt["cv_q"].to_numpy()
    if len(rv.layers) < 3 or not any(rv.interior(l) for l in rv.layers) or not np.isfinite(cv).any():
        return Finding(*_c("cv_min_intermediate"), "untestable",
                       why="fewer than 3 stored layers, or none intermediate: compute with all layers"), None
    li = int(np.nanargmin(cv))
    layer = int(rv.layers[li])
    reps = np.where(np.isfinite(boot["replicates"]["cv_q"]), boot["replicates"]["cv_q"], np.inf)
    inner = np.array([rv.interior(l) for l in rv.layers])
    # the sampling support of a dip: resamples in which the smallest intermediate C.V. is below both ends
    share = float(np.mean(reps[:, inner].min(1) < DIP * np.minimum(reps[:, 0], reps[:, -1])))
    lo, hi = boot["cv_q"][0][li], boot["cv_q"][1][li]
    ok = rv.interior(layer) and share >= SUPPORT_MIN
    prof = ", ".join(f"{x:.3g}" for x in cv)
    why = (f"smallest C.V. {_f(cv[li])} at layer {layer} of 0..{rv.num_hidden_states - 1} over {nb:,} band types; "
           f"an intermediate layer is below {DIP:g} × both ends in {share:.1%} of {reps.shape[0]:,} bootstrap resamples "
           f"(holds when intermediate and ≥ {SUPPORT_MIN:.0%}); C.V. per layer: {prof}")
    return Finding(*_c("cv_min_intermediate"), "holds" if ok else "fails", value=float(cv[li]),
                   interval=_interval(lo, hi), layer=layer, why=why,
                   details={"bootstrap_share_dip": share, "band_types": nb}), li


def _tradeoff(rv: RunView, pt: pd.DataFrame, boot: dict, li: int | None, dip: bool) -> Finding:
    if li is None:
        return Finding(*_c("tradeoff_slope"), "untestable", why="no C.V.-minimum layer (see cv_min_intermediate)")
    layer = int(rv.layers[li])
    s, r2 = float(pt["slope"].iloc[li]), float(pt["r2"].iloc[li])
    lo, hi = boot["slope"][0][li], boot["slope"][1][li]
    r_lo, r_hi = boot["r2"][0][li], boot["r2"][1][li]
    nums = f"slope {_f(s)} [{_f(lo)}, {_f(hi)}], R² {_f(r2)} [{_f(r_lo)}, {_f(r_hi)}] at layer {layer}"
    det = {"r2": r2, "r2_low": float(r_lo), "r2_high": float(r_hi)}
    if rv.norm_placement != "post":
        return Finding(*_c("tradeoff_slope"), "untestable", value=s, interval=_interval(lo, hi), layer=layer,
                       why=f"{nums}; the study claims this for post-LN encoders, this model is "
                           f"{rv.norm_placement or 'of unknown placement'}-LN (GPT-2: ≈ −0.2, R² ≈ 0.5)", details=det)
    ok = dip and -1.0 - SLOPE_TOL <= lo and hi <= -1.0 + SLOPE_TOL and r_lo >= R2_MIN
    rule = (f"holds when this layer is an intermediate C.V. minimum (cv_min_intermediate), the slope's interval lies "
            f"within −1 ± {SLOPE_TOL} and R²'s interval above {R2_MIN}")
    if not dip:
        rule = "fails: no intermediate C.V. minimum (cv_min_intermediate fails), so no layer where the study expects it; " + rule
    return Finding(*_c("tradeoff_slope"), "holds" if ok else "fails", value=s, interval=_interval(lo, hi), layer=layer,
                   why=f"{nums}; {rule}", details=det)


def _ratio_curves(rv: RunView, cols) -> dict | None:
    """{half: DataFrame indexed by layer} from the halves table, else {'all': live decomposition}."""
    if rv.halves is not None and len(rv.halves):
        return {h: g.set_index("layer").sort_index() for h, g in rv.halves.groupby("half")}
    return None


def _depth_trend(rv: RunView, cid: str, run, parts) -> Finding:
    """Shared rule of vw_share_grows / m_grows_vb_shrinks: parts = [(column, sign)]."""
    if len(rv.layers) < 3:
        return Finding(*_c(cid), "untestable", why="fewer than 3 stored layers")
    curves = _ratio_curves(rv, [p for p, _ in parts])
    if curves is None:
        from normvar_core.stats.analyses import decomposition

        df = decomposition(run.stats(), *STUDY_BAND).set_index("layer").sort_index()
        df["v_w_over_v"] = df["v_w"] / df["v"]
        curves = {"all": df}
    full = curves["all"]
    if full["n_types"].max() < 2 if "n_types" in full else False:
        return Finding(*_c(cid), "untestable", why="fewer than 2 types in the band")
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
            iv = _interval(*split_half_interval(delta, da, db))
        good = np.isfinite(rho) and sign * delta > 0 and sign * rho >= RHO_MIN
        ok &= bool(good)
        ivs = f" [{_f(iv[0])}, {_f(iv[1])}]" if iv else " (no split halves: no interval)"
        bits.append(f"{col.replace('_over_', '/')}: last − first = {_f(delta)}{ivs}, Spearman ρ = {_f(rho, 2)}")
        det[f"{col}_delta"], det[f"{col}_rho"] = delta, rho
        if value is None:
            value, interval = delta, iv
    need = " and ".join(f"{'Δ > 0, ρ ≥ ' if s > 0 else 'Δ < 0, ρ ≤ −'}{RHO_MIN}" for _, s in parts)
    return Finding(*_c(cid), "holds" if ok else "fails", value=value, interval=interval,
                   why="; ".join(bits) + f" (holds when {need})", details=det)


def _null(rv: RunView, pt: pd.DataFrame, boot: dict, li: int | None, resamples: int, seed: int) -> Finding:
    from normvar_core.stats.null import null_stats
    from normvar_core.stats.tokenstats import TokenStats

    if rv.is_null:
        return Finding(*_c("null_vs_run"), "untestable", why="this run is itself a Gaussian null")
    mask = rv.band()
    if mask.sum() < 3 or not len(rv.layers):
        return Finding(*_c("null_vs_run"), "untestable", why="fewer than 3 types in the band")
    li = li if li is not None else len(rv.layers) // 2
    layer = int(rv.layers[li])
    d = int(rv.layer_stats.attrs.get("dim", 0)) or None
    if d is None:
        return Finding(*_c("null_vs_run"), "untestable", why="the run's dimension is unknown")
    one = TokenStats(token_ids=rv.token_ids, n=rv.n, mean=np.broadcast_to(np.float32(0), (1, rv.n.size, d)),
                     q=rv.q[li:li + 1], m=rv.m[li:li + 1], v=rv.v[li:li + 1], layer_index=np.array([layer]))
    totals = rv.layer_stats[rv.layer_stats["layer"] == layer]
    nul = null_stats("isotropic", one, totals, seed=seed)
    nb = bootstrap_tradeoff(nul.q[:, mask], nul.m[:, mask], nul.v[:, mask], resamples=resamples, seed=seed)
    rb = bootstrap_tradeoff(rv.q[li:li + 1, mask], rv.m[li:li + 1, mask], rv.v[li:li + 1, mask],
                            resamples=resamples, seed=seed)  # same seed, same T: the same resamples (paired)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = rb["replicates"]["cv_q"][:, 0] / nb["replicates"]["cv_q"][:, 0]
        sdiff = rb["replicates"]["slope"][:, 0] - nb["replicates"]["slope"][:, 0]
        q_n = nul.q[0, mask]
        cv_null = float(q_n.std() / q_n.mean())
    from normvar_core.stats.analyses import _ols

    s_null, _, r2_null = _ols(nul.m[:, mask], nul.v[:, mask])
    cv_run, s_run = float(pt["cv_q"].iloc[li]), float(pt["slope"].iloc[li])
    r_lo, r_hi = np.nanquantile(ratio, [0.025, 0.975])
    s_lo, s_hi = np.nanquantile(sdiff, [0.025, 0.975])
    same = (r_lo <= 1.0 <= r_hi) and (s_lo <= 0.0 <= s_hi)
    why = (f"layer {layer}: C.V. run {_f(cv_run)} vs null {_f(cv_null)} (ratio {_f(cv_run / cv_null)} "
           f"[{_f(r_lo)}, {_f(r_hi)}]); slope run {_f(s_run)} vs null {_f(float(s_null[0]))} (difference "
           f"[{_f(s_lo)}, {_f(s_hi)}]); isotropic null N(0, Q(X)/d I), seed {seed}, paired bootstrap over types")
    return Finding(*_c("null_vs_run"), "holds" if same else "fails", value=cv_run / cv_null,
                   interval=_interval(r_lo, r_hi), layer=layer, why=why,
                   details={"cv_run": cv_run, "cv_null": cv_null, "slope_run": s_run, "slope_null": float(s_null[0]),
                            "r2_null": float(r2_null[0]), "slope_diff_low": float(s_lo), "slope_diff_high": float(s_hi)})


def _anisotropy(rv: RunView) -> Finding:
    g = rv.geometry
    if g is None or "anisotropy" not in g or g["anisotropy"].notna().sum() < 3:
        return Finding(*_c("anisotropy_profile"), "untestable",
                       why="no layer geometry in this run (or < 3 layers): compute without --no-geometry")
    g = g.sort_values("layer")
    layers = g["layer"].to_numpy(int)

    def stat(a: np.ndarray) -> float:
        if rv.is_decoder:
            return float(np.nanmax(a[1:-1]) / max(a[0], a[-1]))
        return float((np.nanmax(a) - np.nanmin(a)) / np.nanmean(a))

    a = g["anisotropy"].to_numpy(float)
    val = stat(a)
    iv = None
    if rv.halves is not None and "anisotropy" in rv.halves:
        h = {k: x.set_index("layer")["anisotropy"].reindex(layers).to_numpy(float) for k, x in rv.halves.groupby("half")}
        if {"a", "b"} <= set(h) and np.isfinite(h["a"]).all() and np.isfinite(h["b"]).all():
            iv = _interval(*split_half_interval(val, stat(h["a"]), stat(h["b"])))
    peak = int(layers[int(np.nanargmax(a))])
    if rv.is_decoder:
        ok = val >= BELL_MIN
        rule = f"decoder: largest interior anisotropy / max(first, last) = {_f(val)} (bell when ≥ {BELL_MIN})"
    else:
        ok = val <= FLAT_MAX
        rule = f"encoder: (max − min) / mean across layers = {_f(val)} (flat when ≤ {FLAT_MAX})"
    ivs = f" [{_f(iv[0])}, {_f(iv[1])}] split-half" if iv else ""
    prof = ", ".join(f"{x:.3f}" for x in a)
    return Finding(*_c("anisotropy_profile"), "holds" if ok else "fails", value=val, interval=iv, layer=peak,
                   why=f"{rule}{ivs}; λ₁/Σλ of the exact covariance per layer: {prof}",
                   details={"decoder": rv.is_decoder, "peak_layer": peak})


def _id(rv: RunView) -> Finding:
    g = rv.geometry
    if g is None or "twonn_id" not in g or g["twonn_id"].notna().sum() < 3:
        return Finding(*_c("id_profile"), "untestable", why="no TwoNN estimates in this run (geometry off or id_sample 0)")
    g = g.sort_values("layer")
    d, layers = g["twonn_id"].to_numpy(float), g["layer"].to_numpy(int)
    k = int(np.nanargmax(d))
    ok = 0 < k < len(d) - 1 and d[k] > d[0] and d[k] > d[-1]
    nb = int(g["twonn_batches"].iloc[k]) if "twonn_batches" in g else 0
    sd = float(g["twonn_id_std"].iloc[k]) if "twonn_id_std" in g else float("nan")
    iv = _interval(d[k] - Z95 * sd / math.sqrt(nb), d[k] + Z95 * sd / math.sqrt(nb)) if nb >= 2 and sd > 0 else None
    prof = ", ".join(f"{x:.1f}" for x in d)
    ivs = f" ± {_f(Z95 * sd / math.sqrt(nb))} over {nb} batches" if iv else " (one batch: no interval)"
    return Finding(*_c("id_profile"), "holds" if ok else "fails", value=float(d[k]), interval=iv, layer=int(layers[k]),
                   why=f"peak TwoNN dimension {_f(d[k])}{ivs} at layer {layers[k]} (first {_f(d[0])}, last {_f(d[-1])}); "
                       f"per layer: {prof}")


def _position0(rv: RunView) -> Finding:
    if rv.exclude_position0:
        return Finding(*_c("position0_share"), "untestable", why="the run excluded position 0 (--exclude-position0)")
    o = rv.outliers
    if o is None or not len(o):
        return Finding(*_c("position0_share"), "untestable", why="no outlier statistics (geometry off, or a null run)")
    o = o.sort_values("layer")
    dom = o[o["max_over_median"] >= OUTLIER_MIN]
    if not len(dom):
        return Finding(*_c("position0_share"), "untestable",
                       why=f"outliers do not dominate: max |h| / median < {OUTLIER_MIN:g} in every layer "
                           f"(largest {_f(float(o['max_over_median'].max()))})")
    row = dom.loc[dom["max_over_median"].idxmax()]
    layer, share = int(row["layer"]), float(row["q_share_pos0"])
    iv = None
    if rv.halves is not None and "q_share_pos0" in rv.halves:
        h = {k: x.set_index("layer")["q_share_pos0"].get(layer, np.nan) for k, x in rv.halves.groupby("half")}
        if {"a", "b"} <= set(h):
            iv = _interval(*split_half_interval(share, h["a"], h["b"]))
    ok = share >= 0.5
    return Finding(*_c("position0_share"), "holds" if ok else "fails", value=share, interval=iv, layer=layer,
                   why=f"layer {layer}: max |h| = {_f(float(row['max_over_median']))} × median; position 0 carries "
                       f"{share:.1%} of Q(X) (holds when ≥ 50 %; {len(dom)} layer(s) with outliers ≥ {OUTLIER_MIN:g} × median)")


def findings(run, *, resamples: int = RESAMPLES, seed: int = 0) -> list[Finding]:
    """Every claim of ``CLAIMS`` tested on ``run`` (a ``runs.reader.Run``), in order."""
    rv = RunView.of(run)
    rv.layer_stats.attrs["dim"] = int(run.dim)
    pt = _point(rv)
    boot = _boot(rv, resamples, seed) if rv.band().sum() >= 3 else {"replicates": {}}
    out = [_identity(rv)]
    cvf, li = _cv_min(rv, pt, boot)
    out += [cvf, _tradeoff(rv, pt, boot, li, cvf.verdict == "holds"),
            _depth_trend(rv, "vw_share_grows", run, [("v_w_over_v", +1)]),
            _depth_trend(rv, "m_grows_vb_shrinks", run, [("m_over_q", +1), ("v_b_over_q", -1)]),
            _null(rv, pt, boot, li, resamples, seed), _anisotropy(rv), _id(rv), _position0(rv)]
    return out


def findings_table(runs_findings: dict) -> pd.DataFrame:
    """{run name: [Finding]} -> one row per (claim, run): id, claim, seed, run, verdict, value, low, high, layer, why."""
    rows = []
    for name, fs in runs_findings.items():
        for f in fs:
            lo, hi = f.interval if f.interval else (None, None)
            rows.append({"id": f.id, "claim": f.claim, "seed": f.seed, "run": name, "verdict": f.verdict,
                         "value": _num(f.value), "low": _num(lo), "high": _num(hi), "layer": f.layer, "why": f.why})
    return pd.DataFrame(rows, columns=["id", "claim", "seed", "run", "verdict", "value", "low", "high", "layer", "why"])


def cell(f: Finding) -> str:
    """'holds: −0.98 [−1.02, −0.95] @6' — one short cell for tables and slides."""
    if f.value is None or not np.isfinite(f.value):
        return f.verdict
    s = f"{f.verdict}: {_f(f.value)}"
    if f.interval:
        s += f" [{_f(f.interval[0])}, {_f(f.interval[1])}]"
    if f.layer is not None:
        s += f" @{f.layer}"
    return s


__all__ = ["CLAIMS", "CLAIM_IDS", "Finding", "findings", "findings_table", "cell", "spearman", "RunView"]
