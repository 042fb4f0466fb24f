"""The dashboard's view state and its URL form (the figure theme: ``viz/theme.py``; layers by depth: ``viz/depth.py``).

A view is what a shared link restores: the run, the page, the layer, the frequency band (log10 n_t),
the highlighted tokens, the presentation toggle, and for Compare a second run and a relative depth.
``ViewState.from_query`` parses ``st.query_params`` (a mapping of strings, forgiving: a malformed
value falls back to the default) and ``to_query`` writes only the values that differ from the defaults,
so links stay short. Pure Python + plotly: no Streamlit import here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

#: the study's band for regressions and statistics over X (§5.3): 1 <= log10 n_t <= 5
from normvar_core.constants import STUDY_BAND_LOG10 as DEFAULT_BAND
from normvar_core.viz.pages import PAGE_KEYS as PAGES  # the registry: viz/pages.py

MAX_TOKENS = 50
MAX_TOKEN_CHARS = 64


def _first(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return str(value[-1]) if value else None
    return str(value)


#: the largest integer a link may carry (a layer, a token id): far above any model's, far below int64's
MAX_INT = 2**31 - 1
_DIGITS = frozenset("0123456789")


def parse_int(value: Any, default: int | None = None, *, lo: int = -MAX_INT, hi: int = MAX_INT) -> int | None:
    """``"12"`` -> 12: an optional sign and ASCII digits only (no ``inf``, ``1e400``, ``3.5``, ``٣`` or ``1_0``),
    at most 10 digits, within [``lo``, ``hi``]; anything else is ``default``."""
    s = _first(value)
    if s is None:
        return default
    s = s.strip()
    digits = s[1:] if s[:1] in ("+", "-") else s
    if not digits or len(digits) > 10 or not set(digits) <= _DIGITS:
        return default
    x = int(s)
    return x if lo <= x <= hi else default


_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")


def _ascii_float(s: str) -> float | None:
    """``s`` as a finite float when it is a plain ASCII decimal (``1.5``, ``-2e3``; at most 32 characters): no
    ``inf``, ``nan``, ``1_0`` or non-ASCII digits; else None."""
    s = s.strip()
    if len(s) > 32 or not _FLOAT.fullmatch(s):
        return None
    x = float(s)
    return x if math.isfinite(x) else None


def parse_float(value: Any, default: float | None = None) -> float | None:
    """``"0.5"`` -> 0.5 (``_ascii_float``); anything else is ``default``."""
    s = _first(value)
    x = None if s is None else _ascii_float(s)
    return default if x is None else x


def parse_bool(value: Any, default: bool = False) -> bool:
    s = _first(value)
    if s is None:
        return default
    return s.strip().lower() in ("1", "true", "yes", "on")


def parse_band(
    value: Any, default: tuple[float, float] = DEFAULT_BAND, bounds: tuple[float, float] = (0.0, 9.0)
) -> tuple[float, float]:
    """``"1,5"`` or ``"1-5"`` -> (1.0, 5.0) in log10 n_t; clipped to ``bounds``, ordered."""
    s = _first(value)
    if not s:
        return default
    parts = [
        _ascii_float(p) for p in s.replace(";", ",").replace("-", ",").replace("_", ",").split(",") if p.strip() != ""
    ]
    if len(parts) != 2 or None in parts:
        return default
    lo, hi = cast("list[float]", parts)  # None is excluded above
    lo, hi = sorted((lo, hi))
    lo = min(max(lo, bounds[0]), bounds[1])
    hi = min(max(hi, bounds[0]), bounds[1])
    return (round(lo, 2), round(hi, 2))


def format_band(band: Sequence[float]) -> str:
    return ",".join(_num(b) for b in band)


def _num(x: float) -> str:
    return f"{float(x):g}"


def band_counts(band: Sequence[float]) -> tuple[float, float]:
    """log10 band -> (n_min, n_max) as counts; (1, 5) -> (10, 100000)."""
    lo, hi = band
    return (10.0 ** float(lo), 10.0 ** float(hi))


def parse_tokens(value: Any) -> list[str]:
    """``"the, once ,winked"`` -> ["the", "once", "winked"]: stripped, deduplicated, capped.

    Accepts a list too (repeated query params)."""
    if value is None:
        return []
    items: list[str] = []
    raw = value if isinstance(value, (list, tuple)) else [value]
    for chunk in raw:
        for tok in str(chunk).split(","):
            tok = tok.strip()[:MAX_TOKEN_CHARS]
            if tok and tok not in items:
                items.append(tok)
    return items[:MAX_TOKENS]


def parse_names(value: Any, limit: int = 16) -> list[str]:
    """``"a,b"`` (run names: no commas in them) -> ["a", "b"]: stripped, deduplicated, capped."""
    names: list[str] = []
    raw = value if isinstance(value, (list, tuple)) else ([] if value is None else [value])
    for chunk in raw:
        for n in str(chunk).split(","):
            n = n.strip()[:200]
            if n and n not in names:
                names.append(n)
    return names[:limit]


def parse_ids(value: Any) -> list[int]:
    """``"101,2003"`` -> [101, 2003]: token ids (``parse_int``'s ASCII digits, 0 to ``MAX_INT``), deduplicated,
    capped; anything else is dropped."""
    out: list[int] = []
    for tok in parse_tokens(value):
        i = parse_int(tok, lo=0)
        if i is not None and i not in out:
            out.append(i)
    return out


def format_tokens(tokens: Sequence[str]) -> str:
    return ",".join(t for t in tokens if t)


@dataclass
class ViewState:
    """Everything a link restores. ``layer`` is a hidden-state index (0 = input embeddings);
    ``None`` means "the run's middle layer"."""

    run: str | None = None
    page: str | None = None
    layer: int | None = None
    band: tuple[float, float] = DEFAULT_BAND
    tokens: list[str] = field(default_factory=list)
    presentation: bool = False
    run2: str | None = None
    depth: float | None = None
    token: str | None = None
    """The Token view's token (``?token=``)."""
    null: str | None = None
    """The Gaussian null run overlaid on the figures (``?null=``, the Gaussian-geometry comment)."""
    pool: bool = False
    """Pool sub-word variants ("##ing" with "ing", "Ġthe" with "the"; fn. 7) — ``?pool=1``."""
    overlay: list[str] = field(default_factory=list)
    """The runs overlaid on Geometry and Layers besides the sidebar's run (``?overlay=a,b``)."""
    relative: bool | None = None
    """The relative-depth toggle of the overlay pages (``?rel=1`` / ``?rel=0``; None = the page's default)."""
    cloud: list[int] = field(default_factory=list)
    """The Token clouds' picked token ids (``?cloud=101,2003``); empty: App. A's selection."""
    cmap: str = "pca"
    """The Token clouds' map: "pca" or "tsne" (``?map=tsne``)."""
    section: str | None = None
    """The open section (tab) of a page with several figures (``?section=slopes``); None = its first."""

    @classmethod
    def from_query(cls, params: Mapping[str, Any]) -> ViewState:
        page = _first(params.get("page"))
        depth = parse_float(params.get("depth"))
        return cls(
            run=_first(params.get("run")) or None,
            page=page if page in PAGES else None,
            layer=parse_int(params.get("layer"), lo=0),
            band=parse_band(params.get("band")),
            tokens=parse_tokens(params.get("tokens")),
            presentation=parse_bool(params.get("present")),
            run2=_first(params.get("run2")) or None,
            depth=None if depth is None else min(max(depth, 0.0), 1.0),
            token=(_first(params.get("token")) or "")[:MAX_TOKEN_CHARS] or None,
            null=_first(params.get("null")) or None,
            pool=parse_bool(params.get("pool")),
            overlay=parse_names(params.get("overlay")),
            relative=None if params.get("rel") is None else parse_bool(params.get("rel")),
            cloud=parse_ids(params.get("cloud")),
            cmap="tsne" if _first(params.get("map")) == "tsne" else "pca",
            section=(_first(params.get("section")) or "")[:40] or None,
        )

    def to_query(self) -> dict[str, str]:
        q: dict[str, str] = {}
        if self.run:
            q["run"] = self.run
        if self.page:
            q["page"] = self.page
        if self.layer is not None:
            q["layer"] = str(int(self.layer))
        if tuple(self.band) != DEFAULT_BAND:
            q["band"] = format_band(self.band)
        if self.tokens:
            q["tokens"] = format_tokens(self.tokens)
        if self.presentation:
            q["present"] = "1"
        if self.run2:
            q["run2"] = self.run2
        if self.depth is not None:
            q["depth"] = _num(round(self.depth, 3))
        if self.token:
            q["token"] = self.token
        if self.null:
            q["null"] = self.null
        if self.pool:
            q["pool"] = "1"
        if self.overlay:
            q["overlay"] = ",".join(self.overlay)
        if self.relative is not None:
            q["rel"] = "1" if self.relative else "0"
        if self.cloud:
            q["cloud"] = ",".join(str(int(t)) for t in self.cloud)
        if self.cmap != "pca":
            q["map"] = self.cmap
        if self.section:
            q["section"] = self.section
        return q
