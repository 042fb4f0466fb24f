"""A figure's downloads: PNG/SVG/PDF through kaleido (a persistent server, started on first use), the
16:9 slide size of presentation mode and the reports, and its data as CSV."""
from __future__ import annotations

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
        except Exception:  # noqa: BLE001 — a server already running, or none possible: to_image still works
            pass
        _kaleido_started = True


def to_image(fig: go.Figure, fmt: str = "png", *, width: int | None = None, height: int | None = None,
             scale: float = 2.0) -> bytes:
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


__all__ = ["SLIDE_SIZE", "to_image", "export_image", "to_csv", "figure_data"]
