"""The claims of the studies (Yamagiwa & Shimodaira 2024, the Gaussian-geometry comment, Razzhigaev et al.
2024), each tested on one run, with its number, its interval and a
verdict — one function (``findings``) for the CLI, the Findings page and the deck.

Verdicts: ``holds``, ``fails``, ``cannot tell`` (the interval straddles the rule's threshold: ``claims.against``;
or the data cannot carry a verdict: an interval of zero width, a per-type claim on a band whose types mostly have
every occurrence at one point, a claim that compares a value with a threshold with no interval —
``claims.settle``), ``untestable`` (with why). Intervals: bootstrap over token types (``stats.bootstrap``: 1,000
seeded resamples, percentile) for the per-type statistics; split-half (θ ± t₁ |θ_A − θ_B| / 2, Student's t on
one degree of freedom, the run's ``halves_layer`` table) for the corpus-level and geometry quantities; for TwoNN
and the neighbourhood overlap the spread over Razzhigaev et al.'s B batches (mean ± t_{B−1} s / √B); for the layer
linearity the bracket from the cross-fitted score's low end to the in-sample score's high end
(``stats.layer_linearity``). The coverage test checks each method's coverage on synthetic runs.

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
Then the claims on the layer geometry, IsoScore and the outliers, each decided by its rule (the rule's docstring
states it), for example:

- ``anisotropy_profile`` (geometry; 004 §4.1, Fig. 1): λ₁/Σλ across layers is flat in encoders
  ((max − min) / mean ≤ ``FLAT_MAX``) and bell-shaped in decoders (an interior layer at least ``BELL_MIN`` × both
  ends);
- ``id_profile`` (geometry; 004, Fig. 2 read across layers): the TwoNN dimension peaks at an interior layer (above
  the first and the last);
- ``position0_share`` (outliers; massive activations, Sun et al. 2024; 004 / 003 on outliers): where outliers
  dominate (max |h| ≥ ``OUTLIER_MIN`` × the median in some layer), position 0 carries ≥ half of Q(X) in the most
  dominated layer;
- ``layers_linear`` (layer linearity; Razzhigaev et al. 2024): the mean cross-fitted linearity score of the
  consecutive pairs in the middle half of the network is ≥ 0.95 in decoders and below it in encoders
  (``stats.layer_linearity``);
- ``overlap_profile`` (neighbourhoods; Valeriani et al. 2023): the overlap χ₁₀(l, l+1) of consecutive layers is
  higher after the TwoNN peak than at it (``stats.claims_neighbourhoods``).

``Claim``, the thresholds and ``Finding``: ``stats.claims``; the rules that decide the verdicts:
``stats.claims_moments`` (1–6, the core), ``stats.claims_geometry`` (the three above) and ``stats.isoscore``
(``isoscore_low``). ``CLAIMS`` lists every claim with its rule, in order (a new claim is one line there); this
module runs them and lays their verdicts out as a table (``findings_table``) or a cell (``cell``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from normvar_core.stats.bootstrap import RESAMPLES
from normvar_core.stats.claims import Claim, Finding, RunView, finite_or_none, fmt, settle, spearman
from normvar_core.stats.claims_geometry import anisotropy_profile, id_profile, position0_share
from normvar_core.stats.claims_moments import (
    cv_min_intermediate,
    identity,
    m_grows_vb_shrinks,
    null_vs_run,
    tradeoff_slope,
    vw_share_grows,
)
from normvar_core.stats.claims_neighbourhoods import overlap_profile
from normvar_core.stats.isoscore import isoscore_low
from normvar_core.stats.layer_linearity import layers_linear

CLAIMS: tuple[Claim, ...] = (
    Claim("identity", "002", "Q(X_t) = M(X_t) + V(X_t) for every type, to machine precision (eq. 1)", identity),
    Claim(
        "cv_min_intermediate",
        "002",
        "C.V. of Q(X_t) is smallest in an intermediate layer (§5.2, Fig. 4)",
        cv_min_intermediate,
        per_type=True,
    ),
    Claim(
        "tradeoff_slope",
        "002",
        "in that layer V(X_t) on M(X_t) has slope ≈ −1 and high R² (post-LN encoders, Fig. 4)",
        tradeoff_slope,
        per_type=True,
    ),
    Claim(
        "vw_share_grows",
        "002",
        "V_W(X)/V(X) grows with depth (Fig. 6)",
        vw_share_grows,
        per_type=True,
        needs_interval=True,
    ),
    Claim(
        "m_grows_vb_shrinks",
        "002",
        "M(X)/Q(X) grows and V_B(X)/Q(X) shrinks with depth (§5.3, Fig. 5)",
        m_grows_vb_shrinks,
        per_type=True,
        needs_interval=True,
    ),
    Claim(
        "null_vs_run",
        "003",
        "random Gaussian vectors of the same shape reproduce the trade-off (C.V. of Q(X_t), slope)",
        null_vs_run,
        per_type=True,
    ),
    Claim(
        "anisotropy_profile",
        "004",
        "anisotropy is flat across layers in encoders, bell-shaped in decoders (Fig. 1)",
        anisotropy_profile,
        needs_interval=True,
    ),
    Claim("id_profile", "004", "intrinsic dimension (TwoNN) rises then falls across layers", id_profile),
    Claim(
        "isoscore_low",
        "004",
        "embeddings use their space unevenly: IsoScore ι < 0.5 in every layer past the embeddings (Rudman et al. 2022)",
        isoscore_low,
        needs_interval=True,
    ),
    Claim(
        "position0_share",
        "ENV",
        "where outliers dominate, position 0 carries most of Q(X)",
        position0_share,
        needs_interval=True,
    ),
    Claim(
        "layers_linear",
        "004",
        "consecutive middle layers are linear maps of each other (cross-fitted linearity score ≥ 0.95) in "
        "decoders, less so in encoders (Razzhigaev et al. 2024)",
        layers_linear,
        needs_interval=True,
    ),
    Claim(
        "overlap_profile",
        "ENV",
        "neighbourhoods change more at the ID peak than after it: χ₁₀(l, l+1) at the TwoNN "
        "peak is below its mean over the layers after it (Valeriani et al. 2023, §3)",
        overlap_profile,
    ),
)
"""Every claim with the rule that decides it, in the findings' order (CLI, Findings page, deck)."""
CLAIM_IDS = tuple(c.id for c in CLAIMS)


