"""The occurrences (issue 34, the Occurrences page): every counted occurrence of a layer, at most
``--occurrences`` per layer (a seeded uniform sample beyond that), at its coordinates on the layer's
principal axes. The early axes are computed before the pass (``prime``)."""
from normvar_core.measure import Measure

MEASURE = Measure(
    name="occurrences",
    order=70,
    title="occurrences",
)
