"""A figure's downloads: PNG/SVG/PDF through kaleido (a persistent server, started on first use), the
16:9 slide size of presentation mode and the reports, and its data as CSV. The decks' one export path:
``on_slide`` (a page's figure at slide size, its traces untouched) and ``side_by_side`` (one figure per run,
each keeping its own axes, in columns or rows of one figure)."""

from __future__ import annotations

import copy
import re
import threading

import numpy as np
import pandas as pd
import plotly.graph_objects as go

_kaleido_lock = threading.Lock()
_kaleido_started = False


#: kaleido's own loggers and its browser driver's: at INFO/DEBUG they print ~100 lines per deck into the
#: terminal of `normvar up` (the worker renders decks); warnings still show
KALEIDO_LOGGERS = ("kaleido", "choreographer", "logistro")


def quiet_kaleido() -> None:
    import logging

    for name in KALEIDO_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def _start_kaleido() -> None:
    global _kaleido_started
    with _kaleido_lock:
        quiet_kaleido()
        if _kaleido_started:
            return
        try:
            import kaleido

            kaleido.start_sync_server(silence_warnings=True)
        except TypeError:  # older signature
            import kaleido

            kaleido.start_sync_server()
        except Exception:
            pass
        _kaleido_started = True


def to_image(
    fig: go.Figure, fmt: str = "png", *, width: int | None = None, height: int | None = None, scale: float = 2.0
) -> bytes:
    """PNG/SVG/PDF bytes through kaleido (Debian's chromium). The first call starts a persistent
    kaleido server (~1 s per image afterwards)."""
    fmt = fmt.lower()
    if fmt not in ("png", "svg", "pdf", "jpeg", "webp"):
        raise ValueError(f"unsupported image format {fmt!r}")
    _start_kaleido()
    w = width or fig.layout.width or 1100
    h = height or fig.layout.height or 500
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The kopts argument is ignored")
        return fig.to_image(format=fmt, width=w, height=h, scale=scale if fmt in ("png", "jpeg", "webp") else 1)


SLIDE_SIZE = (1600, 900)  # 16:9, the report's slides and presentation-mode downloads


def export_image(fig: go.Figure, fmt: str = "png", *, presentation: bool = False) -> bytes:
    """A figure download: at its on-screen size, or in presentation mode at slide size (16:9)."""
    if presentation:
        return to_image(fig, fmt, width=SLIDE_SIZE[0], height=SLIDE_SIZE[1])
    return to_image(fig, fmt)


def is_decade(x) -> bool:
    """Whether ``x`` > 0 is a whole power of ten."""
    x = float(x)
    return x > 0 and abs(np.log10(x) - round(np.log10(x))) < 1e-9


def decades_only(fig: go.Figure) -> go.Figure:
    """Every logarithmic axis of ``fig`` labelled at whole decades only (pages and slides alike): an axis with its
    own tick values keeps them as ticks, with the labels of those that are not a power of ten left blank; any
    other gets one tick per decade (``dtick = 1``: no "2, 5" between). In place; returns ``fig``."""
    for name in [k for k in fig.layout.to_plotly_json() if _AXIS.match(k)]:
        axis = fig.layout[name]
        if axis.type != "log":
            continue
        if axis.tickvals is not None:
            labels = axis.ticktext if axis.ticktext is not None else [str(v) for v in axis.tickvals]
            axis.ticktext = [t if is_decade(v) else "" for v, t in zip(axis.tickvals, labels)]
        elif axis.dtick is None:
            axis.dtick = 1
    return fig


def on_slide(fig: go.Figure, width: int, height: int) -> go.Figure:
    """A page's figure on a slide: the same traces (names, fills, colours, legend), at ``width`` × ``height`` and
    without its title (the slide's heading says it); log axes labelled at whole decades (``decades_only``)."""
    fig.update_layout(width=width, height=height, title=None)
    return decades_only(fig)


_AXIS = re.compile(r"^([xy])axis(\d*)$")
_REF = re.compile(r"^([xy])(\d*)( domain)?$")


