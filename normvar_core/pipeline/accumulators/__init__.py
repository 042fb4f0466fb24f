"""The streamed measures of a run. Each is one ``contracts.Accumulator``; a run holds every
registered accumulator whose ``for_run`` returns one (the names go to the run row's
``accumulators`` column). A new measure = one module here + one line in ``REGISTRY``."""
from __future__ import annotations

from normvar_core.pipeline.accumulators.moments import MomentsAccumulator
from normvar_core.pipeline.accumulators.samples import SampleAccumulator

REGISTRY = [MomentsAccumulator, SampleAccumulator]

__all__ = ["REGISTRY", "MomentsAccumulator", "SampleAccumulator"]
