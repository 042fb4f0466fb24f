"""The IsoScore figure (Rudman et al. 2022; ``stats.isoscore``): ι per layer, one line per run on a (relative)
depth axis, its 95 % split-half interval as a band, Gaussian nulls dashed in their run's colour
(``viz.curve_figures.per_layer_lines``). A declared
figure (``viz/page_figures.FIGURES``; the formula: ``stats/isoscore.py``): the Geometry page's "IsoScore per layer"
section and the deck's slide call it
with the generic builder arguments (``views/_sections``, ``report.slides.figure_slide``)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go

from normvar_core.viz.curve_figures import per_layer_layout, per_layer_lines

READING = (
    "IsoScore per layer (Rudman et al. 2022)<br><sup>ι = 1: every direction carries the same variance; "
    "ι = (k − 1)/(d − 1): k of the d directions share it equally, the rest carry none</sup>"
)
"""The default title: the figure's name and how to read ι."""


def isoscore_figure(
    curves: Mapping[str, pd.DataFrame],
    *,
    relative: bool = True,
    num_hidden_states: Mapping[str, int] | None = None,
    presentation: bool = False,
    bands: Mapping[str, pd.DataFrame] | None = None,
    null_curves: Mapping[str, pd.DataFrame] | None = None,
    null_of: Mapping[str, str] | None = None,
    title: str | None = None,
) -> go.Figure:
    """ι per layer of each run's ``layer_geometry`` (``curves``: label -> table with ``layer`` and ``isoscore``);
    ``bands``: label -> the run's ``intervals`` table (its ``isoscore`` split-half rows, when stored);
    ``null_curves``: Gaussian nulls' tables, dashed, in the colour of the run ``null_of`` names (else grey).
    The y axis is ι on [0, 1]: 1 = every direction carries the same variance, (k − 1)/(d − 1) = k of d."""
    fig = go.Figure()
    per_layer_lines(
        fig,
        curves,
        "isoscore",
        "IsoScore ι",
        relative=relative,
        num_hidden_states=num_hidden_states,
        bands=bands,
        null_curves=null_curves,
        null_of=null_of,
    )
    fig.update_yaxes(range=[0, 1.02])
    return per_layer_layout(
        fig, relative=relative, y_title="IsoScore ι (1 = isotropic)", title=title or READING, presentation=presentation
    )


__all__ = ["isoscore_figure", "READING"]
