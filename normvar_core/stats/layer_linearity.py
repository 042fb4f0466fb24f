"""Layer-to-layer similarity of consecutive hidden states, exactly, from three streamed scatters (no torch).

For the n counted embeddings of two consecutive kept layers, X (layer l) and Y (layer l + 1), each n × d and
centred on its own mean (X_c = X − 1μ_Xᵀ), the measure keeps the float64 scatters

    S_xx = X_cᵀX_c,   S_yy = Y_cᵀY_c,   S_xy = X_cᵀY_c   (d × d each),

and every quantity below is an exact function of them:

* **linear CKA** (Kornblith, Norouzi, Lee & Hinton, ICML 2019, eq. 5 with the linear kernel):

      CKA(X, Y) = ‖Y_cᵀX_c‖²_F / (‖X_cᵀX_c‖_F ‖Y_cᵀY_c‖_F) = ‖S_xy‖²_F / (‖S_xx‖_F ‖S_yy‖_F)

* the **linearity score** (Razzhigaev et al., ACL 2024, "Your Transformer is Secretly Linear", §3): both layers
  centred and scaled to unit Frobenius norm, X̃ = X_c / ‖X_c‖_F, Ỹ = Y_c / ‖Y_c‖_F, and

      linearity(X, Y) = 1 − min_A ‖X̃A − Ỹ‖²_F = tr(S_yx S_xx⁺ S_xy) / tr(S_yy)

  — the least-squares map's share of Ỹ's squared norm (‖Ỹ‖_F = 1, and the residual of the projection of Ỹ on
  X̃'s columns is 1 − ‖P_X Ỹ‖²_F): the R² of the multivariate regression of Y on X. The scaling of X̃ does not
  change the minimum (A absorbs it). The authors' code (llm-microscope, ``get_linear_errors``) centres, divides
  by the Frobenius norm and solves the normal equations (X̃ᵀX̃)A = X̃ᵀỸ, which is this.
* both **on the residual-free difference** D = Y − X (the block's own output, h_{l+1} − h_l, against h_l, as the
  paper's "without the residual component"): D_c = Y_c − X_c, so

      S_xd = S_xy − S_xx,   S_dd = S_yy − S_xy − S_yx + S_xx

  from the same three matrices (needs the two layers of one width).

S_xx⁺ is the pseudo-inverse on the eigen-directions of S_xx whose eigenvalue exceeds ``RCOND`` × the largest:
the states are float32, and a post-LayerNorm layer lies in a hyperplane (LayerNorm's output has zero mean over
its coordinates before the gain), so one direction holds only float32 rounding (≈ 1e-14 of the largest
variance); a least-squares fit on it would add about 1/n of spurious fit. A brute force over the embeddings
agrees when it drops the singular values of X_c below √RCOND × the largest (``lstsq(rcond=√RCOND)``).

The **cross-fitted score** (``cross_fitted``): the map A = S_xx⁺ S_xy (with its intercept) fitted on one split
half's scatters and scored on the other's, both ways, exactly from the two halves' n, means and scatters
(``fold_errors``). The in-sample score is an R² with d regressors: it fits the noise too, and rises as the corpus
shrinks (by about (1 − ρ²) d / n); the cross-fitted one falls short by about twice that. Both are in the table,
each with its interval θ ± t₁ |θ_A − θ_B| / 2 (the halves for the in-sample score, the two folds for the
cross-fitted one; Student's t on one degree of freedom, ``bootstrap.split_half_interval``), and n and the width d.

The claim ``layers_linear`` (the findings): the mean cross-fitted score over the consecutive pairs in the middle
half of the network (both layers' relative depth in [1/4, 3/4]) is ≥ ``LINEAR_MIN`` = 0.95 in decoders and below
it in encoders; its interval runs from the cross-fitted interval's low end to the in-sample one's high end (the
truth lies between the two scores): "cannot tell" where it straddles 0.95, or where a half holds no more
embeddings than dimensions. Razzhigaev et al. report ≈ 0.99 (in-sample) between consecutive decoder layers; the
threshold is this library's choice. The coverage test checks every interval's coverage on synthetic
layers with a known population score.

The Gaussian null (``null_pair_scatters``): the null's layers are drawn independently given the token type, so
its cross-scatter is the between-type cross-scatter of its type means plus the within-type part of a joint
Wishart (exact for the isotropic and offset nulls, Satterthwaite's degrees of freedom for the matched one, as
``stats.null_geometry``): what the token identity alone gives.
"""

