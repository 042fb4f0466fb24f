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

The claim ``layers_linear`` (the findings): the mean linearity score over the consecutive pairs in the middle
half of the network (both layers' relative depth in [1/4, 3/4]) is ≥ ``LINEAR_MIN`` = 0.95 in decoders and
below it in encoders, with the split-half interval of that mean (θ ± 1.96 |θ_A − θ_B| / 2, clipped to [0, 1]):
"cannot tell" where it straddles 0.95. Razzhigaev et al. report ≈ 0.99 between consecutive decoder layers; the
threshold is this library's choice.

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


def pinv_quadratic(Sxx: np.ndarray, B: np.ndarray) -> float:
    """tr(Bᵀ S_xx⁺ B) with S_xx⁺ over the eigenvalues above ``RCOND`` × the largest (0 for S_xx = 0)."""
    lam, V = np.linalg.eigh(np.asarray(Sxx, np.float64))
    top = float(lam[-1]) if lam.size else 0.0
    if not top > 0:
        return 0.0
    keep = lam > RCOND * top
    W = V[:, keep].T @ np.asarray(B, np.float64)
    return float(np.sum(W * W / lam[keep, None]))


def linear_cka(Sxx: np.ndarray, Syy: np.ndarray, Sxy: np.ndarray) -> float:
    """‖S_xy‖²_F / (‖S_xx‖_F ‖S_yy‖_F); NaN when either layer has no spread."""
    den = float(np.linalg.norm(Sxx) * np.linalg.norm(Syy))
    return float(np.sum(np.square(Sxy)) / den) if den > 0 else float("nan")


def linearity_score(Sxx: np.ndarray, Syy: np.ndarray, Sxy: np.ndarray) -> float:
    """tr(S_yx S_xx⁺ S_xy) / tr(S_yy) = 1 − min_A ‖X̃A − Ỹ‖²_F; NaN when Y has no spread."""
    ty = float(np.trace(Syy))
    return min(max(pinv_quadratic(Sxx, Sxy) / ty, 0.0), 1.0) if ty > 0 else float("nan")


def pair_values(Sxx: np.ndarray, Syy: np.ndarray, Sxy: np.ndarray) -> dict[str, float]:
    """{quantity: value} of ``QUANTITIES`` for one pair of layers from its three scatters (module docstring);
    the residual-free ones NaN when the layers differ in width."""
    out = {"cka": linear_cka(Sxx, Syy, Sxy), "linearity": linearity_score(Sxx, Syy, Sxy)}
    if Sxx.shape == Syy.shape:
        Sxd = Sxy - Sxx
        Sdd = Syy - Sxy - Sxy.T + Sxx
        out.update(cka_residual_free=linear_cka(Sxx, Sdd, Sxd), linearity_residual_free=linearity_score(Sxx, Sdd, Sxd))
    else:
        out.update(cka_residual_free=float("nan"), linearity_residual_free=float("nan"))
    return out


def table_columns(
    layers, next_layers, n, full: list[dict], half_a: list[dict] | None = None, half_b: list[dict] | None = None
) -> dict[str, np.ndarray]:
    """The ``layer_linearity`` table's columns, one row per pair: layer, next_layer, n, each quantity, and with the
    halves its values on each half and its split-half interval (clipped to [0, 1]; NaN without halves)."""
    out = {
        "layer": np.asarray(layers, np.int32),
        "next_layer": np.asarray(next_layers, np.int32),
        "n": np.asarray(n, np.int64),
    }
    nan = np.full(len(full), np.nan)
    for q in QUANTITIES:
        v = np.array([r[q] for r in full], np.float64)
        a = np.array([r[q] for r in half_a], np.float64) if half_a is not None else nan
        b = np.array([r[q] for r in half_b], np.float64) if half_b is not None else nan
        lo, hi = split_half_interval(v, a, b, bounds=(0.0, 1.0))
        out.update({q: v, f"{q}_a": a, f"{q}_b": b, f"{q}_low": lo, f"{q}_high": hi})
    return out


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
        rows.append(pair_values(*null_pair_scatters(null.mean[j], null.mean[j + 1], n, *within, dof, rng)))
    return table_columns(layers[:-1], layers[1:], np.full(len(rows), int(n.sum())), rows)


# ----------------------------------------------------------------------------- the claim
def middle_pairs(table, num_hidden_states: int):
    """The rows of consecutive hidden states (next_layer = layer + 1) whose two layers' relative depth lie in
    ``MIDDLE``."""
    H = max(int(num_hidden_states) - 1, 1)
    lo, hi = MIDDLE
    t = table[(table["next_layer"] == table["layer"] + 1)]
    return t[(t["layer"] / H >= lo) & (t["next_layer"] / H <= hi)].sort_values("layer")


def layers_linear(rv):
    """The claim ``layers_linear`` on a ``stats.claims.RunView`` (module docstring): decoders ≥ ``LINEAR_MIN`` on
    the middle pairs' mean linearity score, encoders below it; "cannot tell" when its split-half interval
    straddles the threshold."""
    from normvar_core.stats.claims import STRADDLES, UNSURE, against, finding, finite_interval, fmt

    run = rv.run
    if run is None or TABLE not in run.table_names:
        return finding(
            "layers_linear", "untestable", why="no layer linearity in this run (computed with --no-layer-linearity)"
        )
    mid = middle_pairs(run.table(TABLE), rv.num_hidden_states)
    mid = mid[np.isfinite(mid["linearity"])]
    if not len(mid):
        return finding(
            "layers_linear",
            "untestable",
            why=f"no pair of consecutive hidden states in the middle half of the {rv.num_hidden_states} "
            "(keep every layer, or more of them)",
        )
    val = float(mid["linearity"].mean())
    a, b = float(mid["linearity_a"].mean()), float(mid["linearity_b"].mean())
    iv = finite_interval(*split_half_interval(val, a, b, bounds=(0.0, 1.0))) if np.isfinite(a + b) else None
    verdict = against(val, iv, LINEAR_MIN, holds_above=rv.is_decoder)
    kind = "decoder: holds when ≥" if rv.is_decoder else "encoder: holds when <"
    ivs = f" [{fmt(iv[0])}, {fmt(iv[1])}] split-half" if iv else " (no split halves: no interval)"
    pairs = ", ".join(f"{int(r.layer)}→{int(r.next_layer)} {r.linearity:.4f}" for r in mid.itertuples())
    rf = float(mid["linearity_residual_free"].mean())
    return finding(
        "layers_linear",
        verdict,
        value=val,
        interval=iv,
        layer=int(mid["layer"].iloc[0]),
        why=f"{kind} {LINEAR_MIN}: mean linearity score of the middle pairs {fmt(val, 4)}{ivs}"
        + (f" — {STRADDLES}" if verdict == UNSURE else "")
        + f"; per pair: {pairs}; without the residual (h_l+1 − h_l on h_l): {fmt(rf, 4)}",
        details={"decoder": rv.is_decoder, "pairs": len(mid), "residual_free": rf},
    )


__all__ = [
    "TABLE",
    "MEASURE",
    "QUANTITIES",
    "RCOND",
    "LINEAR_MIN",
    "MIDDLE",
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
]
