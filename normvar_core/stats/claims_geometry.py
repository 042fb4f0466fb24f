"""The verdict rules of the claims on the layers' geometry and outliers (declared by the geometry and outliers
measures; Razzhigaev et al. and the massive activations of Sun et al. 2024): a flat or bell-shaped anisotropy profile,
an interior peak of the TwoNN dimension, and position 0's share of Q(X) where outliers dominate."""

from __future__ import annotations

import numpy as np

from normvar_core.stats import layer_geometry as G
from normvar_core.stats import twonn_context
from normvar_core.stats.bootstrap import batch_interval, split_half_interval
from normvar_core.stats.claims import (
    BELL_MIN,
    FLAT_MAX,
    OUTLIER_MIN,
    STRADDLES,
    UNSURE,
    Finding,
    RunView,
    against,
    finding,
    finite_interval,
    fmt,
)


def anisotropy_profile(rv: RunView) -> Finding:
    """Claim 7 (004 §4.1, Fig. 1): λ₁/Σλ across layers is flat in encoders ((max − min) / mean ≤ FLAT_MAX) and
    bell-shaped in decoders (largest interior / max(first, last) ≥ BELL_MIN); split-half interval when stored."""
    g = rv.geometry
    if g is None or "anisotropy" not in g or g["anisotropy"].notna().sum() < 3:
        return finding(
            "anisotropy_profile",
            "untestable",
            why="no layer geometry in this run (or < 3 layers): compute without --no-geometry",
        )
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
        h = {
            k: x.set_index("layer")["anisotropy"].reindex(layers).to_numpy(float) for k, x in rv.halves.groupby("half")
        }
        if {"a", "b"} <= set(h) and np.isfinite(h["a"]).all() and np.isfinite(h["b"]).all():
            iv = finite_interval(*split_half_interval(val, stat(h["a"]), stat(h["b"]), bounds=(0.0, np.inf)))  # ≥ 0
    peak = int(layers[int(np.nanargmax(a))])
    if rv.is_decoder:
        verdict = against(val, iv, BELL_MIN, holds_above=True)
        rule = f"decoder: largest interior anisotropy / max(first, last) = {fmt(val)} (bell when ≥ {BELL_MIN})"
    else:
        verdict = against(val, iv, FLAT_MAX, holds_above=False)
        rule = f"encoder: (max − min) / mean across layers = {fmt(val)} (flat when ≤ {FLAT_MAX})"
    ivs = f" [{fmt(iv[0])}, {fmt(iv[1])}] split-half" + (f" — {STRADDLES}" if verdict == UNSURE else "") if iv else ""
    prof = ", ".join(f"{x:.3f}" for x in a)
    return finding(
        "anisotropy_profile",
        verdict,
        value=val,
        interval=iv,
        layer=peak,
        why=f"{rule}{ivs}; λ₁/Σλ of the exact covariance per layer: {prof}",
        details={"decoder": rv.is_decoder, "peak_layer": peak},
    )


TWONN_MIN_DISTINCT = 100
"""Below this many distinct sampled embeddings in a layer, TwoNN's fit rests on too few neighbours (its 90 %
kept ratios μ = r₂/r₁ of a handful of points; Facco et al. 2017 report an error of order d/√N): the profile
is "cannot tell"."""


def _interior_peak(d: np.ndarray) -> tuple[int, bool]:
    """(index of the largest value, whether it is interior and above the first and the last)."""
    k = int(np.nanargmax(d))
    return k, bool(0 < k < len(d) - 1 and d[k] > d[0] and d[k] > d[-1])


def _cross_context(g) -> tuple[str, dict]:
    """The same rule on the cross-context TwoNN (neighbours from other sentences only,
    ``stats.twonn_context``): its words and details, or nothing for a run file without it."""
    if "twonn_id_cross" not in g or g["twonn_id_cross"].notna().sum() < 3:
        return "", {}
    d, layers = g["twonn_id_cross"].to_numpy(float), g["layer"].to_numpy(int)
    k, ok = _interior_peak(d)
    verdict = "holds" if ok else "fails"
    share, at = float("nan"), None
    if "same_sentence_nn" in g and g["same_sentence_nn"].notna().any():
        row = g.loc[g["same_sentence_nn"].idxmax()]
        share, at = float(row["same_sentence_nn"]), int(row["layer"])
    words = (
        f"; cross-context TwoNN (neighbours from other sentences only): peak {fmt(d[k])} at layer {layers[k]} "
        f"(first {fmt(d[0])}, last {fmt(d[-1])}) — {verdict} on it"
    )
    if said := twonn_context.context_sentence(g):
        words += f". {said}"
    return words, {
        "cross_verdict": verdict,
        "cross_peak_layer": int(layers[k]),
        "cross_peak": float(d[k]),
        "same_sentence_nn_max": share,
        "same_sentence_layer": at,
    }


