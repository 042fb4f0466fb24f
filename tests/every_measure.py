"""A run configuration that asks for every registered measure, the opt-in ones too: the registry's own
``measures.every_measure_on`` (the default run's too), checked to ask for every measure of ``MEASURES``."""

from __future__ import annotations

from normvar_core.config import RunConfig
from normvar_core.pipeline.measures import MEASURES
from normvar_core.pipeline.measures import every_measure_on as _on


def every_measure_on(**options) -> RunConfig:
    """``RunConfig(**options)`` with every opt-in switch on; every measure of ``MEASURES`` is then asked for."""
    cfg = _on(RunConfig(**options))
    assert all(cls.asked(cfg) for cls in MEASURES), [cls.name for cls in MEASURES if not cls.asked(cfg)]
    return cfg
