"""Self-similarity of every token type (Ethayarajh 2019): the exact mean cosine between distinct
occurrences of a type, (‖s_t‖² − n_t) / (n_t (n_t − 1)) with s_t = Σ x/‖x‖, per layer."""
from normvar_core.measure import Figure, Measure

MEASURE = Measure(
    name="selfsim",
    order=40,
    title="self-similarity",
    figures=(
        Figure("selfsim", "normvar_core.viz.geometry_figures:selfsim_scatter", page="frequency", section="Self-similarity",
               tables=("token_selfsim",)),
    ),
)
