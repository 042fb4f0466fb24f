"""The streamed measures of a run: one class each (``base.Measure``), listed in ``MEASURES`` in the
registry order, which is also the finalize order (a measure's ``uses_results`` finish before it) and the order
in which a run short of memory drops the droppable ones. A run holds every measure whose ``for_run`` returns
one (the names go to the run row's ``accumulators`` column). A new measure = one module here and one entry
below."""

from __future__ import annotations

import dataclasses

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures.base import EarlyPass, Measure
from normvar_core.pipeline.measures.curvature import CurvatureMeasure
from normvar_core.pipeline.measures.dataset_entropy import DatasetEntropyMeasure
from normvar_core.pipeline.measures.geometry import GeometryMeasure
from normvar_core.pipeline.measures.halves import HalvesMeasure
from normvar_core.pipeline.measures.layer_linearity import LayerLinearityMeasure
from normvar_core.pipeline.measures.moments import MomentsMeasure
from normvar_core.pipeline.measures.neighbourhoods import NeighbourhoodMeasure
from normvar_core.pipeline.measures.occurrences import OccurrencesMeasure
from normvar_core.pipeline.measures.outliers import OutlierMeasure
from normvar_core.pipeline.measures.position0 import Position0Measure
from normvar_core.pipeline.measures.prompt_entropy import PromptEntropyMeasure
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
    LayerLinearityMeasure,
    PromptEntropyMeasure,
    DatasetEntropyMeasure,
    CurvatureMeasure,
    Position0Measure,
    NeighbourhoodMeasure,  # last: its result waits for the geometry's search, which runs beside the others
)


def opt_in_switches(cfg: RunConfig, registry=MEASURES) -> list[str]:
    """The boolean ``RunConfig`` fields off in ``cfg`` whose value True makes a measure of ``registry`` asked for
    that ``cfg`` does not ask for (an opt-in measure is turned on by a flag of its own, off by default)."""
    off = [cls for cls in registry if not cls.asked(cfg)]
    return [
        f.name
        for f in dataclasses.fields(RunConfig)
        if getattr(cfg, f.name) is False and any(cls.asked(cfg.replace(**{f.name: True})) for cls in off)
    ]


def every_measure_on(cfg: RunConfig, registry=MEASURES) -> RunConfig:
    """``cfg`` with every opt-in switch of ``registry`` on (``opt_in_switches``), found from the registry: the
    default run (``normvar up``) and the tests' runs that ask for every measure. A new opt-in measure is in them
    with no edit."""
    return cfg.replace(**dict.fromkeys(opt_in_switches(cfg, registry), True))


def skip_reasons(ctx: RunContext, measures: dict[str, Measure], registry=MEASURES) -> dict[str, str]:
    """{name: why} for every measure the run does not hold and that says why (recorded in the run row's
    ``notes.skipped``)."""
    out = {}
    for cls in registry:
        reason = cls.skip_reason(ctx) if cls.name not in measures else None
        if reason:
            out[cls.name] = reason
    return out


def early_measures(ctx: RunContext, registry=MEASURES) -> list[type[Measure]]:
    """The measures of ``registry`` that declare an early pass (``Measure.early_pass``) and that the run keeps."""
    return [cls for cls in registry if cls.early_pass is not None and cls.keeps(ctx)]


def start_early(
    ctx: RunContext, source, *, reuse: bool = True, states: dict | None = None, registry=MEASURES
) -> dict[str, EarlyPass]:
    """{name: its early pass, started} for every measure of ``early_measures`` without a result in ``ctx.early``
    yet (a resumed checkpoint carries them), in registry order. ``states``: {name: state_dict} of an
    interrupted run's passes to go on from; ``reuse``: they may leave their batches to the source for the pass (a
    Ray actor, which runs only its share, does not)."""
    passes = {}
    for cls in early_measures(ctx, registry):
        if cls.name not in ctx.early:
            passes[cls.name] = ep = cls.early_pass.start(ctx, source, reuse=reuse)  # type: ignore[union-attr]  # early_measures: each has an early pass
            if states and cls.name in states:
                ep.load_state_dict(states[cls.name])
    return passes


def run_early(ctx: RunContext, passes: dict[str, EarlyPass], *, on_batch=None) -> None:
    """Run ``passes`` one after another, each result into ``ctx.early[name]``; ``on_batch(passes)`` after each
    batch (checkpoints and progress see every pass)."""
    for name, ep in passes.items():
        ep.run(on_batch=None if on_batch is None else lambda _: on_batch(passes))
        ctx.early[name] = ep.result()


def prime(ctx: RunContext, source, *, reuse: bool = True, registry=MEASURES) -> None:
    """Every early pass the run needs, run now (``start_early`` then ``run_early``)."""
    run_early(ctx, start_early(ctx, source, reuse=reuse, registry=registry))


__all__ = [
    "MEASURES",
    "opt_in_switches",
    "every_measure_on",
    "skip_reasons",
    "early_measures",
    "start_early",
    "run_early",
    "prime",
    "Measure",
    "EarlyPass",
    "MomentsMeasure",
    "SampleMeasure",
    "GeometryMeasure",
    "SelfSimilarityMeasure",
    "OutlierMeasure",
    "HalvesMeasure",
    "OccurrencesMeasure",
    "NeighbourhoodMeasure",
    "LayerLinearityMeasure",
]