def context_split(seed_verdict: str, details: dict) -> str | None:
    """Why the seed's TwoNN profile cannot decide the claim, or None when it can: some layer's same-sentence share
    is above ``twonn_context.SAME_SENTENCE_WARN`` (the seed's estimate is biased low by context there) and the
    cross-context estimate (``details`` of ``_cross_context``) gives the other verdict. Both estimates are then
    named, and the verdict is "cannot tell"."""
    share, cross = details.get("same_sentence_nn_max"), details.get("cross_verdict")
    if cross is None or share is None or not share > twonn_context.SAME_SENTENCE_WARN or cross == seed_verdict:
        return None
    return (
        f"the two TwoNN estimates disagree — the Razzhigaev et al. 2024 protocol's ({seed_verdict} on it) and the "
        f"cross-context one ({cross} on it, peak {fmt(details['cross_peak'])} at layer "
        f"{details['cross_peak_layer']}) — while "
        f"{share:.0%} of the sampled tokens at layer {details['same_sentence_layer']} have their nearest neighbour "
        f"in their own sentence (above {twonn_context.SAME_SENTENCE_WARN:.0%}): the protocol's estimate is biased by "
        f"context on this corpus, so neither decides (a larger corpus lowers the share)"
    )


def id_profile(rv: RunView) -> Finding:
    """Claim 8 on a run: ``id_profile_of`` its ``layer_geometry``."""
    return id_profile_of(rv.geometry)


def id_profile_of(g) -> Finding:
    """Claim 8 (004 Fig. 2): the TwoNN dimension peaks at an interior layer, above the first and the last;
    interval mean ± t_{B−1} s / √B over Razzhigaev et al.'s B batches
    (``bootstrap.batch_interval``). Decided on Razzhigaev et al.'s estimate; the same rule on
    the cross-context estimate (``stats.twonn_context``) is reported beside it, and where the two disagree while
    some layer's same-sentence share is above ``SAME_SENTENCE_WARN`` (``context_split``) the verdict is
    "cannot tell" with both. "cannot tell" too when a layer's sample holds fewer than ``TWONN_MIN_DISTINCT``
    distinct embeddings. ``g``: a run's ``layer_geometry`` (the Geometry and Compare pages state this finding
    beside the figure: the same rule as the findings)."""
    if g is None or "twonn_id" not in g or g["twonn_id"].notna().sum() < 3:
        return finding(
            "id_profile",
            "untestable",
            why="no TwoNN estimates in this run (the geometry off, or a TwoNN sample (--id-sample) of 0 or too "
            "few embeddings)",
        )
    g = g.sort_values("layer")
    d, layers = g["twonn_id"].to_numpy(float), g["layer"].to_numpy(int)
    k, ok = _interior_peak(d)
    nb = int(g["twonn_batches"].iloc[k]) if "twonn_batches" in g else 0
    sd = float(g["twonn_id_std"].iloc[k]) if "twonn_id_std" in g else float("nan")
    biv = batch_interval(d[k], sd, nb)
    iv = finite_interval(*biv) if biv else None
    prof = ", ".join(f"{x:.1f}" for x in d)
    ivs = f" ± {fmt((iv[1] - iv[0]) / 2)} over {nb} batches (Student's t)" if iv else " (one batch: no interval)"
    size, batches = G.recorded_sample(g)
    cross, details = _cross_context(g)
    why = (
        f"peak TwoNN dimension {fmt(d[k])}{ivs} at layer {layers[k]} (first {fmt(d[0])}, last {fmt(d[-1])}); "
        f"per layer: {prof}; {G.sample_text(g)}{cross}"
    )
    verdict = "holds" if ok else "fails"
    if split := context_split(verdict, details):
        verdict, why = UNSURE, f"{split} — {why}"
        details["context_split"] = split
    if "twonn_duplicates" in g and "id_sample" in g:
        distinct = (g["id_sample"] - g["twonn_duplicates"]).to_numpy(int)
        few = int(np.argmin(distinct))
        if distinct[few] < TWONN_MIN_DISTINCT:
            verdict = UNSURE
            why = (
                f"layer {layers[few]}'s sample holds only {distinct[few]} distinct embeddings of "
                f"{int(g['id_sample'].iloc[few])} (the rest are identical copies): TwoNN needs at least "
                f"{TWONN_MIN_DISTINCT} distinct neighbours to say anything — {why}"
            )
    return finding(
        "id_profile",
        verdict,
        value=float(d[k]),
        interval=iv,
        layer=int(layers[k]),
        why=why,
        details={"id_sample": size, "id_batches": batches, **details},
    )


