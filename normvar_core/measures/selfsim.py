"""Self-similarity of every token type (Ethayarajh 2019): the exact mean cosine between distinct
occurrences of a type, (‖s_t‖² − n_t) / (n_t (n_t − 1)) with s_t = Σ x/‖x‖, per layer."""
from normvar_core.measure import Figure, Measure, Memory, Switch

MEASURE = Measure(
    name="selfsim", order=40, title="self-similarity",
    accumulator="normvar_core.pipeline.accumulators.selfsim:SelfSimilarityAccumulator", tables=("token_selfsim",),
    switch=Switch("self_similarity", str, "auto",
        help="per-type self-similarity table (L x T x d): auto = on when it fits in the device's memory (normvar plan)",
        off="off", auto="auto", choices=("auto", "on", "off"),
        after="occurrences",
    ),
    memory=Memory(
        droppable=True,
        reason="in auto, an L x T x d table kept only when it fits after everything else the run holds",
        fix="--self-similarity off drops the L x T x d self-similarity table", terms=("Σu 8·L·T·d", "n_t 8·T"),
    ),
    figures=(
        Figure("selfsim", "normvar_core.viz.geometry_figures:selfsim_scatter", page="frequency", section="Self-similarity",
               tables=("token_selfsim",)),
    ),
)
