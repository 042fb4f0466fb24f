"""The IsoScore figure (Rudman et al. 2022; ``stats.isoscore``): ι per layer, one line per run on a (relative)
depth axis, its 95 % split-half interval as a band, Gaussian nulls dashed in their run's colour. A declared
figure (``viz/page_figures.FIGURES``; the formula: ``stats/isoscore.py``): the Geometry page's "IsoScore per layer" section and the deck's slide call it
with the generic builder arguments (``views/_sections``, ``report.slides.figure_slide``)."""
from __future__ import annotations

from typing import Mapping

import pandas as pd
import plotly.graph_objects as go

from normvar_core.viz.bands import add_band, band_rows
from normvar_core.viz.overlay import NULL_COLOR, depth_x, null_line
from normvar_core.viz.theme import PALETTE, apply_theme

READING = ("IsoScore per layer (Rudman et al. 2022)<br><sup>ι = 1: every direction carries the same variance; "
           "ι = (k − 1)/(d − 1): k of the d directions share it equally, the rest carry none</sup>")
"""The default title: the figure's name and how to read ι."""


def isoscore_figure(curves: Mapping[str, pd.DataFrame], *, relative: bool = True,
                    num_hidden_states: Mapping[str, int] | None = None, presentation: bool = False,
                    bands: Mapping[str, pd.DataFrame] | None = None, null_curves: Mapping[str, pd.DataFrame] | None = None,
                    null_of: Mapping[str, str] | None = None, title: str | None = None) -> go.Figure:
    """ι per layer of each run's ``layer_geometry`` (``curves``: label -> table with ``layer`` and ``isoscore``);
    ``bands``: label -> the run's ``intervals`` table (its ``isoscore`` split-half rows, when stored);
    ``null_curves``: Gaussian nulls' tables, dashed, in the colour of the run ``null_of`` names (else grey).
    The y axis is ι on [0, 1]: 1 = every direction carries the same variance, (k − 1)/(d − 1) = k of d."""
    depth = num_hidden_states or {}
    fig = go.Figure()
    colors = {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(curves)}
    for label, df in (null_curves or {}).items():
        df = df.sort_values("layer")
        null_line(fig, depth_x(df, relative, depth.get(label)), df["isoscore"], label, what="IsoScore ι =",
                  color=colors.get((null_of or {}).get(label), NULL_COLOR))
    for label, df in curves.items():
        df = df.sort_values("layer")
        x = depth_x(df, relative, depth.get(label))
        band = band_rows((bands or {}).get(label), "isoscore", df["layer"])
        if band is not None:
            add_band(fig, x, *band, color=colors[label], label=label, what="95 % split-half interval")
        fig.add_trace(go.Scatter(x=x, y=df["isoscore"], mode="lines+markers", name=label, legendgroup=label,
                                 line=dict(color=colors[label], width=2.5), customdata=df["layer"],
                                 hovertemplate=f"{label}<br>layer %{{customdata}}<br>IsoScore ι = %{{y:.4g}}"
                                               "<extra></extra>"))
    fig.update_xaxes(title_text="relative depth" if relative else "layer")
    fig.update_yaxes(title_text="IsoScore ι (1 = isotropic)", range=[0, 1.02])
    fig.update_layout(title=title or READING, height=560 if presentation else 460,
                      hovermode="closest", legend=dict(orientation="h", yanchor="top", y=-0.18, x=0))
    apply_theme(fig, presentation)
    fig.update_layout(margin=dict(b=130 if presentation else 110))
    return fig


__all__ = ["isoscore_figure", "READING"]
