"""The neighbourhood figures of the Geometry page and the deck: the intrinsic dimension across scales (GRIDE,
``layer_gride``), the neighbourhood overlap between layers (``layer_overlap``) and the overlap against k
(``overlap_curve``), all drawn by the generic builder arguments (``curves``: label -> the run's table;
``null_curves``: label -> a Gaussian null's)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normvar_core.viz.overlay import NULL_COLOR, depth_x
from normvar_core.viz.theme import PALETTE, apply_theme

SCALES_SENTENCE = (
    "Read each line left to right as the same layer seen from closer to farther: n1 is the neighbour "
    "rank the dimension is read at (GRIDE, μ = r_2n1 / r_n1). A flat line is a dimension that does not "
    "depend on scale; a rising line is a manifold that looks higher-dimensional at coarser scales. "
    "Dash-dotted: neighbours from other sentences only; where it meets the solid line, the same-sentence "
    "neighbours stop mattering at that scale. Grey: the Gaussian null of the same moments."
)
NULL_OVERLAP = "a Gaussian null whose layers are drawn independently has χ_k = k / n exactly (in expectation)"
"""The Gaussian null's overlap in one sentence: its closed form (``stats.overlap.chance``)."""
OVERLAP_SENTENCE = (
    "The share of each sampled token's 10 nearest neighbours still among its 10 nearest at the next layer "
    "(solid) and at the last (dash-dotted); thin: its own sentence masked. Dotted: chance, 10 / n, n a "
    "point's other points in its batch: " + NULL_OVERLAP + "."
)
OVERLAP_K_SENTENCE = (
    "Each line is one layer against the next, read at k = 1 … 64 nearest neighbours (log axis): solid "
    "all neighbours, dash-dotted its own sentence masked. A line far above the dotted chance line k / n "
    "keeps its neighbourhoods from layer to layer at that scale; a line on it keeps no more than "
    "independent layers would."
)


def _wrapped(text: str, width: int = 120) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width)


def _laid_out(fig: go.Figure, heading: str, sentence: str, title: str | None, presentation: bool) -> go.Figure:
    """The figure's title (``title``, else ``heading`` with ``sentence`` wrapped under it), legend under the plot,
    theme and margins."""
    lines = _wrapped(sentence)
    notes = sum(str(a.text).count("<br>") + 1 for a in fig.layout.annotations if a.yref == "paper" and a.y > 1)
    top, bottom = 70 + 24 * (len(lines) + 1) + 20 * notes, 190 if presentation else 170
    fig.update_layout(
        title=title or (heading + "<br><sup>" + "<br>".join(lines) + "</sup>"),
        height=(400 if presentation else 360) + top + bottom,  # the plot keeps its height under any title
        hovermode="closest",
        # under the x axis's title, never over it: the plot's bottom margin holds the tick labels, the axis title
        # and then the legend
        legend=dict(orientation="h", yanchor="top", y=-0.2, x=0, yref="paper"),
    )
    apply_theme(fig, presentation)
    # the title's lines and any note above the plot sit in the top margin, outside the plot
    fig.update_layout(margin=dict(b=bottom, t=top))
    return fig


def _log_x(fig: go.Figure, values, title: str) -> None:
    """A logarithmic x axis titled ``title``, ticked at ``values`` (the scales or the k read)."""
    ticks = sorted({int(x) for x in values})
    fig.update_xaxes(title_text=title, type="log", tickvals=ticks, ticktext=[str(x) for x in ticks])


EQUAL_TOL = 1e-3
"""A masked overlap within this of the unmasked one at every layer is the same line (said, not drawn)."""


def masked_gap(df: pd.DataFrame, col: str) -> float | None:
    """max |χ_masked − χ| over the layers holding both (None when none does)."""
    d = (df[col] - df[col.removesuffix("_masked")]).abs().to_numpy(float)
    d = d[np.isfinite(d)]
    return float(d.max()) if d.size else None


