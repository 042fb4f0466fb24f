"""The occurrences (issue 34, the Occurrences page): every counted occurrence of a layer, at most
``--occurrences`` per layer (a seeded uniform sample beyond that), at its coordinates on the layer's
principal axes. The early axes are computed before the pass (``prime``)."""
from normvar_core.constants import OCCURRENCES, OCCURRENCES_MAX
from normvar_core.measure import Measure, Memory, Switch

MEASURE = Measure(
    name="occurrences", order=70, title="occurrences",
    accumulator="normvar_core.pipeline.accumulators.occurrences:OccurrencesAccumulator",
    tables=("occurrences", "occurrence_axes"),
    switch=Switch("occurrences", int, OCCURRENCES,
        help="most occurrences per layer kept for the Occurrences page, each at its coordinates on the layer's "
             "principal axes (every one when the run has fewer, else a seeded uniform sample); 0 = none, at most "
             f"{OCCURRENCES_MAX:,}",
        off=0, minimum=0, label="Occurrences shown", after="id_sample",
    ),
    uses=("geometry",),
    memory=Memory(
        droppable=True,
        reason="a run short of memory leaves the Occurrences page out (lower --occurrences to keep it)",
        terms=("projections 4·L·P·k", "filled flags P", "early axes and mean 8·L·(d·k + d)", "sums 8·L·(k + k²)",
               "n 8"),
    ),
    prime="normvar_core.pipeline.accumulators.occurrences:prime",
)