def _squeeze(lo: float, span: float, a: float, b: float) -> list[float]:
    return [lo + a * span, lo + b * span]


GAP_PX = {"rows": 100, "columns": 110, "colorbar": 175}
"""The room between two panels of ``side_by_side``, in pixels: between rows, the upper row's x tick labels, the lower
row's heading and its subplot titles; between columns, the right panel's y tick labels and title, and with a
colour bar also the left panel's bar, its labels and its title."""


def _gap(figs: dict[str, go.Figure], rows: bool, size: tuple[int, int]) -> float:
    """``GAP_PX`` as a fraction of the plot area of a figure of ``size`` (width, height) px with the first figure's
    margins."""
    m = next(iter(figs.values())).layout.margin
    w, h = size[0] - (m.l or 80) - (m.r or 80), size[1] - (m.t or 100) - (m.b or 80)
    bar = any(getattr(getattr(t, "marker", None), "showscale", False) for f in figs.values() for t in f.data)
    px = GAP_PX["rows"] if rows else GAP_PX["colorbar" if bar else "columns"]
    return px / max(h if rows else w, 1)


def _place_colorbar(tr: dict, rows: bool, lo: float, span: float) -> None:
    """A trace's colour bar beside its own panel: in rows, over the panel's height; in columns, right of it."""
    bar = (tr.get("marker") or {}).get("colorbar")
    if bar is None and not (tr.get("marker") or {}).get("showscale"):
        return
    bar = tr["marker"].setdefault("colorbar", {})
    if rows:
        bar["y"], bar["len"] = lo + bar.get("y", 0.5) * span, bar.get("len", 1.0) * span
        bar["yanchor"] = bar.get("yanchor", "middle")
    else:
        bar["x"] = lo + span + 0.005