def data_range(traces, pad: float = 0.04) -> list[float] | None:
    """[low, high] of the drawn values ± their error bars, padded by ``pad`` of the span and kept within [0, 1]
    (an overlap is a share): the axis spans the data, not the chance line far below it; None without data."""
    lo, hi = [], []
    for t in traces:
        y = np.asarray(t.y, float)
        e = np.asarray(t.error_y.array, float) if t.error_y is not None and t.error_y.array is not None else 0.0
        lo.append(np.nanmin(y - e))
        hi.append(np.nanmax(y + e))
    if not lo or not np.isfinite(lo + hi).all():
        return None
    a, b = float(min(lo)), float(max(hi))
    span = max(b - a, 0.02)
    return [max(a - pad * span, 0.0), min(b + pad * span, 1.0)]


def note_above(fig: go.Figure, text: str) -> None:
    """``text`` as a note over the plot's top left corner, under the title (never inside the plot), wrapped at 110
    characters (``_laid_out`` leaves its lines room in the top margin)."""
    fig.add_annotation(
        text="<br>".join(line for para in text.split("<br>") for line in _wrapped(para, 110)),
        xref="paper",
        yref="paper",
        x=0,
        y=1.02,
        xanchor="left",
        yanchor="bottom",
        showarrow=False,
        align="left",
        font=dict(size=12),
    )


def chance_note(fig: go.Figure, curves: Mapping[str, pd.DataFrame]) -> None:
    """Chance k / n as an annotation above the plot (its dotted line stays, for the hover and the legend, but far
    below the data it would squeeze them): per run its range over k."""
    parts = []
    for label, df in curves.items():
        ch = df[(df["pair"] == "next") & ~df["masked"].astype(bool)].groupby("k")["chance"].mean()
        if len(ch):
            who = f"{label}: " if len(curves) > 1 else ""
            parts.append(
                f"{who}{ch.iloc[0]:.2g} at k = {int(ch.index[0])} to {ch.iloc[-1]:.2g} at k = {int(ch.index[-1])}"
            )
    if parts:
        note_above(fig, "chance k / n (dotted, below the axis where it is out of range): " + "; ".join(parts))


def drawn_layers(layers: np.ndarray) -> np.ndarray:
    """The up to four evenly spaced layers of ``layers`` (sorted) that a figure of this module draws, both ends
    included."""
    return layers[np.unique(np.linspace(0, len(layers) - 1, min(4, len(layers))).round().astype(int))]


def scales_figure(
    curves: Mapping[str, pd.DataFrame],
    *,
    relative: bool = True,
    num_hidden_states: Mapping[str, int] | None = None,
    presentation: bool = False,
    bands=None,
    null_curves: Mapping[str, pd.DataFrame] | None = None,
    null_of: Mapping[str, str] | None = None,
    title: str | None = None,
) -> go.Figure:
    """GRIDE against n1 (log axis) for up to four evenly spaced layers of each run: solid unmasked, dash-dotted
    with the point's own sentence masked, bars ± the larger of the likelihood's error and the spread over
    batches; a Gaussian null's unmasked curves in grey. The depth arguments are accepted and not used."""
    del relative, num_hidden_states, bands, null_of
    fig = go.Figure()
    for i, (label, df) in enumerate(curves.items()):
        for j, layer in enumerate(drawn_layers(np.unique(df["layer"].to_numpy(int)))):
            color = PALETTE[(i * 4 + j) % len(PALETTE)]
            name = f"{label} · layer {layer}" if len(curves) > 1 else f"layer {layer}"
            for masked, dash, what in ((False, "solid", "all neighbours"), (True, "dashdot", "other sentences")):
                rows = df[(df["layer"] == layer) & (df["masked"] == masked)].sort_values("n1")
                bar = np.maximum(rows["gride_id_err"].to_numpy(), rows["gride_id_std"].to_numpy())
                fig.add_trace(
                    go.Scatter(
                        x=rows["n1"],
                        y=rows["gride_id"],
                        mode="lines+markers",
                        name=f"{name} ({what})",
                        legendgroup=name,
                        line=dict(color=color, dash=dash, width=2.5 if not masked else 1.8),
                        error_y=dict(type="data", array=bar, visible=True),
                        hovertemplate=f"{name}, {what}<br>n1 = %{{x}}: ID %{{y:.4g}}<extra></extra>",
                    )
                )
    for label, df in (null_curves or {}).items():
        for layer in drawn_layers(np.unique(df["layer"].to_numpy(int))):
            rows = df[(df["layer"] == layer) & (df["masked"] == False)].sort_values("n1")  # noqa: E712  -- elementwise
            fig.add_trace(
                go.Scatter(
                    x=rows["n1"],
                    y=rows["gride_id"],
                    mode="lines",
                    name=f"{label} · layer {layer}",
                    line=dict(color=NULL_COLOR, dash="dash", width=1.2),
                    hovertemplate=f"{label}, layer {layer}<br>n1 = %{{x}}: ID %{{y:.4g}}<extra></extra>",
                )
            )
    _log_x(fig, [x for df in curves.values() for x in df["n1"]], "n1 (GRIDE's scale: μ = r_2n1 / r_n1)")
    fig.update_yaxes(title_text="intrinsic dimension (GRIDE)")
    return _laid_out(fig, "ID across scales (GRIDE, Denti et al. 2022)", SCALES_SENTENCE, title, presentation)


