"""The split halves (issue 26): the corpus in two halves by a hash of the sentence id, for the findings'
split-half intervals of the corpus-level quantities and the geometry."""
from normvar_core.measure import Measure, Memory, Switch

MEASURE = Measure(
    name="halves", order=60, title="halves",
    accumulator="normvar_core.pipeline.accumulators.halves:HalvesAccumulator", tables=("halves_layer", "intervals"),
    switch=Switch("halves", bool, True,
        help="split halves (by a hash of the sentence id) for the findings' intervals of the corpus-level "
             "quantities and the geometry: twice the per-type moments' memory",
        off=False, flag="--no-halves", after="geometry",
    ),
    uses=("moments",),
    memory=Memory(
        droppable=True, reason="twice the per-type moments: a run short of memory keeps bootstrap intervals only",
        terms=("two per-type moments 2·(L·T·(d·b_μ + 8) + 16·T + 8·L + 8)", "two covariances 2·8·L·(d² + d)",
               "Σ‖x‖² per half 2·16·L", "n 2·8"),
    ),
)
