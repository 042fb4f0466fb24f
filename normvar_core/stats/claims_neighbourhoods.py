"""The claim on the neighbourhood overlap between consecutive layers (Valeriani et al., "The geometry of hidden
representations of large transformer models", NeurIPS 2023, §3), as they read it: the neighbour composition of the
representations changes across the layers of the intrinsic dimension's peak and is more stable after it, where
the overlap χ(l, l+1) of consecutive layers is higher. The claim says no more than that comparison (not that the
peak is where the neighbourhoods change most, nor a value the overlap reaches).

The rule: with p the layer of the largest Razzhigaev et al. 2024 TwoNN past the first kept layer, the value is
Δ = mean_{l > p} χ₁₀(l, l+1) − χ₁₀(p, p+1) (unmasked, ``layer_overlap``); it holds when Δ > 0. Its interval is
Δ ± 1.96 √(s_p² + Σ_l s_l² / n²) with s the standard error over the TwoNN batches (``overlap_next_std`` / √B);
"cannot tell" where the interval straddles 0 or no layer follows the peak."""

from __future__ import annotations

import numpy as np

from normvar_core.stats.bootstrap import Z95
from normvar_core.stats.claims import STRADDLES, UNSURE, Finding, RunView, against, finding, fmt


def overlap_profile(rv: RunView) -> Finding:
    run = rv.run
    if run is None or "layer_overlap" not in run.table_names or rv.geometry is None:
        return finding(
            "overlap_profile",
            "untestable",
            why="no neighbourhood overlap in this run: compute it with the geometry (the default)",
        )
    o = run.table("layer_overlap").sort_values("layer").reset_index(drop=True)
    g = rv.geometry.sort_values("layer")
    if len(o) < 3 or "twonn_id" not in g:
        return finding("overlap_profile", "untestable", why="fewer than 3 layers with a neighbourhood overlap")
    ids = g.set_index("layer")["twonn_id"].reindex(o["layer"]).to_numpy(float)
    p = 1 + int(np.nanargmax(ids[1:]))
    after = o.iloc[p + 1 : -1]  # the layers after the peak that have a next layer
    if not len(after):
        return finding(
            "overlap_profile",
            UNSURE,
            layer=int(o["layer"][p]),
            why=f"the TwoNN peak is at layer {int(o['layer'][p])}: no consecutive pair follows it",
        )
    batches = max(int(g["twonn_batches"].max()) if "twonn_batches" in g else 1, 1)
    at = float(o["overlap_next"][p])
    val = float(after["overlap_next"].mean()) - at
    se = np.sqrt(float(o["overlap_next_std"][p]) ** 2 + float((after["overlap_next_std"] ** 2).sum()) / len(after) ** 2)
    se /= np.sqrt(batches)
    iv = [val - Z95 * se, val + Z95 * se] if se > 0 else None
    verdict = against(val, iv, 0.0, holds_above=True)
    ivs = (
        f" [{fmt(iv[0])}, {fmt(iv[1])}] over the batches" + (f" — {STRADDLES}" if verdict == UNSURE else "")
        if iv
        else ""
    )
    prof = ", ".join(f"{x:.3f}" for x in o["overlap_next"].iloc[:-1])
    return finding(
        "overlap_profile",
        verdict,
        value=val,
        interval=iv,
        layer=int(o["layer"][p]),
        why=(
            f"TwoNN peaks at layer {int(o['layer'][p])}; χ₁₀ to the next layer there {at:.3f}, after it "
            f"{float(after['overlap_next'].mean()):.3f} on average: Δ = {fmt(val)}{ivs}; χ₁₀(l, l+1) per "
            f"layer: {prof}"
        ),
    )


__all__ = ["overlap_profile"]