def overlap_figure(
    curves: Mapping[str, pd.DataFrame],
    *,
    relative: bool = True,
    num_hidden_states: Mapping[str, int] | None = None,
    presentation: bool = False,
    bands=None,
    null_curves=None,
    null_of=None,
    title: str | None = None,
) -> go.Figure:
    """χ₁₀ of each layer with the next (solid) and with the last (dash-dotted), thin with the own sentence masked,
    and chance (dotted) against depth (relative when ``relative``). A masked line within ``EQUAL_TOL`` of its
    unmasked one everywhere is not drawn (it would hide under it): an annotation says they are equal; one that
    differs names its largest difference in its legend entry."""
    del bands, null_curves, null_of
    fig, notes = go.Figure(), []
    for i, (label, df) in enumerate(curves.items()):
        df = df.sort_values("layer")
        x = depth_x(df, relative, (num_hidden_states or {}).get(label))
        color = PALETTE[i % len(PALETTE)]
        same = []
        for col, dash, width, what in (
            ("overlap_next", "solid", 2.5, "next layer"),
            ("overlap_next_masked", "solid", 1.2, "next layer, own sentence masked"),
            ("overlap_last", "dashdot", 2.5, "last layer"),
            ("overlap_last_masked", "dashdot", 1.2, "last layer, own sentence masked"),
        ):
            if col.endswith("_masked"):
                gap = masked_gap(df, col)
                if gap is None or gap <= EQUAL_TOL:  # it would lie on the unmasked line: said, not drawn
                    same.append(what.split(",")[0])
                    continue
                what += f", up to {gap:.3f} from all neighbours"
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=df[col],
                    mode="lines+markers",
                    name=f"{label} ({what})",
                    line=dict(color=color, dash=dash, width=width),
                    hovertemplate=f"{label}, {what}<br>%{{x}}: %{{y:.3f}}<extra></extra>",
                )
            )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=df["chance"],
                mode="lines",
                name=f"{label} (chance: Gaussian null)",
                line=dict(color=NULL_COLOR, dash="dot", width=1.2),
            )
        )
        if same:
            notes.append(
                (f"{label}: " if len(curves) > 1 else "")
                + f"with the own sentence masked, the overlap with the {' and the '.join(same)} equals the unmasked "
                f"one to within {EQUAL_TOL:g} (not drawn: no token's 10 nearest neighbours come from its own sentence)"
            )
    if notes:
        note_above(fig, "<br>".join(notes))
    fig.update_xaxes(title_text="relative depth" if relative else "layer")
    fig.update_yaxes(title_text="shared 10 nearest neighbours χ₁₀", range=[0, 1.02])
    return _laid_out(
        fig, "Neighbourhood overlap between layers (Valeriani et al. 2023)", OVERLAP_SENTENCE, title, presentation
    )


