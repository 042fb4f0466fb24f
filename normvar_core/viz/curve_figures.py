"""Per-layer curves on a depth axis: one line per run (its colour from the theme's palette), its 95 % split-half
interval as a band when the run's ``intervals`` table has the column's rows (or the curve's own table holds it as
``<column>_low`` and ``<column>_high``), Gaussian nulls dashed in their run's colour. :func:`per_layer_lines` draws them
(IsoScore's figure and every declared curve share it);
:func:`layer_curve_figure` is the figure of a curve a measure declares (``runs.declared.LayerCurve``), called
with the generic builder arguments by the Geometry page (``views/_sections``) and the deck
(``report.slides.declared_slides``)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go

from normvar_core.runs.declared import LayerCurve
from normvar_core.viz.bands import add_band, band_rows
from normvar_core.viz.overlay import NULL_COLOR, depth_x, null_line
from normvar_core.viz.theme import PALETTE, apply_theme


def per_layer_lines(
    fig: go.Figure,
    curves: Mapping[str, pd.DataFrame],
    column: str,
    what: str,
    *,
    relative: bool = True,
    num_hidden_states: Mapping[str, int] | None = None,
    bands: Mapping[str, pd.DataFrame] | None = None,
    null_curves: Mapping[str, pd.DataFrame] | None = None,
    null_of: Mapping[str, str] | None = None,
) -> None:
    """``column`` per layer of each run's table (``curves``: label -> table with ``layer`` and ``column``) as
    lines with markers; ``bands``: label -> the run's ``intervals`` table (its ``column`` rows, when stored);
    ``null_curves``: Gaussian nulls' tables, dashed first, in the colour of the run ``null_of`` names (else grey).
    ``what`` names the value in the hover ("IsoScore ι")."""
    depth = num_hidden_states or {}
    colors: dict[str | None, str] = {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(curves)}
    for label, df in (null_curves or {}).items():
        df = df.sort_values("layer")
        null_line(
            fig,
            depth_x(df, relative, depth.get(label)),
            df[column],
            label,
            what=f"{what} =",
            color=colors.get((null_of or {}).get(label), NULL_COLOR),
        )
    for label, df in curves.items():
        df = df.sort_values("layer")
        x = depth_x(df, relative, depth.get(label))
        band = band_rows((bands or {}).get(label), column, df["layer"])
        if band is None and {f"{column}_low", f"{column}_high"} <= set(df.columns):  # the table's own interval
            band = df[f"{column}_low"].to_numpy(float), df[f"{column}_high"].to_numpy(float)
        if band is not None:
            add_band(fig, x, *band, color=colors[label], label=label, what="95 % split-half interval")
        fig.add_trace(
            go.Scatter(
                x=x,
                y=df[column],
                mode="lines+markers",
                name=label,
                legendgroup=label,
                line=dict(color=colors[label], width=2.5),
                customdata=df["layer"],
                hovertemplate=f"{label}<br>layer %{{customdata}}<br>{what} = %{{y:.4g}}<extra></extra>",
            )
        )


def per_layer_layout(fig: go.Figure, *, relative: bool, y_title: str, title: str, presentation: bool) -> go.Figure:
    """The axes' titles, the title, the legend under the plot and the theme of a per-layer figure."""
    fig.update_xaxes(title_text="relative depth" if relative else "layer")
    fig.update_yaxes(title_text=y_title)
    fig.update_layout(
        title=title,
        height=560 if presentation else 460,
        hovermode="closest",
        legend=dict(orientation="h", yanchor="top", y=-0.18, x=0),
    )
    apply_theme(fig, presentation)
    fig.update_layout(margin=dict(b=130 if presentation else 110))
    return fig


def layer_curve_figure(
    curves: Mapping[str, pd.DataFrame],
    *,
    curve: LayerCurve,
    relative: bool = True,
    num_hidden_states: Mapping[str, int] | None = None,
    presentation: bool = False,
    bands: Mapping[str, pd.DataFrame] | None = None,
    null_curves: Mapping[str, pd.DataFrame] | None = None,
    null_of: Mapping[str, str] | None = None,
    title: str | None = None,
) -> go.Figure:
    """The figure of a declared curve: ``curve.column`` of each run's ``curve.table`` per layer
    (:func:`per_layer_lines`), titled ``curve.title`` with ``curve.description`` under it, the y axis
    ``curve.y_title`` (log scale with ``curve.log_y``)."""
    fig = go.Figure()
    per_layer_lines(
        fig,
        curves,
        curve.column,
        curve.y_title,
        relative=relative,
        num_hidden_states=num_hidden_states,
        bands=bands,
        null_curves=null_curves,
        null_of=null_of,
    )
    if curve.log_y:
        fig.update_yaxes(type="log")
    heading = title or curve.title + (f"<br><sup>{curve.description}</sup>" if curve.description else "")
    return per_layer_layout(fig, relative=relative, y_title=curve.y_title, title=heading, presentation=presentation)


__all__ = ["per_layer_lines", "per_layer_layout", "layer_curve_figure"]
