"""The streamed measures of a run. Each is one ``contracts.Accumulator``, named by its declaration
(``normvar_core/measures/<name>.py``, ``Measure.accumulator``); ``REGISTRY`` is every declared accumulator in
the declarations' ``order`` (the finalize and drop order). A run holds every registered accumulator whose
``for_run`` returns one (the names go to the run row's ``accumulators`` column). A new measure = one
declaration plus its accumulator module: nothing is listed here by hand."""
from __future__ import annotations

from normvar_core.measure import all_measures, resolve
from normvar_core.pipeline.contracts import Accumulator, RunContext

REGISTRY: list[type[Accumulator]] = [resolve(m.accumulator) for m in all_measures() if m.accumulator]
"""The accumulator classes of the declared measures, in ``Measure.order``."""

globals().update({cls.__name__: cls for cls in REGISTRY})  # MomentsAccumulator, GeometryAccumulator, ...


def skip_reasons(ctx: RunContext, accs: dict[str, Accumulator], registry=None) -> dict[str, str]:
    """{name: why} for every registered accumulator the run does not hold and that says why
    (recorded in the run row's ``notes.skipped``)."""
    out = {}
    for cls in (REGISTRY if registry is None else registry):
        reason = cls.skip_reason(ctx) if cls.name not in accs else None
        if reason:
            out[cls.name] = reason
    return out


def prime(ctx: RunContext, source, *, reuse: bool = True) -> None:
    """Every declared pre-pass hook (``Measure.prime``: the occurrences' early axes) of a measure the run asks
    for, before the first batch; ``reuse``: the source may keep the batches a hook ran for the pass."""
    for m in all_measures():
        if m.prime and ctx.asks(m.name):
            resolve(m.prime)(ctx, source, reuse=reuse)


__all__ = ["REGISTRY", "skip_reasons", "prime", *(cls.__name__ for cls in REGISTRY)]
