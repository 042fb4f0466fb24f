"""Outlier dimensions and massive activations per kept layer: per-dimension mean, variance and max |h|,
the share of Q(X) at position 0 and in the top dimensions, and the largest activations. On with the
layer geometry (``--no-geometry`` switches both off)."""
from normvar_core.measure import Claim, Figure, Measure, Memory

MEASURE = Measure(
    name="outliers", order=50, title="outliers",
    accumulator="normvar_core.pipeline.accumulators.outliers:OutlierAccumulator",
    tables=("dim_stats", "top_activations", "layer_outliers"), follows="geometry",
    memory=Memory(
        reason="small (24·L·d bytes): kept whenever the geometry is asked for",
        terms=("per-dimension mean, M2, max |h| 24·L·d", "Σ‖x‖² 16·L", "top activations 40·L·K", "n 8"),
    ),
    figures=(
        Figure("dims", "normvar_core.viz.geometry_figures:outlier_heatmap", page="outliers", section="Outlier dimensions",
               tables=("dim_stats",)),
        Figure("shares", "normvar_core.viz.geometry_figures:shares_figure", page="outliers", section="Shares of Q(X)",
               tables=("layer_outliers",)),
    ),
    claims=(
        Claim("position0_share", "ENV", "where outliers dominate, position 0 carries most of Q(X)",
              rule="normvar_core.stats.claims_geometry:position0_share"),
    ),
    split_half=("q_share_pos0",),
)