from __future__ import annotations

import numpy as np

from normvar_core.stats.bootstrap import split_half_interval

TABLE = "layer_linearity"
MEASURE = "layer_linearity"
QUANTITIES = ("cka", "linearity", "cka_residual_free", "linearity_residual_free")
"""The table's per-pair values, each with its halves (``<q>_a``, ``<q>_b``) and split-half interval
(``<q>_low``, ``<q>_high``)."""
RCOND = 1e-12
"""Eigenvalues of S_xx below this share of the largest are rounding, left out of S_xx⁺ (module docstring)."""
LINEAR_MIN = 0.95
"""The claim's threshold on the middle pairs' mean linearity score."""
MIDDLE = (0.25, 0.75)
"""The middle half of the network: a pair is middle when both its layers' relative depth l / (H − 1) lie here."""


def kept_eigen(Sxx: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(λ, V) of S_xx's eigen-directions whose eigenvalue exceeds ``RCOND`` × the largest (``numpy.linalg.eigh``);
    None when S_xx has no positive eigenvalue. One decomposition serves every score fitted on S_xx."""
    lam, V = np.linalg.eigh(np.asarray(Sxx, np.float64))
    top = float(lam[-1]) if lam.size else 0.0
    if not top > 0:
        return None
    keep = lam > RCOND * top
    return lam[keep], V[:, keep]


def pinv_quadratic(Sxx: np.ndarray, B: np.ndarray, eig=False) -> float:
    """tr(Bᵀ S_xx⁺ B) with S_xx⁺ over the eigenvalues above ``RCOND`` × the largest (0 for S_xx = 0); ``eig``:
    S_xx's ``kept_eigen`` when the caller has it."""
    eig = kept_eigen(Sxx) if eig is False else eig
    if eig is None:
        return 0.0
    lam, Vk = eig
    W = Vk.T @ np.asarray(B, np.float64)
    return float(np.sum(W * W / lam[:, None]))


def linear_cka(Sxx: np.ndarray, Syy: np.ndarray, Sxy: np.ndarray) -> float:
    """‖S_xy‖²_F / (‖S_xx‖_F ‖S_yy‖_F); NaN when either layer has no spread."""
    den = float(np.linalg.norm(Sxx) * np.linalg.norm(Syy))
    return float(np.sum(np.square(Sxy)) / den) if den > 0 else float("nan")


def linearity_score(Sxx: np.ndarray, Syy: np.ndarray, Sxy: np.ndarray, eig=False) -> float:
    """tr(S_yx S_xx⁺ S_xy) / tr(S_yy) = 1 − min_A ‖X̃A − Ỹ‖²_F; NaN when Y has no spread (``eig``: as
    ``pinv_quadratic``'s)."""
    ty = float(np.trace(Syy))
    return min(max(pinv_quadratic(Sxx, Sxy, eig) / ty, 0.0), 1.0) if ty > 0 else float("nan")


def pair_values(Sxx: np.ndarray, Syy: np.ndarray, Sxy: np.ndarray, eig=False) -> dict[str, float]:
    """{quantity: value} of ``QUANTITIES`` for one pair of layers from its three scatters (module docstring);
    the residual-free ones NaN when the layers differ in width. Both scores are fitted on S_xx: one
    eigendecomposition (``eig``: S_xx's ``kept_eigen`` when the caller has it)."""
    eig = kept_eigen(Sxx) if eig is False else eig
    out = {"cka": linear_cka(Sxx, Syy, Sxy), "linearity": linearity_score(Sxx, Syy, Sxy, eig)}
    if Sxx.shape == Syy.shape:
        Sxd = Sxy - Sxx
        Sdd = Syy - Sxy - Sxy.T + Sxx
        out.update(
            cka_residual_free=linear_cka(Sxx, Sdd, Sxd), linearity_residual_free=linearity_score(Sxx, Sdd, Sxd, eig)
        )
    else:
        out.update(cka_residual_free=float("nan"), linearity_residual_free=float("nan"))
    return out


# ----------------------------------------------------------------------------- the cross-fitted score
def half_moments(n: int, mean_x, mean_y, Sxx, Syy, Sxy, *, residual_free: bool = False) -> tuple:
    """One half's (n, μ_x, μ_y, S_xx, S_yy, S_xy) of a pair of layers, float64; with ``residual_free`` those of
    (X, D = Y − X): μ_d = μ_y − μ_x, S_dd = S_yy − S_xy − S_yx + S_xx, S_xd = S_xy − S_xx."""
    mx, my, Sxx, Syy, Sxy = (np.asarray(a, np.float64) for a in (mean_x, mean_y, Sxx, Syy, Sxy))
    if residual_free:
        return int(n), mx, my - mx, Sxx, Syy - Sxy - Sxy.T + Sxx, Sxy - Sxx
    return int(n), mx, my, Sxx, Syy, Sxy


def pinv_solve(Sxx: np.ndarray, B: np.ndarray, eig=False) -> np.ndarray:
    """S_xx⁺ B over the eigenvalues above ``RCOND`` × the largest (zero for S_xx = 0): the least-squares map
    (``eig``: as ``pinv_quadratic``'s)."""
    eig = kept_eigen(Sxx) if eig is False else eig
    if eig is None:
        return np.zeros((Sxx.shape[0], B.shape[1]))
    lam, Vk = eig
    return Vk @ ((Vk.T @ np.asarray(B, np.float64)) / lam[:, None])


def fold_errors(train: tuple, test: tuple, eig=False) -> tuple[float, float]:
    """(RSS, TSS) of the map fitted on ``train`` scoring ``test`` (each a ``half_moments`` tuple), exactly from the
    moments: A = S_xx⁺ S_xy and the intercept b = μ_y − Aᵀμ_x of the training half; on the test half's rows,
    with δ_x = μ_x' − μ_x and δ_y = μ_y' − μ_y (test − train),

        RSS = Σ ‖y − Aᵀx − b‖² = tr S'_yy − 2 tr(Aᵀ S'_xy) + tr(Aᵀ S'_xx A) + n' ‖δ_y − Aᵀ δ_x‖²,
        TSS = tr S'_yy   (about the test half's own mean).

    ``eig``: the training S_xx's ``kept_eigen`` when the caller has it."""
    _, mx, my, Sxx, _, Sxy = train
    n2, mx2, my2, Sxx2, Syy2, Sxy2 = test
    A = pinv_solve(Sxx, Sxy, eig)
    shift = (my2 - my) - A.T @ (mx2 - mx)
    rss = float(np.trace(Syy2) - 2.0 * np.sum(A * Sxy2) + np.sum(A * (Sxx2 @ A)) + n2 * float(shift @ shift))
    return max(rss, 0.0), float(np.trace(Syy2))


def cross_fitted(a: tuple, b: tuple, eigs=(False, False)) -> dict[str, float]:
    """The cross-fitted linearity score of one pair from its two halves' moments (``half_moments``): fitted on one
    half, scored on the other, both ways —

        θ_x = 1 − (RSS_{a→b} + RSS_{b→a}) / (TSS_b + TSS_a),   θ_{a→b} = 1 − RSS_{a→b} / TSS_b,  θ_{b→a} likewise

    — an out-of-sample R² (below 0 when the map fitted on one half predicts the other worse than its mean). The
    in-sample score (the protocol's) fits the noise too: its expectation exceeds the population score ρ² by
    about (1 − ρ²) r / n with r the map's rank; the cross-fitted one fits on half the data and falls short by
    about (1 − ρ²) 2r / n. ρ² lies between them (``layers_linear``). NaN when a half is empty. ``eigs``: the two
    halves' S_xx ``kept_eigen`` when the caller has them."""
    if a[0] < 1 or b[0] < 1:
        return {"xfit": float("nan"), "xfit_ab": float("nan"), "xfit_ba": float("nan")}
    rss_ab, tss_b = fold_errors(a, b, eigs[0])
    rss_ba, tss_a = fold_errors(b, a, eigs[1])

    def score(r, t):
        return 1.0 - r / t if t > 0 else float("nan")

    return {
        "xfit": score(rss_ab + rss_ba, tss_a + tss_b),
        "xfit_ab": score(rss_ab, tss_b),
        "xfit_ba": score(rss_ba, tss_a),
    }


XFIT = ("linearity", "linearity_residual_free")
"""The quantities with a cross-fitted score (``<q>_xfit``, its folds ``<q>_xfit_ab`` / ``<q>_xfit_ba`` and its
interval ``<q>_xfit_low`` / ``<q>_xfit_high``)."""


def pair_cross_fitted(a: tuple, b: tuple, same_width: bool, eigs=None) -> dict[str, float]:
    """{``<q>_xfit``, ``<q>_xfit_ab``, ``<q>_xfit_ba``} for both ``XFIT`` quantities of one pair from its halves'
    raw moments (n, μ_x, μ_y, S_xx, S_yy, S_xy); the residual-free ones NaN when the layers differ in width. Every
    fit of a half is on its S_xx: one eigendecomposition per half (``eigs``: the halves' ``kept_eigen`` when the
    caller has them)."""
    if eigs is None:
        eigs = tuple(kept_eigen(h[3]) if h[0] >= 1 else None for h in (a, b))
    out = {}
    for q, rf in zip(XFIT, (False, True)):
        if rf and not same_width:
            vals = dict.fromkeys(("xfit", "xfit_ab", "xfit_ba"), float("nan"))
        else:
            vals = cross_fitted(half_moments(*a, residual_free=rf), half_moments(*b, residual_free=rf), eigs)
        out.update({f"{q}_{k}": v for k, v in vals.items()})
    return out


def table_columns(
    layers,
    next_layers,
    n,
    full: list[dict],
    half_a: list[dict] | None = None,
    half_b: list[dict] | None = None,
    xfit: list[dict] | None = None,
    dim=None,
) -> dict[str, np.ndarray]:
    """The ``layer_linearity`` table's columns, one row per pair: layer, next_layer, n, dim (layer l's width), each
    quantity, and with the halves its values on each half and its split-half interval (Student's t₁,
    ``bootstrap.split_half_interval``; clipped to [0, 1]; NaN without halves); with ``xfit`` (``pair_cross_fitted``
    per pair) the cross-fitted scores, their folds and their interval θ_x ± t₁ |θ_{a→b} − θ_{b→a}| / 2 (≤ 1)."""
    out = {
        "layer": np.asarray(layers, np.int32),
        "next_layer": np.asarray(next_layers, np.int32),
        "n": np.asarray(n, np.int64),
        "dim": np.asarray(dim if dim is not None else np.zeros(len(full)), np.int64),
    }
    nan = np.full(len(full), np.nan)
    for q in QUANTITIES:
        v = np.array([r[q] for r in full], np.float64)
        a = np.array([r[q] for r in half_a], np.float64) if half_a is not None else nan
        b = np.array([r[q] for r in half_b], np.float64) if half_b is not None else nan
        lo, hi = split_half_interval(v, a, b, bounds=(0.0, 1.0))
        out.update({q: v, f"{q}_a": a, f"{q}_b": b, f"{q}_low": lo, f"{q}_high": hi})
    for q in XFIT:
        v, ab, ba = (
            np.array([r[f"{q}_{k}"] for r in xfit], np.float64) if xfit is not None else nan
            for k in ("xfit", "xfit_ab", "xfit_ba")
        )
        lo, hi = split_half_interval(v, ab, ba, bounds=(-np.inf, 1.0))
        out.update({f"{q}_xfit": v, f"{q}_xfit_ab": ab, f"{q}_xfit_ba": ba, f"{q}_xfit_low": lo, f"{q}_xfit_high": hi})
    return out  # type: ignore[return-value]  # arrays


# ----------------------------------------------------------------------------- the Gaussian null
def between_cross(mean_x: np.ndarray, mean_y: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Σ_t n_t (μ̂_t^x − μ̂^x)(μ̂_t^y − μ̂^y)ᵀ over the type means of two layers (float64)."""
    n = np.asarray(n, np.float64)
    gx = (n @ np.asarray(mean_x, np.float64)) / n.sum()
    gy = (n @ np.asarray(mean_y, np.float64)) / n.sum()
    out = np.zeros((mean_x.shape[1], mean_y.shape[1]))
    for a in range(0, len(n), 4096):
        w = np.sqrt(n[a : a + 4096])[:, None]
        out += ((np.asarray(mean_x[a : a + 4096], np.float64) - gx) * w).T @ (
            (np.asarray(mean_y[a : a + 4096], np.float64) - gy) * w
        )
    return out


def null_pair_scatters(mean_x, mean_y, n, within_x: float, within_y: float, dof: float, rng: np.random.Generator):
    """(S_xx, S_yy, S_xy) of a Gaussian null's two layers: the between-type scatters of the null's type means plus
    the within-type part, a Wishart(I_2d, ``dof``) draw (``null_geometry.wishart_identity``) whose two diagonal
    blocks are scaled to the within-type sums of squares the null's moments drew (``within_x``, ``within_y``):
    the two layers' within-type deviations are independent, so scaling each block's rows scales the joint draw."""
    from normvar_core.stats.null_geometry import between_scatter, wishart_identity

    d = mean_x.shape[1]
    W = wishart_identity(2 * d, dof, rng)
    for blk, total in ((slice(0, d), within_x), (slice(d, 2 * d), within_y)):
        tr = float(np.trace(W[blk, blk]))
        scale = np.sqrt(total / tr) if tr > 0 and total > 0 else 0.0
        W[blk, :] *= scale
        W[:, blk] *= scale
    Sxx = between_scatter(mean_x, n) + W[:d, :d]
    Syy = between_scatter(mean_y, n) + W[d:, d:]
    return Sxx, Syy, between_cross(mean_x, mean_y, n) + W[:d, d:]


def satterthwaite_dof(s2: np.ndarray, n: np.ndarray) -> float:
    """ν = (Σ a_t)² / Σ a_t² / (n_t − 1), a_t = s_t² (n_t − 1): the within-type part's Wishart degrees of
    freedom (exact N − T when every s_t is equal), as ``null_geometry.null_covariance``."""
    k = np.asarray(n, np.float64) - 1
    a = np.asarray(s2, np.float64) * k
    keep = (k > 0) & (a > 0)
    return float(a[keep].sum() ** 2 / np.sum(a[keep] ** 2 / k[keep])) if keep.any() else 0.0


def null_table(kind: str, stats, layer_totals, null, *, seed: int = 0) -> dict[str, np.ndarray]:
    """The ``layer_linearity`` columns of the Gaussian null ``null`` (a ``stats.null.null_stats`` draw of ``stats``,
    the run's per-type moments; ``layer_totals`` its ``layer_stats``): each pair of consecutive kept layers from
    ``null_pair_scatters`` of the null's type means and within-type sums of squares, the Wishart's degrees of
    freedom the smaller of the two layers' (``satterthwaite_dof``), seeded per pair on its own stream
    (``default_rng([seed, kind, 4, layer])``: the geometry's null draws on stream 2, GRIDE's on 3). No halves: NaN
    intervals."""
    from normvar_core.constants import NULL_KINDS
    from normvar_core.stats.null import null_params

    s2 = {li: v for li, _, v in null_params(kind, stats, layer_totals, seed=seed)}
    n = np.asarray(stats.n, np.float64)
    layers = [int(x) for x in stats.layer_index]
    rows = []
    for j in range(len(layers) - 1):
        rng = np.random.default_rng([seed, NULL_KINDS.index(kind), 4, layers[j]])
        dof = min(satterthwaite_dof(s2[j], n), satterthwaite_dof(s2[j + 1], n))
        within = [float(np.sum(null.v[i] * n)) for i in (j, j + 1)]
        rows.append(pair_values(*null_pair_scatters(null.mean[j], null.mean[j + 1], n, *within, dof, rng)))  # type: ignore[call-arg, arg-type]  # two within sums
    dim = np.full(len(rows), int(np.shape(null.mean[0])[-1]) if len(rows) else 0)
    return table_columns(layers[:-1], layers[1:], np.full(len(rows), int(n.sum())), rows, dim=dim)


# ----------------------------------------------------------------------------- the claim
def middle_pairs(table, num_hidden_states: int):
    """The rows of consecutive hidden states (next_layer = layer + 1) whose two layers' relative depth lie in
    ``MIDDLE``."""
    H = max(int(num_hidden_states) - 1, 1)
    lo, hi = MIDDLE
    t = table[(table["next_layer"] == table["layer"] + 1)]
    return t[(t["layer"] / H >= lo) & (t["next_layer"] / H <= hi)].sort_values("layer")


NEEDED = ("layer", "next_layer", "n", "linearity", "linearity_a", "linearity_b", "linearity_residual_free")
"""The columns the claim reads from every version of the table; the cross-fitted ones (``XFIT_NEEDED``) decide."""
XFIT_NEEDED = ("dim", "linearity_xfit", "linearity_xfit_ab", "linearity_xfit_ba")


def _say_pairs(mid) -> str:
    xf = "linearity_xfit" in mid
    return ", ".join(
        f"{int(r['layer'])}→{int(r['next_layer'])} {r['linearity']:.4f}"
        + (f" (cross-fitted {r['linearity_xfit']:.4f})" if xf else "")
        for _, r in mid.iterrows()
    )


def layers_linear(rv):
    """The claim ``layers_linear`` on a ``stats.claims.RunView`` (module docstring), decided on the cross-fitted
    score (``cross_fitted``): the middle pairs' mean cross-fitted score θ_x, with the interval [θ_x's low end,
    the in-sample score's high end] — the cross-fitted score underestimates the layers' linearity and the
    in-sample one overestimates it (each by about (1 − ρ²) r / n), so the truth lies between them, each end
    widened by its own split-half interval (Student's t₁). Decoders hold at ≥ ``LINEAR_MIN``, encoders below it;
    "cannot tell" when that interval straddles the threshold (with the embeddings per dimension n / d, what
    narrows it), when a half holds no more embeddings than dimensions (any map then fits a half exactly), or
    when the run file's table lacks the cross-fitted columns (an older version: recompute)."""
    from normvar_core.stats.claims import UNSURE, against, finding, finite_interval, fmt

    run = rv.run
    if run is None or TABLE not in run.table_names:
        return finding(
            "layers_linear",
            "untestable",
            why="no layer linearity in this run (it was computed with --no-layer-linearity)",
        )
    table = run.table(TABLE)
    missing = [c for c in NEEDED if c not in table]
    if missing:
        return finding(
            "layers_linear",
            "untestable",
            why=f"this run file's layer linearity table lacks {', '.join(missing)} (a damaged or foreign file): "
            "recompute the run",
        )
    mid = middle_pairs(table, rv.num_hidden_states)
    mid = mid[np.isfinite(mid["linearity"])]
    if not len(mid):
        return finding(
            "layers_linear",
            "untestable",
            why=f"no pair of consecutive hidden states in the middle half of the {rv.num_hidden_states} "
            "(keep every layer, or more of them)",
        )
    ins = float(mid["linearity"].mean())
    rf = float(mid["linearity_residual_free"].mean())
    pairs = _say_pairs(mid)
    base = {"decoder": rv.is_decoder, "pairs": len(mid), "in_sample": ins, "residual_free": rf}
    kind = "decoder: holds when ≥" if rv.is_decoder else "encoder: holds when <"
    if any(c not in mid for c in XFIT_NEEDED):
        return finding(
            "layers_linear",
            UNSURE,
            value=ins,
            layer=int(mid["layer"].iloc[0]),
            why=f"in-sample score {fmt(ins, 4)} only: this run file has no cross-fitted score (written by an "
            "older version; recompute the run), and the in-sample score alone overstates the linearity by an "
            f"unknown amount; per pair: {pairs}",
            details=base,
        )
    n, dim = int(mid["n"].min()), int(mid["dim"].max())
    per_dim = n / dim if dim > 0 else float("nan")
    base["per_dim"] = per_dim
    nd = f"n / d = {n:,} / {dim:,} = {per_dim:.3g} embeddings per dimension"
    if dim > 0 and n // 2 <= dim:
        return finding(
            "layers_linear",
            UNSURE,
            layer=int(mid["layer"].iloc[0]),
            why=f"{nd}: each split half holds no more embeddings than dimensions, so a linear map fits any half "
            "exactly (in-sample score 1 whatever the layers) and nothing is left to score it on — more "
            f"sentences needed (at least {2 * dim + 2:,} embeddings)",
            details=base,
        )
    xf = float(mid["linearity_xfit"].mean())
    ab, ba = float(mid["linearity_xfit_ab"].mean()), float(mid["linearity_xfit_ba"].mean())
    a, b = float(mid["linearity_a"].mean()), float(mid["linearity_b"].mean())
    xiv = finite_interval(*split_half_interval(xf, ab, ba, bounds=(-np.inf, 1.0)))
    iiv = finite_interval(*split_half_interval(ins, a, b, bounds=(0.0, 1.0)))
    iv = [xiv[0], max(iiv[1], xiv[1])] if xiv and iiv else None
    base.update(cross_fitted=xf, cross_fitted_interval=xiv, in_sample_interval=iiv)
    if iv is None:
        verdict = UNSURE
        said = "no split halves: no interval, and one fit says nothing about its own overfit"
    else:
        verdict = against(xf, iv, LINEAR_MIN, holds_above=rv.is_decoder)
        said = f"the layers' linearity lies in [{fmt(iv[0], 4)}, {fmt(iv[1], 4)}]"
        if verdict == UNSURE:
            said += (
                f", across {LINEAR_MIN}: the in-sample score fits the noise too (it overstates) and the "
                "cross-fitted one is fitted on half the data (it understates), and at this "
                "n / d they differ by " + fmt(ins - xf, 2) + " — more sentences narrow the gap"
            )
    return finding(
        "layers_linear",
        verdict,
        value=xf,
        interval=iv,
        layer=int(mid["layer"].iloc[0]),
        why=f"{kind} {LINEAR_MIN}: mean over the middle pairs of the cross-fitted score (fitted on one half of the "
        f"sentences, scored on the other, both ways) {fmt(xf, 4)}"
        + (f" [{fmt(xiv[0], 4)}, {fmt(xiv[1], 4)}]" if xiv else "")
        + f", of the in-sample score {fmt(ins, 4)}"
        + (f" [{fmt(iiv[0], 4)}, {fmt(iiv[1], 4)}]" if iiv else "")
        + f"; {nd}; {said}; per pair: {pairs}; without the residual (h_l+1 − h_l on h_l, in-sample): {fmt(rf, 4)}",
        details=base,
    )


__all__ = [
    "TABLE",
    "MEASURE",
    "QUANTITIES",
    "RCOND",
    "LINEAR_MIN",
    "MIDDLE",
    "kept_eigen",
    "pinv_quadratic",
    "linear_cka",
    "linearity_score",
    "pair_values",
    "table_columns",
    "between_cross",
    "null_pair_scatters",
    "satterthwaite_dof",
    "null_table",
    "middle_pairs",
    "layers_linear",
    "half_moments",
    "pinv_solve",
    "fold_errors",
    "cross_fitted",
    "pair_cross_fitted",
    "XFIT",
    "NEEDED",
    "XFIT_NEEDED",
]
