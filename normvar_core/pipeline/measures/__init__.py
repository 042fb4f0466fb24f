"""The streamed measures of a run: one class each (``base.Measure``), listed in ``MEASURES`` in the
registry order, which is also the finalize order (a measure's ``uses_results`` finish before it) and the order
in which a run short of memory drops the droppable ones. A run holds every measure whose ``for_run`` returns
one (the names go to the run row's ``accumulators`` column). A new measure = one module here and one entry
below."""
from __future__ import annotations

from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures.base import Measure
from normvar_core.pipeline.measures.geometry import GeometryMeasure
from normvar_core.pipeline.measures.halves import HalvesMeasure
from normvar_core.pipeline.measures.moments import MomentsMeasure
from normvar_core.pipeline.measures.occurrences import OccurrencesMeasure
from normvar_core.pipeline.measures.outliers import OutlierMeasure
from normvar_core.pipeline.measures.samples import SampleMeasure
from normvar_core.pipeline.measures.selfsim import SelfSimilarityMeasure

MEASURES: tuple[type[Measure], ...] = (
    MomentsMeasure,
    SampleMeasure,
    GeometryMeasure,
    SelfSimilarityMeasure,
    OutlierMeasure,
    HalvesMeasure,
    OccurrencesMeasure,
)


def skip_reasons(ctx: RunContext, measures: dict[str, Measure], registry=MEASURES) -> dict[str, str]:
    """{name: why} for every measure the run does not hold and that says why (recorded in the run row's
    ``notes.skipped``)."""
    out = {}
    for cls in registry:
        reason = cls.skip_reason(ctx) if cls.name not in measures else None
        if reason:
            out[cls.name] = reason
    return out


__all__ = ["MEASURES", "skip_reasons", "Measure", "MomentsMeasure", "SampleMeasure",
           "GeometryMeasure", "SelfSimilarityMeasure", "OutlierMeasure", "HalvesMeasure",
           "OccurrencesMeasure"]
