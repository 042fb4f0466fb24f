"""A run configuration that asks for every registered measure, the opt-in ones too, found from the registry: the
boolean RunConfig fields off by default whose value True makes some measure of ``MEASURES`` asked for (an opt-in
measure is turned on by a flag of its own, off by default: tests/test_measures.py checks that). A new opt-in
measure is covered with no edit here."""

from __future__ import annotations

import dataclasses

from normvar_core.config import RunConfig
from normvar_core.pipeline.measures import MEASURES


def opt_in_switches(base: RunConfig) -> list[str]:
    """The boolean fields off in ``base`` that turn on a measure ``base`` does not ask for."""
    off = [cls for cls in MEASURES if not cls.asked(base)]
    return [
        f.name
        for f in dataclasses.fields(RunConfig)
        if getattr(base, f.name) is False and any(cls.asked(base.replace(**{f.name: True})) for cls in off)
    ]


def every_measure_on(**options) -> RunConfig:
    """``RunConfig(**options)`` with every opt-in switch on; every measure of ``MEASURES`` is then asked for."""
    base = RunConfig(**options)
    cfg = base.replace(**dict.fromkeys(opt_in_switches(base), True))
    assert all(cls.asked(cfg) for cls in MEASURES), [cls.name for cls in MEASURES if not cls.asked(cfg)]
    return cfg
