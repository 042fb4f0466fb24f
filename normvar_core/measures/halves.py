"""The split halves (issue 26): the corpus in two halves by a hash of the sentence id, for the findings'
split-half intervals of the corpus-level quantities and the geometry."""
from normvar_core.measure import Measure

MEASURE = Measure(
    name="halves",
    order=60,
    title="halves",
)
