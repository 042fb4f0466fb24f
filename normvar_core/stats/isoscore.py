"""IsoScore (Rudman, Gillman, Rayne & Eickhoff 2022, "IsoScore: Measuring the Uniformity of Embedding Space
Utilization", Findings of ACL 2022, Algorithm 1): how evenly a layer's embeddings use the d dimensions
of their space, from the eigenvalues of the layer's exact covariance Σ (the geometry's float64 covariance over
every embedding; the paper's step 1–2, PCA of the points, has exactly these variances).

With λ = clip(eigvalsh(Σ), 0) (all d eigenvalues, the zeros included), Algorithm 1's steps 3–6:

* λ̂ = √d · λ / ‖λ‖₂                          (step 3: the variance vector scaled to the norm of 1 = (1, …, 1))
* δ = ‖λ̂ − 1‖₂ / √(2(d − √d))                (step 4: the isotropy defect, in [0, 1])
* φ = (d − δ²(d − √d))² / d²                   (step 5: the share of the dimensions used, in [1/d, 1])
* ι = (d·φ − 1) / (d − 1)                      (step 6: IsoScore, in [0, 1])

ι = 1 when every direction carries the same variance (Σ ∝ I), and ι = (k − 1)/(d − 1) when k directions carry
equal variance and the rest none: a layer uses about k ≈ ι(d − 1) + 1 of its d dimensions. The scaling
makes ι independent of the covariance's scale, so Σ with 1/n (the geometry's) or 1/(n − 1) (the reference
implementation's ``np.cov``) give the same score. Undefined (NaN) when ‖λ‖ = 0 (every embedding equal) or
d = 1.

The claim (``isoscore_low``, a row of the findings): **ι < ``ISO_MAX`` = 0.5 in every layer past the embeddings**
(layer 0, the embedding layer's output, is left out: its isotropy is the tokenizer's and the embedding matrix's,
not the network's). The statistic is the largest ι over those layers; its split-half interval (the same statistic
on the two halves of ``halves_layer``, θ ± 1.96 |θ_A − θ_B| / 2, its ends clipped to ι's range [0, 1]) decides:
"cannot tell" when it straddles 0.5.
The threshold is a choice, not the paper's: below 0.5 a layer uses fewer than half of its dimensions
(k ≈ ι(d − 1) + 1); Rudman et al. find the contextual embeddings of trained models far from isotropic, while an
isotropic Gaussian has ι near 1, so the rule tells a trained model from the Gaussian null. A run file
written before normvar measured IsoScore has no ``isoscore`` column: the claim is untestable there
(recompute the run).
"""

from __future__ import annotations

import math

import numpy as np

ISO_MAX = 0.5
"""The claim's threshold: ι below it in every layer past the embeddings (a documented choice)."""


def isoscore(eigenvalues) -> float:
    """ι of a covariance from its eigenvalues (any order; tiny negative rounding clipped to 0): Algorithm 1
    steps 3–6 of Rudman et al. 2022 (see the module docstring); NaN when d = 1 or every eigenvalue is 0."""
    lam = np.clip(np.asarray(eigenvalues, dtype=np.float64).ravel(), 0.0, None)
    d = lam.size
    norm = float(np.linalg.norm(lam))
    if d < 2 or not norm > 0:
        return float("nan")
    root = math.sqrt(d)
    scaled = root * lam / norm  # step 3
    defect = float(np.linalg.norm(scaled - 1.0)) / math.sqrt(2.0 * (d - root))  # step 4
    used = (d - defect**2 * (d - root)) ** 2 / d**2  # step 5
    return float(min(max((d * used - 1.0) / (d - 1.0), 0.0), 1.0))  # step 6 (rounding kept in [0, 1])


def isoscore_low(rv):
    """The claim ``isoscore_low`` on a ``stats.claims.RunView``: max ι over the layers past the embeddings
    < ``ISO_MAX``, with the split-half interval of that maximum (see the module docstring)."""
    from normvar_core.stats.bootstrap import split_half_interval
    from normvar_core.stats.claims import STRADDLES, UNSURE, against, finding, finite_interval, fmt

    g = rv.geometry
    if g is None or "isoscore" not in g:
        return finding(
            "isoscore_low",
            "untestable",
            why="no IsoScore in this run: it was computed before normvar measured it, or without the "
            "layer geometry (recompute it with the geometry on)",
        )
    g = g.sort_values("layer")
    past = g[(g["layer"] > 0) & g["isoscore"].notna()]
    if not len(past):
        return finding("isoscore_low", "untestable", why="no layer past the embeddings (layer 0) holds an IsoScore")
    k = int(past["isoscore"].to_numpy(float).argmax())
    val, layer = float(past["isoscore"].iloc[k]), int(past["layer"].iloc[k])
    iv = None
    if rv.halves is not None and "isoscore" in rv.halves:
        h = {
            t: x.set_index("layer")["isoscore"].reindex(past["layer"]).to_numpy(float)
            for t, x in rv.halves.groupby("half")
        }
        if {"a", "b"} <= set(h) and np.isfinite(h["a"]).all() and np.isfinite(h["b"]).all():
            iv = finite_interval(*split_half_interval(val, float(h["a"].max()), float(h["b"].max()), bounds=(0.0, 1.0)))
    verdict = against(val, iv, ISO_MAX, holds_above=False)
    ivs = f" [{fmt(iv[0])}, {fmt(iv[1])}] split-half" + (f" — {STRADDLES}" if verdict == UNSURE else "") if iv else ""
    prof = ", ".join(f"{x:.3f}" for x in g["isoscore"])
    return finding(
        "isoscore_low",
        verdict,
        value=val,
        interval=iv,
        layer=layer,
        why=f"largest IsoScore past the embeddings ι = {fmt(val)}{ivs} at layer {layer} (holds when < "
        f"{ISO_MAX}: fewer than half of the dimensions used); ι per layer: {prof}",
    )


__all__ = ["isoscore", "isoscore_low", "ISO_MAX"]