def overlap_k_figure(
    curves: Mapping[str, pd.DataFrame],
    *,
    relative: bool = True,
    num_hidden_states: Mapping[str, int] | None = None,
    presentation: bool = False,
    bands=None,
    null_curves=None,
    null_of=None,
    title: str | None = None,
) -> go.Figure:
    """χ_k of each of up to four evenly spaced layers with the next kept layer against k (``overlap_curve``, its
    ``pair == "next"`` rows; k on a log axis, χ_k on a linear one spanning the data, ``data_range``): solid
    unmasked, dash-dotted with the own sentence masked, bars ± the spread over batches; per run the chance k / n
    (the ``chance`` column, unmasked), dotted grey, and its values in an annotation (``chance_note``). The depth
    arguments are accepted and not used (the table's rows with the last layer are in its CSV)."""
    del relative, num_hidden_states, bands, null_curves, null_of
    fig = go.Figure()
    for i, (label, df) in enumerate(curves.items()):
        nxt = df[df["pair"] == "next"]
        for j, layer in enumerate(drawn_layers(np.unique(nxt["layer"].to_numpy(int)))):
            color = PALETTE[(i * 4 + j) % len(PALETTE)]
            name = f"{label} · layer {layer}" if len(curves) > 1 else f"layer {layer}"
            for masked, dash, what in ((False, "solid", "all neighbours"), (True, "dashdot", "other sentences")):
                rows = nxt[(nxt["layer"] == layer) & (nxt["masked"] == masked)].sort_values("k")
                to = int(rows["to_layer"].iloc[0]) if len(rows) else layer + 1
                fig.add_trace(
                    go.Scatter(
                        x=rows["k"],
                        y=rows["overlap"],
                        mode="lines+markers",
                        name=f"{name} → {to} ({what})",
                        legendgroup=name,
                        line=dict(color=color, dash=dash, width=2.5 if not masked else 1.8),
                        error_y=dict(type="data", array=rows["overlap_std"].to_numpy(), visible=True),
                        hovertemplate=f"{name} → {to}, {what}<br>k = %{{x}}: χ_k %{{y:.3f}}<extra></extra>",
                    )
                )
        chance = df[(df["pair"] == "next") & (df["masked"] == False)].groupby("k")["chance"].mean()  # noqa: E712  -- elementwise
        fig.add_trace(
            go.Scatter(
                x=chance.index.to_numpy(),
                y=chance.to_numpy(),
                mode="lines",
                name=f"{label} (chance k / n: Gaussian null)",
                line=dict(color=NULL_COLOR, dash="dot", width=1.5),
                hovertemplate=f"{label}, chance<br>k = %{{x}}: k / n %{{y:.4f}}<extra></extra>",
            )
        )
    _log_x(fig, [x for df in curves.values() for x in df["k"]], "k (nearest neighbours compared)")
    drawn = [t for t in fig.data if "chance" not in (t.name or "") and t.y is not None and len(t.y)]
    fig.update_yaxes(title_text="χ_k(l, l+1)", range=data_range(drawn))
    chance_note(fig, curves)
    return _laid_out(
        fig, "Neighbourhood overlap against k (Valeriani et al. 2023)", OVERLAP_K_SENTENCE, title, presentation
    )


__all__ = [
    "scales_figure",
    "overlap_figure",
    "overlap_k_figure",
    "drawn_layers",
    "SCALES_SENTENCE",
    "OVERLAP_SENTENCE",
    "OVERLAP_K_SENTENCE",
    "data_range",
    "masked_gap",
    "EQUAL_TOL",
    "chance_note",
    "note_above",
    "NULL_OVERLAP",
]
