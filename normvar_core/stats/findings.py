"""The claims of seeds 002, 003 and 004, each tested on one run, with its number, its interval and a
verdict — one function (``findings``) for the CLI, the Findings page and the deck.

Verdicts: ``holds``, ``fails``, ``cannot tell`` (the interval straddles the rule's threshold: ``claims.against``),
``untestable`` (with why). Intervals: bootstrap over token types
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
Then the claims the measures declare (``Measure.claims``), in measure order, each decided by the rule its
declaration names (the rule's docstring states it), for example:

- ``anisotropy_profile`` (geometry; 004 §4.1, Fig. 1): λ₁/Σλ across layers is flat in encoders
  ((max − min) / mean ≤ ``FLAT_MAX``) and bell-shaped in decoders (an interior layer at least ``BELL_MIN`` × both
  ends);
- ``id_profile`` (geometry; 004, Fig. 2 read across layers): the TwoNN dimension peaks at an interior layer (above
  the first and the last);
- ``position0_share`` (outliers; massive activations, Sun et al. 2024; 004 / 003 on outliers): where outliers
  dominate (max |h| ≥ ``OUTLIER_MIN`` × the median in some layer), position 0 carries ≥ half of Q(X) in the most
  dominated layer.

The claims, their thresholds and ``Finding``: ``stats.claims``; the rules that decide the verdicts:
``stats.claims_moments`` (1–6, the core) and the declared rules (``stats.claims_geometry`` for the three above); a
new measure's claim is a line of its declaration. This module runs them in order and lays their verdicts out as
a table (``findings_table``) or a cell (``cell``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from normvar_core.stats.bootstrap import RESAMPLES
from normvar_core.measure import resolve
from normvar_core.stats.claims import (CLAIM_IDS, CLAIMS, DECLARED_CLAIMS, Finding, RunView, finite_or_none, fmt,
                                       spearman)
from normvar_core.stats.claims_moments import (bootstrap_band, cv_min_intermediate, depth_trend, identity, null_vs_run,
                                               point_estimates, tradeoff_slope)


def findings(run, *, resamples: int = RESAMPLES, seed: int = 0) -> list[Finding]:
    """Every claim of ``CLAIMS`` tested on ``run`` (a ``runs.reader.Run``), in order."""
    rv = RunView.of(run)
    rv.layer_stats.attrs["dim"] = int(run.dim)
    pt = point_estimates(rv)
    boot = bootstrap_band(rv, resamples, seed) if rv.band().sum() >= 3 else {"replicates": {}}
    out = [identity(rv)]
    cvf, li = cv_min_intermediate(rv, pt, boot)
    out += [cvf, tradeoff_slope(rv, pt, boot, li, cvf.verdict == "holds"),
            depth_trend(rv, "vw_share_grows", run, [("v_w_over_v", +1)]),
            depth_trend(rv, "m_grows_vb_shrinks", run, [("m_over_q", +1), ("v_b_over_q", -1)]),
            null_vs_run(rv, pt, boot, li, resamples, seed)]
    return out + [resolve(c.rule)(rv) for c in DECLARED_CLAIMS]


def findings_table(runs_findings: dict) -> pd.DataFrame:
    """{run name: [Finding]} -> one row per (claim, run): id, claim, seed, run, verdict, value, low, high, layer, why."""
    rows = []
    for name, fs in runs_findings.items():
        for f in fs:
            lo, hi = f.interval if f.interval else (None, None)
            rows.append({"id": f.id, "claim": f.claim, "seed": f.seed, "run": name, "verdict": f.verdict,
                         "value": finite_or_none(f.value), "low": finite_or_none(lo), "high": finite_or_none(hi),
                         "layer": f.layer, "why": f.why})
    return pd.DataFrame(rows, columns=["id", "claim", "seed", "run", "verdict", "value", "low", "high", "layer", "why"])


def samples_note(runs_findings: dict) -> str | None:
    """{run: [Finding]} -> a sentence when the runs' TwoNN samples differ (``geometry.samples_differ``, from
    what the id_profile findings read off each run), else None."""
    from normvar_core.stats.geometry import samples_differ

    sizes = {}
    for name, fs in runs_findings.items():
        f = next((f for f in fs if f.id == "id_profile"), None)
        if f is not None and f.details.get("id_sample"):
            sizes[name] = (int(f.details["id_sample"]), int(f.details.get("id_batches", 0)))
    return samples_differ(sizes)


def cell(f: Finding) -> str:
    """'holds: −0.98 [−1.02, −0.95] @6' — one short cell for tables and slides."""
    if f.value is None or not np.isfinite(f.value):
        return f.verdict
    s = f"{f.verdict}: {fmt(f.value)}"
    if f.interval:
        s += f" [{fmt(f.interval[0])}, {fmt(f.interval[1])}]"
    if f.layer is not None:
        s += f" @{f.layer}"
    return s


__all__ = ["CLAIMS", "CLAIM_IDS", "Finding", "findings", "findings_table", "samples_note", "cell", "spearman", "RunView"]
