"""The streamed measures of a run. Each is one ``contracts.Accumulator``; a run holds every
registered accumulator whose ``for_run`` returns one (the names go to the run row's
``accumulators`` column). A new measure = one module here + one line in ``REGISTRY``."""
from __future__ import annotations

from normvar_core.pipeline.accumulators.geometry import GeometryAccumulator
from normvar_core.pipeline.accumulators.halves import HalvesAccumulator
from normvar_core.pipeline.accumulators.moments import MomentsAccumulator
from normvar_core.pipeline.accumulators.occurrences import OccurrencesAccumulator
from normvar_core.pipeline.accumulators.outliers import OutlierAccumulator
from normvar_core.pipeline.accumulators.samples import SampleAccumulator
from normvar_core.pipeline.accumulators.selfsim import SelfSimilarityAccumulator

REGISTRY = [MomentsAccumulator, SampleAccumulator, GeometryAccumulator, SelfSimilarityAccumulator,
            OutlierAccumulator, HalvesAccumulator, OccurrencesAccumulator]

__all__ = ["REGISTRY", "MomentsAccumulator", "SampleAccumulator", "GeometryAccumulator",
           "SelfSimilarityAccumulator", "OutlierAccumulator",
           "HalvesAccumulator", "OccurrencesAccumulator"]
