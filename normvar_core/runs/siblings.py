"""Sibling runs: the same model, corpus and options as a run with one option flipped. Today the one
flipped option is ``exclude_position0`` (decoders carry massive activations on each sentence's first
position; the Outliers page draws the layer geometry with and without it). A run's options are its
RunConfig dict (``run.meta["options"]``), so a sibling is found by comparing those dicts and computed
from the run's own config with the option flipped."""

from __future__ import annotations

from collections.abc import Iterable

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError

#: options that differ between siblings by construction (the name; the flipped option itself)
NOT_COMPARED = ("name", "exclude_position0")


def excludes_position0(run) -> bool:
    """True when ``run`` was computed without each sentence's first position."""
    return bool((run.meta.get("options") or {}).get("exclude_position0"))


def _compared(options: dict) -> dict:
    return {k: v for k, v in options.items() if k not in NOT_COMPARED}


def position0_sibling(run, others: Iterable) -> object | None:
    """The first of ``others`` (runs; None entries are skipped, so a lazy iterable of opened runs
    works) computed with ``run``'s options except ``exclude_position0`` flipped, or None. A run
    without recorded options (a synthetic or imported one) has no sibling."""
    mine = dict(run.meta.get("options") or {})
    if not mine:
        return None
    flipped = not excludes_position0(run)
    for other in others:
        if other is None or other.name == run.name:
            continue
        opts = dict(other.meta.get("options") or {})
        if opts and bool(opts.get("exclude_position0")) == flipped and _compared(opts) == _compared(mine):
            return other
    return None


def position0_sibling_config(run) -> RunConfig:
    """The RunConfig of ``run``'s position-0 sibling: its own options with ``exclude_position0`` flipped,
    named ``<run>-nopos0`` (position 0 excluded) or ``<run>-allpos`` (all positions). A run without
    recorded options (synthetic, or written before runs kept them) has none: a NormvarError."""
    options = dict(run.meta.get("options") or {})
    if not options:
        raise NormvarError(
            f"run {run.name} has no recorded options to compute its sibling from",
            fix="compute the run again with `normvar compute` (runs record their options)",
        )
    flipped = not excludes_position0(run)
    return RunConfig.from_dict(
        {**options, "exclude_position0": flipped, "name": f"{run.name}-{'nopos0' if flipped else 'allpos'}"}
    )


__all__ = ["NOT_COMPARED", "excludes_position0", "position0_sibling", "position0_sibling_config"]