def findings(run, *, resamples: int = RESAMPLES, seed: int = 0) -> list[Finding]:
    """Every claim of ``CLAIMS`` tested on ``run`` (a ``runs.reader.Run``), in order: its rule's finding with the
    claim's wording and seed."""
    rv = RunView.of(run, resamples=resamples, seed=seed)
    rv.layer_stats.attrs["dim"] = int(run.dim)
    return [replace(settle(c, c.rule(rv), rv), claim=c.wording, seed=c.seed) for c in CLAIMS]


def findings_table(runs_findings: dict) -> pd.DataFrame:
    """{run name: [Finding]} -> one row per (claim, run): id, claim, seed, run, verdict, value, low, high, layer,
    why."""
    rows = []
    for name, fs in runs_findings.items():
        for f in fs:
            lo, hi = f.interval if f.interval else (None, None)
            rows.append(
                {
                    "id": f.id,
                    "claim": f.claim,
                    "seed": f.seed,
                    "run": name,
                    "verdict": f.verdict,
                    "value": finite_or_none(f.value),
                    "low": finite_or_none(lo),
                    "high": finite_or_none(hi),
                    "layer": f.layer,
                    "why": f.why,
                }
            )
    return pd.DataFrame(rows, columns=["id", "claim", "seed", "run", "verdict", "value", "low", "high", "layer", "why"])


def samples_note(runs_findings: dict) -> str | None:
    """{run: [Finding]} -> a sentence when the runs' TwoNN samples differ (``geometry.samples_differ``, from
    what the id_profile findings read off each run), else None."""
    from normvar_core.stats.layer_geometry import samples_differ

    sizes = {}
    for name, fs in runs_findings.items():
        f = next((f for f in fs if f.id == "id_profile"), None)
        if f is not None and f.details.get("id_sample"):
            sizes[name] = (int(f.details["id_sample"]), int(f.details.get("id_batches", 0)))
    return samples_differ(sizes)


def cell(f: Finding) -> str:
    """'holds: −0.98 [−1.02, −0.95] @6' — one short cell for tables and slides; the layer linearity adds its
    in-sample score and the embeddings per dimension beside the cross-fitted value; a TwoNN profile that the context
    bias leaves undecided names the cross-context estimate too ('cannot tell: 9.95 [9.93, 9.96] @4 · cross-context
    16.2 @6')."""
    if f.value is None or not np.isfinite(f.value):
        return f.verdict
    s = f"{f.verdict}: {fmt(f.value)}"
    if f.interval:
        s += f" [{fmt(f.interval[0])}, {fmt(f.interval[1])}]"
    if f.layer is not None:
        s += f" @{f.layer}"
    if f.details.get("in_sample") is not None and f.details.get("per_dim") is not None:  # layers_linear: both scores
        s += f" · in-sample {fmt(f.details['in_sample'])} · {fmt(f.details['per_dim'])} embeddings per dimension"
    if f.details.get("context_split"):  # id_profile: the two TwoNN estimates disagree (claims_geometry.context_split)
        s += f" · cross-context {fmt(f.details['cross_peak'])} @{f.details['cross_peak_layer']}"
    return s


__all__ = [
    "CLAIMS",
    "CLAIM_IDS",
    "Claim",
    "Finding",
    "findings",
    "findings_table",
    "samples_note",
    "cell",
    "spearman",
    "RunView",
]
