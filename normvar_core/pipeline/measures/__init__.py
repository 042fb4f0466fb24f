"""The streamed measures of a run: one class each (``base.Accumulator``), listed in ``MEASURES`` in the
registry order, which is also the finalize order (a measure's ``uses_results`` finish before it) and the order
in which a run short of memory drops the droppable ones. A run holds every measure whose ``for_run`` returns
one (the names go to the run row's ``accumulators`` column). A new measure = one module here and one entry
below."""
from __future__ import annotations

from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures.base import Accumulator
from normvar_core.pipeline.measures.geometry import GeometryAccumulator
from normvar_core.pipeline.measures.halves import HalvesAccumulator
from normvar_core.pipeline.measures.moments import MomentsAccumulator
from normvar_core.pipeline.measures.occurrences import OccurrencesAccumulator
from normvar_core.pipeline.measures.outliers import OutlierAccumulator
from normvar_core.pipeline.measures.samples import SampleAccumulator
from normvar_core.pipeline.measures.selfsim import SelfSimilarityAccumulator

MEASURES: tuple[type[Accumulator], ...] = (
    MomentsAccumulator,
    SampleAccumulator,
    GeometryAccumulator,
    SelfSimilarityAccumulator,
    OutlierAccumulator,
    HalvesAccumulator,
    OccurrencesAccumulator,
)


def skip_reasons(ctx: RunContext, accs: dict[str, Accumulator], registry=MEASURES) -> dict[str, str]:
    """{name: why} for every measure the run does not hold and that says why (recorded in the run row's
    ``notes.skipped``)."""
    out = {}
    for cls in registry:
        reason = cls.skip_reason(ctx) if cls.name not in accs else None
        if reason:
            out[cls.name] = reason
    return out


__all__ = ["MEASURES", "skip_reasons", "Accumulator", "MomentsAccumulator", "SampleAccumulator",
           "GeometryAccumulator", "SelfSimilarityAccumulator", "OutlierAccumulator", "HalvesAccumulator",
           "OccurrencesAccumulator"]
