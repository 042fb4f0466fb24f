"""A measure declared once: the data every stage reads about it (issue 36).

A measure (the exact moments, the PCA samples, the layer geometry, IsoScore, ...) is one module of the
``normvar_core.measures`` package defining ``MEASURE = Measure(...)``. Adding the file registers it:
:func:`all_measures` discovers the package. The declaration names

- its state and merge rules, through ``accumulator`` (the pipeline class holding them in
  ``pipeline/state.py``'s terms); ``None`` for a measure derived from another's result (IsoScore);
- its run-file tables (``tables``; ``required`` are checked by the reader when the run holds it);
- its RunConfig switch and further options (``switch``, ``options``: ``config.py`` generates the fields);
- its memory terms and whether a run short of memory may drop it, with the reason (``memory``);
- its finalize label (``title``);
- per-layer columns computed from the covariance eigenvalues (``spectral``), the quantities with a
  split-half interval (``split_half``), its findings (``claims``), and its figures with the page and the
  section of the page that shows them (``figures``), each with an optional deck slide.

This module is in the bottom layer: it holds data only. Behaviour lives in the layer it belongs to and is
named by a ``"module:attribute"`` string (:data:`Ref`), resolved lazily by :func:`resolve` in the layer
that calls it (the figure builders in ``viz``, the formulas in ``stats``, the accumulators in ``pipeline``).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import cache
from typing import Any

Ref = str
"""``"package.module:attribute"``: behaviour in the layer that owns it, imported only when used."""


@dataclass(frozen=True)
class Switch:
    """One RunConfig field a measure owns; ``config.py`` turns it into an ``opt()`` field (CLI flag and New-run
    form widget). ``off`` is the value meaning "not asked for"; ``auto`` the value meaning "asked, but droppable
    when the run does not fit" (``None``: every asked value is a firm request)."""

    field: str
    type: Any
    default: Any
    help: str
    off: Any = False
    auto: Any = None
    flag: str | None = None
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None
    label: str | None = None
    section: str = "advanced"
    after: str | None = None


@dataclass(frozen=True)
class Memory:
    """Whether a run short of memory may leave the measure out (``droppable``), the policy in words (``reason``:
    ``normvar plan --json``'s ``policy``), the ``fix`` suggested when it is forced on and does not fit, and its
    state terms as formulas (``terms``: printed beside its bytes by ``normvar plan``; the bytes themselves come
    from the accumulator's ``planned_bytes``, and the message of an actual drop from its ``drop_reason``)."""

    droppable: bool = False
    reason: str = ""
    fix: str = ""
    terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class Figure:
    """A figure of the measure: ``builder`` (a ``viz`` function), the page key and the section (tab) of that
    page that shows it, the run-file tables it reads, and the deck slide that carries it (``None``: not in the
    deck)."""

    key: str
    builder: Ref
    page: str
    section: str
    tables: tuple[str, ...] = ()
    slide: Ref | None = None


@dataclass(frozen=True)
class Claim:
    """A row of the findings: its id, the seed it tests, the claim in words, and ``rule`` (a ``stats``
    function of the run's view returning a finding)."""

    id: str
    seed: str
    wording: str
    rule: Ref


@dataclass(frozen=True)
class Measure:
    """Everything the stages know about one measure; see the module docstring."""

    name: str
    order: int
    title: str
    accumulator: Ref | None = None
    tables: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    legacy_marker: str | None = None
    switch: Switch | None = None
    options: tuple[Switch, ...] = ()
    follows: str | None = None
    uses: tuple[str, ...] = ()
    background: bool = False
    memory: Memory = field(default_factory=Memory)
    plans: tuple[str, ...] = ()
    prime: Ref | None = None
    spectral: tuple[tuple[str, Ref], ...] = ()
    split_half: tuple[str, ...] = ()
    claims: tuple[Claim, ...] = ()
    figures: tuple[Figure, ...] = ()

    def asked(self, cfg) -> bool:
        """Whether the run config asks for it: its switch is not ``off`` (or the measure it follows is asked;
        a measure with neither is always on)."""
        if self.switch is not None:
            return getattr(cfg, self.switch.field) != self.switch.off
        return measure(self.follows).asked(cfg) if self.follows else True

    def may_drop(self, cfg) -> bool:
        """Whether a run short of memory may leave it out: declared droppable, and asked as ``auto`` where the
        switch has an ``auto`` value."""
        if not self.memory.droppable:
            return False
        return self.switch is None or self.switch.auto is None or getattr(cfg, self.switch.field) == self.switch.auto


def resolve(ref: Ref) -> Any:
    """The object a :data:`Ref` names (``"normvar_core.viz.isoscore_figures:isoscore_figure"``)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@cache
def all_measures() -> tuple[Measure, ...]:
    """Every declared measure, found by discovery of the ``normvar_core.measures`` package, in ``order``
    (the registry, finalize and drop order)."""
    from normvar_core import measures as package

    found = []
    for info in pkgutil.iter_modules(package.__path__):
        decl = getattr(importlib.import_module(f"{package.__name__}.{info.name}"), "MEASURE", None)
        if decl is not None:
            found.append(decl)
    names = [m.name for m in found]
    if len(set(names)) != len(names):
        raise RuntimeError(f"two measures share a name: {sorted(names)}")
    return tuple(sorted(found, key=lambda m: m.order))


def measure(name: str) -> Measure:
    """The declared measure called ``name`` (KeyError when none is)."""
    for m in all_measures():
        if m.name == name:
            return m
    raise KeyError(f"no measure called {name!r}: {[m.name for m in all_measures()]}")
