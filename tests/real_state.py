"""The memory plan against the real state: a run prepared as ``compute`` prepares it (``execute.prepare``: corpus,
model, plan, source, the memory plan), every registered measure fed every batch, then each measure's
``state_dict()`` bytes set against the plan's bytes for it — equal where its class's ``planned_exact``, no larger
otherwise (an upper bound). The plan's per-measure bytes are checked only this way: no formula restated here."""

from __future__ import annotations

from normvar_core.pipeline.measures import MEASURES


def real_pass(cfg, data_dir=None):
    """(setup, {name: measure}) after one pass over every batch of the run ``cfg`` asks for."""
    from normvar_core.pipeline.execute.partials import build_measures, run_range
    from normvar_core.pipeline.execute.prepare import prepare

    setup = prepare(cfg, data_dir)
    measures = build_measures(setup.ctx)
    run_range(setup.source, setup.plan, measures, 0, setup.plan.n_batches)
    return setup, measures


def held_bytes(measure) -> int:
    """The bytes of the arrays a measure's ``state_dict()`` holds."""
    return sum(int(v.nbytes) for v in measure.state_dict().values())


def assert_planned_is_held(planned: dict[str, int], measures: dict, registry=MEASURES) -> None:
    """``planned`` ({measure: bytes}, e.g. ``MemoryPlan.measures`` or ``normvar plan --json``'s ``measures``) against
    the measures after a real pass: every held measure planned, equal to its state's bytes where its class's plan is
    exact, an upper bound of them otherwise."""
    assert measures and set(measures) <= set(planned), (sorted(measures), sorted(planned))
    for cls in registry:
        if cls.name not in measures:
            continue
        held = held_bytes(measures[cls.name])
        if cls.planned_exact:
            assert planned[cls.name] == held > 0, (cls.name, planned[cls.name], held)
        else:
            assert 0 < held <= planned[cls.name], (cls.name, planned[cls.name], held)
