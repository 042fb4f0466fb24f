"""The claim on the neighbourhood overlap between consecutive layers (Valeriani et al., "The geometry of hidden
representations of large transformer models", NeurIPS 2023, §3), as they read it: the neighbour composition of the
representations changes across the layers of the intrinsic dimension's peak and is more stable after it, where
the overlap χ(l, l+1) of consecutive layers is higher. The claim says no more than that comparison (not that the
peak is where the neighbourhoods change most, nor a value the overlap reaches).

The rule: p is the layer of the TwoNN peak by ``id_profile``'s rule (the largest TwoNN of
Razzhigaev et al. 2024); the value is
Δ = mean_{l > p} χ₁₀(l, l+1) − χ₁₀(p, p+1) (unmasked, ``layer_overlap``); it holds when Δ > 0. Its interval over
the B TwoNN batches is Δ ± t_{B−1} √(s_p² + Σ_l s_l² / n²) with s = ``overlap_next_std`` / √(B − 1) each layer's
standard error (the table stores the batches' population std). "cannot tell" where the interval straddles 0, where
there is no interval (one batch), where ``id_profile`` cannot tell where the peak is (its estimate is biased on
this corpus), or where no layer follows the peak; "untestable" where a point has no more than k = 10 neighbours to
choose from (the overlap is then 1 by construction) or fewer than 3 layers carry it."""

from __future__ import annotations

import numpy as np

from normvar_core.stats.bootstrap import t_quantile
from normvar_core.stats.claims import STRADDLES, UNSURE, Finding, RunView, against, finding, fmt
from normvar_core.stats.claims_geometry import id_profile_of
from normvar_core.stats.overlap import K_DEFAULT

TABLE = "layer_overlap"
NEEDED = ("layer", "overlap_next", "overlap_next_std")
OFF = (
    "no neighbourhood overlap in this run: it is computed with the geometry when the run's neighbourhoods option is "
    "on (`normvar compute --help` names its flag; the New run page's form has it)"
)


def overlap_profile(rv: RunView) -> Finding:
    run = rv.run
    if run is None or TABLE not in run.table_names or rv.geometry is None:
        return finding("overlap_profile", "untestable", why=OFF)
    o = run.table(TABLE)
    if missing := [c for c in NEEDED if c not in o]:
        return finding(
            "overlap_profile",
            "untestable",
            why=f"this run file's neighbourhood overlap table lacks {', '.join(missing)}: recompute the run",
        )
    o = o.sort_values("layer").reset_index(drop=True)
    if len(o) < 3 or not np.isfinite(o["overlap_next"].iloc[:-1]).any():
        return finding(
            "overlap_profile", "untestable", why=f"{len(o)} layer(s) with a neighbourhood overlap: at least 3 needed"
        )
    if "chance" in o and (o["chance"] >= 1.0 - 1e-12).any():
        return finding(
            "overlap_profile",
            "untestable",
            why=f"a point has at most k = {K_DEFAULT} neighbours to choose from (the TwoNN sample's batches hold "
            f"≤ {K_DEFAULT + 1} embeddings): its neighbourhood is every other point at every layer, so the overlap is "
            "1 by construction — a larger --id-sample or corpus",
        )
    g = rv.geometry
    peak = id_profile_of(g)
    if peak.verdict == "untestable" or peak.layer is None:
        return finding("overlap_profile", "untestable", why=f"no TwoNN peak to anchor on: {peak.why}")
    rows = np.flatnonzero(o["layer"].to_numpy(int) == peak.layer)
    if not rows.size:
        return finding(
            "overlap_profile", "untestable", why=f"the TwoNN peak's layer {peak.layer} has no neighbourhood overlap"
        )
    p = int(rows[0])
    if peak.verdict == UNSURE:
        return finding(
            "overlap_profile",
            UNSURE,
            layer=peak.layer,
            why=f"id_profile cannot tell where the TwoNN peak is on this run, so the overlap has no anchor: {peak.why}",
        )
    after = o.iloc[p + 1 : -1]  # the layers after the peak that have a next layer
    if not len(after):
        return finding(
            "overlap_profile",
            UNSURE,
            layer=peak.layer,
            why=f"the TwoNN peak is at layer {peak.layer}: no consecutive pair follows it",
        )
    B = int(g["twonn_batches"].max()) if "twonn_batches" in g else 0
    at = float(o["overlap_next"][p])
    val = float(after["overlap_next"].mean()) - at
    prof = ", ".join(f"{x:.3f}" for x in o["overlap_next"].iloc[:-1])
    said = (
        f"TwoNN peaks at layer {peak.layer}; χ₁₀ to the next layer there {at:.3f}, after it "
        f"{float(after['overlap_next'].mean()):.3f} on average: Δ = {fmt(val)}"
    )
    var = float(o["overlap_next_std"][p]) ** 2 + float((after["overlap_next_std"] ** 2).sum()) / len(after) ** 2
    if B < 2 or not np.isfinite(var) or not var > 0:
        why = (
            "one TwoNN batch: no interval (an --id-sample of at least two batches gives one)"
            if B < 2
            else "the batches agree to rounding: no measured spread"
        )
        return finding(
            "overlap_profile",
            UNSURE,
            value=val,
            layer=peak.layer,
            why=f"{said}; {UNSURE}: {why}; χ₁₀(l, l+1) per layer: {prof}",
        )
    half = t_quantile(B - 1) * np.sqrt(var / (B - 1))
    iv = [val - half, val + half]
    verdict = against(val, iv, 0.0, holds_above=True)
    unsure = f" — {STRADDLES}" if verdict == UNSURE else ""
    return finding(
        "overlap_profile",
        verdict,
        value=val,
        interval=iv,
        layer=peak.layer,
        why=f"{said} [{fmt(iv[0])}, {fmt(iv[1])}] over {B} batches (Student's t){unsure}; χ₁₀(l, l+1) per "
        f"layer: {prof}",
    )


__all__ = ["overlap_profile", "OFF", "NEEDED"]
