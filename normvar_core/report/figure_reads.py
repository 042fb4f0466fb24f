"""How a figure's slide reads its table (``slides.figure_slide``): the takeaway sentence and the speaker notes.
``per_layer`` for a per-layer figure (each column's range over a run's layers); ``READS`` maps a figure whose table
is not one row per layer to its own reading (the overlap against k)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from normvar_core.report.run_figures import MISSING, num
from normvar_core.viz.labels import readable
from normvar_core.viz.neighbourhood_figures import drawn_layers
from normvar_core.viz.page_figures import OVERLAP_K, SCALES, Figure
from normvar_core.viz.table_words import for_display


def table_notes(df: pd.DataFrame, cols: list[str]) -> str:
    """The columns as a plain-text table for the speaker notes, each headed by its words
    (``viz.table_words``: no raw column name); a missing value as "—"."""
    return for_display(df[cols]).to_string(index=False, float_format=lambda x: f"{x:.6g}", na_rep=MISSING)


def per_layer(f: Figure, curves: dict) -> tuple[str, str]:
    """The takeaway and notes of a per-layer figure: each of its columns' range over a run's layers, with the layer
    of its largest value, in words (``viz.labels.readable``); the per-layer values in the notes."""
    cols = list(f.columns)
    name = {c: readable(c, f.section if len(cols) == 1 else None) for c in cols}
    take = "; ".join(f"{n}: " + ", ".join(column_range(t, c, name[c]) for c in cols) for n, t in curves.items())
    notes = "\n\n".join(f"{n}\n" + table_notes(t, ["layer", *cols]) for n, t in curves.items())
    return take, notes


def overlap_k(f: Figure, curves: dict) -> tuple[str, str]:
    """The takeaway and notes of the overlap against k (``overlap_curve``, its next-layer rows): per run, over the
    layer pairs the figure draws (``neighbourhood_figures.drawn_layers``, named), the range of the share χ_k of a
    token's k nearest neighbours that the next layer keeps at the smallest and the largest k, unmasked and with the
    own sentence masked; chance k / n at those two k, and the least unmasked χ_k / (k / n) there over the drawn
    pairs. The notes hold every next-layer row, drawn or not."""
    del f
    parts, notes = [], []
    for n, t in curves.items():
        nxt = t[t["pair"] == "next"].sort_values(["masked", "layer", "k"])
        drawn = nxt[nxt["layer"].isin(drawn_layers(np.unique(nxt["layer"].to_numpy(int))))]
        own, masked = drawn[~drawn["masked"].astype(bool)], drawn[drawn["masked"].astype(bool)]
        lo, hi = int(nxt["k"].min()), int(nxt["k"].max())

        def at(rows, k):
            return _span(rows.loc[rows["k"] == k, "overlap"])

        def times(k, own=own):  # the least χ_k / (k / n) at k over the drawn pairs
            rows = own[own["k"] == k]
            return num((rows["overlap"] / rows["chance"]).min(), ".3g")

        chance = own.groupby("k")["chance"].mean()
        pairs = ", ".join(f"{a}→{b}" for a, b in own[["layer", "to_layer"]].drop_duplicates().to_numpy(int))
        parts.append(
            f"{n}: of each sampled token's k nearest neighbours, the next layer keeps {at(own, lo)} at "
            f"k = {lo} and {at(own, hi)} at k = {hi} over the drawn layer pairs {pairs} (own sentence "
            f"masked {at(masked, lo)} and {at(masked, hi)}); chance k / n is {num(chance.get(lo), '.3g')} "
            f"at k = {lo} and {num(chance.get(hi), '.3g')} at k = {hi} (dotted), so the least of them keeps "
            f"{times(lo)}× chance at k = {lo} and {times(hi)}× at k = {hi}"
        )
        notes.append(
            f"{n}\n" + table_notes(nxt, ["layer", "to_layer", "masked", "k", "overlap", "overlap_std", "chance"])
        )
    return "; ".join(parts), "\n\n".join(notes)


def _span(v: pd.Series) -> str:
    """ "0.362–0.603": the range of ``v``'s values, or "—" when it has none."""
    v = v.dropna()
    return f"{v.min():.3f}–{v.max():.3f}" if len(v) else MISSING


def scales(f: Figure, curves: dict) -> tuple[str, str]:
    """The takeaway and notes of the ID across scales (``layer_gride``: GRIDE per layer at n1 = 1 … 64): per run,
    over the layers the figure draws (``neighbourhood_figures.drawn_layers``), each layer's median over the scales,
    unmasked and with the own sentence masked, and the range of those medians over the drawn layers — a robust
    reading, not one noisy scale. The notes: per drawn layer and scale, the estimate, its error and the masked
    one, each column headed in words."""
    del f
    parts, notes = [], []
    for n, t in curves.items():
        drawn = drawn_layers(np.unique(t["layer"].to_numpy(int)))
        rows = t[t["layer"].isin(drawn)].sort_values(["layer", "n1"])
        own, masked = rows[~rows["masked"].astype(bool)], rows[rows["masked"].astype(bool)]
        med = own.groupby("layer")["gride_id"].median().dropna()
        med_m = masked.groupby("layer")["gride_id"].median().dropna()
        if not len(med):
            parts.append(f"{n}: GRIDE's dimension not measured at the drawn layers")
            continue
        scales_read = f"n1 = {int(own['n1'].min())}–{int(own['n1'].max())}"
        parts.append(
            f"{n}: GRIDE's dimension over {scales_read}, median per drawn layer ({', '.join(map(str, drawn))}) "
            f"{_span(med)}, highest at layer {int(med.idxmax())}"
            + (f"; own sentence masked {_span(med_m)}" if len(med_m) else "")
        )
        wide = own.set_index(["layer", "n1"])[["gride_id", "gride_id_err"]]
        if len(masked):
            wide = wide.join(masked.set_index(["layer", "n1"])["gride_id"].rename("gride_id_masked"))
        notes.append(f"{n}\n" + table_notes(wide.reset_index(), list(wide.reset_index().columns)))
    return "; ".join(parts), "\n\n".join(notes)


READS: dict[Figure, Callable[[Figure, dict], tuple[str, str]]] = {OVERLAP_K: overlap_k, SCALES: scales}
"""A figure -> its slide's reading (takeaway, notes), for a figure whose table is not one row per layer."""


def column_range(t, c: str, name: str) -> str:
    """ "IsoScore ι 0.126–0.241 (largest at layer 6)": column ``c``'s range over a run's layers, under its ``name`` in
    words (``viz.labels.readable``); "IsoScore ι undefined" when no layer has a value (a degenerate covariance gives
    NaN)."""
    v = t[c].dropna()
    if not len(v):
        return f"{name} undefined"
    return f"{name} {v.min():.3f}–{v.max():.3f} (largest at layer {int(t.loc[v.idxmax(), 'layer'])})"


__all__ = ["READS", "per_layer", "overlap_k", "scales", "column_range", "table_notes"]