def position0_share(rv: RunView) -> Finding:
    """Claim 10 (massive activations, Sun et al. 2024; 004/003 on outliers): where max |h| ≥ OUTLIER_MIN × the
    median in some layer, position 0 carries ≥ half of Q(X) in the most dominated layer."""
    if rv.exclude_position0:
        return finding("position0_share", "untestable", why="the run excluded position 0 (--exclude-position0)")
    o = rv.outliers
    if o is None or not len(o):
        return finding("position0_share", "untestable", why="no outlier statistics (geometry off, or a null run)")
    o = o.sort_values("layer")
    dom = o[o["max_over_median"] >= OUTLIER_MIN]
    if not len(dom):
        return finding(
            "position0_share",
            "untestable",
            why=f"outliers do not dominate: max |h| / median < {OUTLIER_MIN:g} in every layer "
            f"(largest {fmt(float(o['max_over_median'].max()))})",
        )
    row = dom.loc[dom["max_over_median"].idxmax()]
    layer, share = int(row["layer"]), float(row["q_share_pos0"])
    iv = None
    if rv.halves is not None and "q_share_pos0" in rv.halves:
        h = {k: x.set_index("layer")["q_share_pos0"].get(layer, np.nan) for k, x in rv.halves.groupby("half")}
        if {"a", "b"} <= set(h):
            iv = finite_interval(*split_half_interval(share, h["a"], h["b"]))
    verdict = against(share, iv, 0.5, holds_above=True)
    unsure = f"; {STRADDLES}" if verdict == UNSURE else ""
    facts = position0_facts(rv, layer, share)
    return finding(
        "position0_share",
        verdict,
        value=share,
        interval=iv,
        layer=layer,
        why=f"layer {layer}: max |h| = {fmt(float(row['max_over_median']))} × median; position 0 carries "
        f"{share:.1%} of Q(X) (holds when ≥ 50 %; {len(dom)} layer(s) with outliers ≥ {OUTLIER_MIN:g} × "
        f"median){unsure}" + facts.pop("text"),
        details=facts,
    )


def position0_facts(rv: RunView, layer: int, share: float) -> dict:
    """A decoder's first position (the attention sink; massive activations, Sun et al. 2024) at ``layer``, with
    and without it, from what the run holds: Q(X) = Σ‖x‖²/n with it and without it (the ``position0`` measure's
    exact Q of the rest, else (1 − s)·Q·n / (n − n₀), s its share of Σ‖x‖², n₀ = one position 0 per sentence), the
    largest |h_j| with it and without it (the outliers' top activations, by position), and the anisotropy with it
    (the geometry's) and without it (the ``position0`` measure's exact covariance of the rest). What the run does
    not hold is said, never guessed. {"text": the words added to the finding, and the figures}."""
    out: dict = {"text": ""}
    o = rv.outliers.set_index("layer")  # type: ignore[union-attr]  # the caller found outliers in this run
    meta = getattr(rv.run, "meta", None) or {}
    n, n0 = int(meta.get("n_embeddings") or 0), int(meta.get("n_sentences") or 0)
    run = rv.run
    p0 = run.table("layer_position0") if run is not None and "layer_position0" in run.table_names else None
    p0 = None if p0 is None else p0.set_index("layer")
    if layer in o.index and n > n0 > 0:
        q = float(o.loc[layer, "q"])
        q_without = (1.0 - share) * q * n / (n - n0)
        if p0 is not None and layer in p0.index and np.isfinite(p0.loc[layer, "q_without_position0"]):
            q_without = float(p0.loc[layer, "q_without_position0"])
        out.update(q_with=q, q_without=q_without)
        out["text"] += f"; Q(X) = {fmt(q)} with position 0, {fmt(q_without)} without it"
    if run is not None and "top_activations" in getattr(run, "table_names", ()):
        top = run.table("top_activations")
        top = top[top["layer"] == layer]
        first, rest = top[top["position"] == 0], top[top["position"] != 0]
        if len(first) and len(rest):
            a, b = float(first["value"].abs().max()), float(rest["value"].abs().max())
            out.update(max_abs_pos0=a, max_abs_rest=b)
            out["text"] += f"; max |h| = {fmt(a)} at position 0, {fmt(b)} elsewhere"
    geo = rv.geometry
    if rv.is_decoder and geo is not None and layer in set(geo["layer"]) and "anisotropy" in geo:
        aniso = float(geo.set_index("layer").loc[layer, "anisotropy"])
        out["anisotropy_with"] = aniso
        if p0 is not None and layer in p0.index and np.isfinite(p0.loc[layer, "anisotropy_without_position0"]):
            out["anisotropy_without"] = without = float(p0.loc[layer, "anisotropy_without_position0"])
            out["text"] += f"; anisotropy {fmt(aniso)} with position 0, {fmt(without)} without it"
        else:
            out["text"] += (
                f"; anisotropy {fmt(aniso)} with position 0 (without it: not in this run; compute with the geometry "
                "and without --exclude-position0, as the attention sink dominates this layer)"
            )
    return out


__all__ = [
    "anisotropy_profile",
    "id_profile",
    "id_profile_of",
    "context_split",
    "position0_share",
    "position0_facts",
    "TWONN_MIN_DISTINCT",
]
