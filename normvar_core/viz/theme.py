"""The figures' theme: the palette, the decomposition's fixed colours, the highlight colour, the colour scale,
the layout (white, presentation mode with large fonts and thick lines) and the legend under the plot."""

from __future__ import annotations

from typing import Any

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]
#: the decomposition's colours, fixed across every figure: M, V_B, V_W, V, Q
QCOLORS = {"Q": "#444444", "M": "#1f77b4", "V": "#d62728", "V_W": "#ff7f0e", "V_B": "#2ca02c"}
HIGHLIGHT = "#e4002b"
COLORSCALE = "Viridis"
#: a figure's point cloud of at most this many points is drawn in SVG, a larger one in WebGL (``point_trace``)
SVG_MAX_POINTS = 3000


def point_trace(n_points: int) -> type:
    """The plotly trace type for a figure's point cloud of ``n_points`` points in all: ``go.Scatter`` (SVG) up to
    ``SVG_MAX_POINTS``, ``go.Scattergl`` (WebGL) above. Both take the same markers, colours, hover and selections. A
    WebGL figure costs a browser without a GPU ≈ 0.4 s to start (its context and shaders, in software) whatever its
    points; SVG's cost grows with the points and passes WebGL's between 3,000 and 5,000 (docs/benchmarks.md, "Pages
    in a browser"). SVG draws the traces in the order they are added (lines and highlights above the cloud);
    WebGL draws every WebGL trace above every SVG trace."""
    import plotly.graph_objects as go

    return go.Scatter if n_points <= SVG_MAX_POINTS else go.Scattergl


def layout_theme(presentation: bool = False) -> dict[str, Any]:
    """Plotly layout settings: a clean white figure; presentation mode = large fonts, thick lines."""
    base = 20 if presentation else 13
    return dict(
        template="plotly_white",
        paper_bgcolor="white",
        plot_bgcolor="white",
        font=dict(family="Inter, Helvetica Neue, Arial, sans-serif", size=base, color="#222"),
        title=dict(font=dict(size=base + 4), x=0.01, xanchor="left"),
        legend=dict(font=dict(size=base - 1), bgcolor="rgba(255,255,255,0.8)"),
        hoverlabel=dict(font=dict(size=base), bgcolor="white"),
        margin=dict(l=70, r=30, t=70 if presentation else 60, b=60),
        colorway=PALETTE,
    )


LEGEND_BELOW = dict(orientation="h", yanchor="top", y=-0.24, x=0)
"""A horizontal legend under the plot, its top below the x-axis titles (it grows downwards; plotly widens the
bottom margin to hold its rows)."""


def apply_theme(fig, presentation: bool = False):
    """Apply ``layout_theme`` to a plotly figure (in place) and return it."""
    fig.update_layout(**layout_theme(presentation))
    axis = dict(
        showline=True,
        linecolor="#888",
        mirror=True,
        ticks="outside",
        gridcolor="#eee",
        zeroline=False,
        title_font=dict(size=(20 if presentation else 13) + 1),
    )
    fig.update_xaxes(**axis)
    fig.update_yaxes(**axis)
    if presentation:  # thicker lines; a band's edges (width 0, ``viz.bands``) stay invisible: bands are fills
        fig.update_traces(
            selector=lambda t: getattr(t, "mode", None) == "lines" and t.line.width != 0, line=dict(width=4)
        )
        fig.update_traces(selector=dict(mode="lines+markers"), line=dict(width=4), marker=dict(size=10))
        fig.update_annotations(font_size=22)
    return fig
