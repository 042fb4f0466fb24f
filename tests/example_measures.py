"""The measures of ``examples/`` (the manual's walk-throughs): every ``Measure`` subclass defined in an
``examples/*.py`` module, found by importing each module, so that an example measure is under the contract test
with no list to edit (a script there runs nothing on import: its work sits under ``if __name__ == "__main__"``)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from normvar_core.pipeline.measures import Measure

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example_measures() -> tuple[type[Measure], ...]:
    """The concrete measure classes defined in ``examples/*.py``, by module name then class name."""
    out = []
    for path in sorted(EXAMPLES.glob("*.py")):
        module = importlib.import_module(f"examples.{path.stem}")
        out += [
            cls
            for _, cls in inspect.getmembers(module, inspect.isclass)
            if issubclass(cls, Measure) and cls.__module__ == module.__name__ and not inspect.isabstract(cls)
        ]
    return tuple(out)


EXAMPLE_MEASURES = example_measures()