def side_by_side(
    figs: dict[str, go.Figure], *, rows: bool = False, gap: float | None = None, size: tuple[int, int] | None = None
) -> go.Figure:
    """One figure of several: each of ``figs`` (label -> figure, e.g. one run's trade-off) keeps its own traces,
    axes, annotations and shapes, placed in its own column (``rows``: its own row) of the paper, headed by its
    label. Axis k of the i-th figure becomes axis k + (the axes of the figures before it), anchored to that
    figure's own axes (a figure's single pair of axes has no anchor: plotly would draw every y axis on the first
    x axis); a domain [a, b] of the split direction becomes [lo + a·s, lo + b·s] with s = (1 − gap·(n − 1)) / n,
    lo = i·(s + gap); paper coordinates of annotations, shapes and colour bars map the same way. A legend entry is
    shown once per name. In rows, the x-axis titles sit under the bottom row only. ``size`` (width, height) px: the
    figure's size, and the gap (unless given) is ``GAP_PX`` at that size."""
    n = len(figs)
    if n == 1:
        one = next(iter(figs.values()))
        return one.update_layout(width=size[0], height=size[1]) if size else one
    if gap is None:
        gap = _gap(figs, rows, size) if size else (0.12 if rows else 0.09)
    span = (1.0 - gap * (n - 1)) / n
    d = "y" if rows else "x"
    first = next(iter(figs.values())).to_plotly_json()
    layout = {k: v for k, v in first["layout"].items() if not _AXIS.match(k) and k not in ("annotations", "shapes")}
    layout["title"] = None
    annotations: list = []
    shapes: list = []
    data, legend = [], set()
    off = {"x": 0, "y": 0}
    for i, (label, fig) in enumerate(figs.items()):
        lo = (1.0 - span - i * (span + gap)) if rows else i * (span + gap)
        js = copy.deepcopy(fig.to_plotly_json())
        axes = {
            "x1": {},
            "y1": {},
            **{m.group(1) + (m.group(2) or "1"): v for k, v in js["layout"].items() if (m := _AXIS.match(k))},
        }
        count = {a: max([int(k[1:]) for k in axes if k[0] == a] or [1]) for a in "xy"}

        def ref(r, a_off=dict(off)):  # noqa: B006  -- a snapshot of this figure's offsets, read only
            """An axis reference of this figure ("x2", "y domain", "paper", "free") in the combined figure."""
            m = _REF.match(r) if isinstance(r, str) else None
            if not m:
                return r
            k = int(m.group(2) or 1) + a_off[m.group(1)]
            return f"{m.group(1)}{k if k > 1 else ''}{m.group(3) or ''}"

        last = i == n - 1
        for name, ax in axes.items():
            ax = dict(ax)
            ax.setdefault("anchor", "y" if name[0] == "x" else "x")  # plotly's default, made this figure's own
            if rows and name[0] == "x" and not last:
                ax.pop("title", None)
            for key in ("anchor", "matches", "overlaying", "scaleanchor"):
                if key in ax:
                    ax[key] = ref(ax[key])
            if name[0] == d:
                ax["domain"] = _squeeze(lo, span, *ax.get("domain", [0.0, 1.0]))
            k = int(name[1:]) + off[name[0]]
            layout[f"{name[0]}axis{k if k > 1 else ''}"] = ax
        for tr in js["data"]:
            for a in "xy":
                if tr.get("type", "scatter") not in ("table", "pie"):
                    tr[f"{a}axis"] = ref(tr.get(f"{a}axis", a))
            if tr.get("showlegend", True) and tr.get("name") is not None:
                tr["showlegend"] = tr["name"] not in legend and tr.get("showlegend", True)
                legend.add(tr["name"])
            _place_colorbar(tr, rows, lo, span)
            data.append(tr)
        for group, out in (("annotations", annotations), ("shapes", shapes)):
            for item in js["layout"].get(group, []):
                for a in "xy":
                    r = item.get(f"{a}ref", a if group == "annotations" else "paper")
                    if r == "paper" and a == d and a in item and isinstance(item[a], (int, float)):
                        item[a] = lo + item[a] * span
                    elif r == "paper" and a == d and group == "shapes":
                        item[f"{a}0"], item[f"{a}1"] = _squeeze(lo, span, item.get(f"{a}0", 0), item.get(f"{a}1", 1))
                    else:
                        item[f"{a}ref"] = ref(r)
                    if f"a{a}ref" in item:  # an arrow's tail given in axis units (else pixels: unchanged)
                        item[f"a{a}ref"] = ref(item[f"a{a}ref"])
                out.append(item)
        head = dict(text=f"<b>{label}</b>", showarrow=False, xref="paper", yref="paper", font=dict(size=22))
        annotations.append(
            {**head, "x": lo + span / 2, "y": 1.0, "xanchor": "center", "yanchor": "bottom", "yshift": 30}
            if not rows
            else {**head, "x": 0.0, "y": lo + span, "xanchor": "left", "yanchor": "bottom", "yshift": 28}
        )
        off = {a: off[a] + count[a] for a in "xy"}
    layout["annotations"], layout["shapes"] = annotations, shapes
    return go.Figure(dict(data=data, layout=layout)).update_layout(**dict(zip(("width", "height"), size or ())))


def to_csv(df: pd.DataFrame) -> bytes:
    """A figure's data as CSV (UTF-8)."""
    return df.to_csv(index=False).encode("utf-8")


def figure_data(fig: go.Figure) -> pd.DataFrame:
    """Every trace's x/y (and text) as one long table — the CSV fallback for any figure."""
    rows: list[pd.DataFrame] = []
    for i, tr in enumerate(fig.data):
        x = getattr(tr, "x", None)
        y = getattr(tr, "y", None)
        if x is None or y is None:
            continue
        d = pd.DataFrame({"trace": tr.name or f"trace{i}", "x": np.asarray(x), "y": np.asarray(y)})
        rows.append(d)
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["trace", "x", "y"])


__all__ = [
    "decades_only",
    "is_decade",
    "GAP_PX",
    "SLIDE_SIZE",
    "to_image",
    "export_image",
    "on_slide",
    "side_by_side",
    "to_csv",
    "figure_data",
]
