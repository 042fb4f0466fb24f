"""What a claim is (``Claim``: id, seed, wording and the rule deciding it), the thresholds of the rules, what a
verdict holds (``Finding``), and what the rules read from a run, gathered once (``RunView``). The rules
themselves: ``claims_moments`` (Yamagiwa & Shimodaira 2024 and the Gaussian-geometry comment: the core
claims), ``claims_geometry`` (the layer
geometry's and the outliers') and ``isoscore``; ``findings.CLAIMS`` lists every claim with its rule, in the
findings' order."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from normvar_core.constants import STUDY_BAND
from normvar_core.stats.bootstrap import RESAMPLES
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


@dataclass
class Finding:
    id: str
    claim: str
    seed: str
    verdict: str  # holds | fails | cannot tell (the interval straddles the rule's threshold) | untestable
    value: float | None = None
    interval: list | None = None  # [low, high] or None
    layer: int | None = None
    why: str = ""
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["value"] = finite_or_none(self.value)
        d["interval"] = [finite_or_none(x) for x in self.interval] if self.interval is not None else None
        d["details"] = {
            k: finite_or_none(v) if isinstance(v, (float, np.floating)) else v for k, v in self.details.items()
        }
        return d


@dataclass(frozen=True)
class Claim:
    """A row of the findings: its stable ``id``, the ``seed`` it tests, the claim in words, and the ``rule`` that
    decides it (a function of the run's ``RunView`` returning its ``Finding``)."""

    id: str
    seed: str
    wording: str
    rule: Callable[[RunView], Finding]
    per_type: bool = False
    """Whether the rule reads the band's per-type statistics (so ``settle`` asks ``RunView.repeated`` of it)."""
    needs_interval: bool = False
    """Whether the rule's verdict compares a measured value with a threshold, so that without an interval (no split
    halves: one sentence, ``--no-halves``) ``settle`` says "cannot tell" rather than trust the point estimate."""


def finite_or_none(x):
    """``x`` as a float, or None when it is missing, NaN or infinite (what JSON and the tables hold)."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def fmt(x, digits: int = 3) -> str:
    """``x`` in ``digits`` significant digits for a verdict's text; "n/a" when missing or not finite."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}g}"


UNSURE = "cannot tell"
STRADDLES = "its interval straddles the threshold: cannot tell on this run (more sentences narrow it)"
ZERO_WIDTH = 1e-6
"""An interval narrower than this share of its larger end has zero width: rounding, not a measured spread. The
states are float32, and a model's forward pass rounds one sentence's states differently in batches of another
shape on some CPUs (about 1e-7 of their size), so two halves holding the same sentences differ at that level:
about 8 float32 roundings is the threshold, far below any spread two halves of real text show."""
MIN_VARYING = 3
"""The per-type claims need at least this many band types (and at least half of them) whose occurrences are not
all one point."""


def zero_width(interval: list | None) -> bool:
    """Whether [lo, hi] has zero width: hi − lo ≤ ``ZERO_WIDTH`` · max(|lo|, |hi|) (a split-half interval whose two
    halves gave the same value, a bootstrap whose every resample did)."""
    if interval is None:
        return False
    lo, hi = (float(x) for x in interval)
    return bool(np.isfinite(lo) and np.isfinite(hi) and hi - lo <= ZERO_WIDTH * max(abs(lo), abs(hi)))


def settle(claim: Claim, f: Finding, rv: RunView) -> Finding:
    """A rule's ``holds`` or ``fails`` turned into "cannot tell", with the reason added to its why, when the data
    cannot carry it: it has no interval where it needs one (``Claim.needs_interval``), its interval has zero width
    (``zero_width``: nothing measured its uncertainty, so a verdict from the point estimate alone would look
    certain), or the claim reads the band's per-type statistics and most
    types have every occurrence at one point (``RunView.repeated``). Other verdicts pass unchanged."""
    if f.verdict not in ("holds", "fails"):
        return f
    reasons = [rv.repeated() if claim.per_type else None]
    if claim.needs_interval and f.interval is None:
        reasons.append(
            "no interval: the run has no two halves to measure its uncertainty (one sentence, or computed "
            "with --no-halves), so the point estimate alone cannot carry a verdict"
        )
    if zero_width(f.interval):
        reasons.append(
            f"its interval [{fmt(f.interval[0])}, {fmt(f.interval[1])}] has zero width: the two halves of "  # type: ignore[index]  # zero_width(None) is False
            "the corpus (or every resample of its types) give the same value, as when the corpus repeats "
            "one sentence, so nothing measures its uncertainty"
        )
    why = "; and ".join(r for r in reasons if r)
    if not why:
        return f
    return replace(f, verdict=UNSURE, why=f"{f.why}; {UNSURE} ({f.verdict} on the point estimate): {why}")


def against(value: float, interval: list | None, threshold: float, *, holds_above: bool) -> str:
    """The verdict of a rule ``value >= threshold`` (``holds_above``) or ``value <= threshold``: "cannot tell"
    when the value's interval lies on both sides of the threshold."""
    if interval is not None and interval[0] < threshold < interval[1]:
        return UNSURE
    return "holds" if (value >= threshold if holds_above else value <= threshold) else "fails"


def finite_interval(lo, hi) -> list | None:
    """[lo, hi] as floats, or None unless both ends are finite."""
    return [float(lo), float(hi)] if np.isfinite(lo) and np.isfinite(hi) else None


def finding(cid: str, verdict: str, **numbers) -> Finding:
    """Claim ``cid``'s Finding with its ``verdict`` and numbers, as a rule returns it: ``findings.findings`` fills
    in the claim's wording and seed from its ``Claim``."""
    return Finding(cid, "", "", verdict, **numbers)


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


@dataclass
class RunView:
    """What the claims read from a run (a ``runs.reader.Run``), gathered once, with the bootstrap's ``resamples``
    and ``seed``; ``memo`` keeps what several rules share (the moments' bootstrap: ``claims_moments``)."""

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
    run: Any = field(default=None, repr=False)
    resamples: int = RESAMPLES
    seed: int = 0
    memo: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, run, *, resamples: int = RESAMPLES, seed: int = 0) -> RunView:
        L = len(run.layers)
        tabs = [run.token_table(layer) for layer in run.layers]
        first = tabs[0]

        def grid(c):
            return np.stack([t[c].to_numpy(np.float64) for t in tabs]) if L else np.zeros((0, 0))

        notes = run.meta.get("notes") or {}
        opts = run.meta.get("options") or {}

        def get(t):
            return run.table(t) if t in run.table_names else None

        return cls(
            name=run.name,
            layers=list(run.layers),
            num_hidden_states=run.num_hidden_states,
            is_decoder=bool(notes.get("is_decoder", False)),
            norm_placement=str(run.meta.get("norm_placement") or ""),
            is_null=str(run.meta.get("source") or "model").startswith("null:"),
            exclude_position0=bool(opts.get("exclude_position0", False)),
            token_ids=first["token_id"].to_numpy(np.int64),
            n=first["n"].to_numpy(np.int64),
            q=grid("q"),
            m=grid("m"),
            v=grid("v"),
            layer_stats=run.layer_stats(),
            halves=get("halves_layer"),
            geometry=get("layer_geometry"),
            outliers=get("layer_outliers"),
            run=run,
            resamples=resamples,
            seed=seed,
        )

    def band(self) -> np.ndarray:
        return in_band(self.n, *STUDY_BAND)

    def repeated(self) -> str | None:
        """Why the band's per-type statistics cannot carry a verdict, or None when they can: a type whose
        occurrences are all one point (V(X_t) ≤ ``IDENTITY_TOL`` · Q(X_t) in every layer: it only ever occurs in
        one context, as in a corpus that repeats one sentence) adds a count but no spread, so the statistics rest
        on the types that vary; fewer than ``MIN_VARYING`` of them, or fewer than half of the band's types, is too
        few. None too when the band is empty (the rules say untestable themselves)."""
        band = self.band()
        total = int(band.sum())
        if total == 0:
            return None
        q, v = self.q[:, band], self.v[:, band]
        varying = int(((v > IDENTITY_TOL * np.abs(q)) & np.isfinite(v)).any(axis=0).sum())
        if varying >= MIN_VARYING and 2 * varying >= total:
            return None
        return (
            f"{total - varying:,} of the band's {total:,} types have every occurrence at one point "
            f"(V(X_t) = 0: the corpus repeats their contexts, e.g. one sentence many times), so the per-type "
            f"statistics rest on {varying:,} types that vary (at least {MIN_VARYING} and half of the band needed)"
        )

    def interior(self, layer: int) -> bool:
        return 0 < int(layer) < self.num_hidden_states - 1


__all__ = [
    "Claim",
    "Finding",
    "RunView",
    "finding",
    "finite_interval",
    "finite_or_none",
    "fmt",
    "settle",
    "zero_width",
    "UNSURE",
    "ZERO_WIDTH",
    "MIN_VARYING",
    "spearman",
    "SLOPE_TOL",
    "R2_MIN",
    "RHO_MIN",
    "FLAT_MAX",
    "BELL_MIN",
    "OUTLIER_MIN",
    "SUPPORT_MIN",
    "DIP",
    "IDENTITY_TOL",
    "CROSS_TOL",
]
