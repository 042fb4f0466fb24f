"""Checkpoints: the partial state of batches [0, next) plus ``next`` (see ``partials``), in one module.

* ``PartialState``: the measures' state after batches [start, stop), flat as ``<measure>__<key>`` arrays;
  ``partial_state`` takes it from live measures, ``load_partial`` puts it back into fresh ones.
* ``save``/``load``: one ``.npz`` (numpy arrays + a JSON string; loaded with ``allow_pickle=False``) written to
  ``.<name>.tmp-<pid>`` and ``os.replace``d onto the path (``destination.write_atomic``: never over a device,
  FIFO or folder; a user's ``--checkpoint`` is checked by ``destination.resolve_destination``), so a reader
  sees the old or the new checkpoint, never half of one.
* ``Checkpointer``: the local strategy's saver (every ``every_s`` seconds, and on interruption between batches).
* Early passes (``Measure.early_pass``): an unfinished one is saved as ``<measure>_early`` entries in place of the
  measures (``next_batch`` 0, meta ``early_done``/``early_batches``); a checkpoint of the pass keeps each
  pass's ``checkpoint_meta`` so a resumed run takes their results from it (``early_results_of``).

A checkpoint is used only when its plan fingerprint (config, batches, corpus hash, weights hash, counts)
equals the run's; batch order is deterministic, so a resumed run equals an uninterrupted one exactly.
"""
from __future__ import annotations

import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from normvar_core.destination import write_atomic
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures import MEASURES
from normvar_core.pipeline.measures.base import Measure

FORMAT = "normvar-checkpoint-3"  # 3: registered state keys (the moments under measure.*)


@dataclass
class PartialState:
    """The measures' state after batches [start, stop): {measure name: state_dict}."""

    start: int
    stop: int
    states: dict

    def arrays(self) -> dict[str, np.ndarray]:
        """Flat {"<measure>__<key>": array} for np.savez (no pickle)."""
        return {f"{a}__{k}": np.asarray(v) for a, st in self.states.items() for k, v in st.items()}

    @classmethod
    def from_arrays(cls, start: int, stop: int, arrays: dict) -> "PartialState":
        states: dict = {}
        for key, v in arrays.items():
            a, _, k = key.partition("__")
            states.setdefault(a, {})[k] = v
        return cls(start, stop, states)


def partial_state(measures: dict[str, Measure], start: int, stop: int) -> PartialState:
    """The state of live measures that have seen batches [start, stop)."""
    return PartialState(start, stop, {name: measure.state_dict() for name, measure in measures.items()})


def load_partial(measures: dict[str, Measure], partial: PartialState) -> dict[str, Measure]:
    """``accs`` (fresh: ``partials.build_measures``) restored from ``partial``, in place and returned.
    Every measure the run wants must be in the partial state."""
    for name, measure in measures.items():
        if name not in partial.states:
            raise ValueError(f"partial state lacks measure {name!r}")
        measure.load_state_dict(partial.states[name])
    return measures


def save(path: Path, fingerprint: dict, partial: PartialState, extra: dict) -> None:
    arrays = partial.arrays()
    meta = dict(fingerprint=fingerprint, format=FORMAT, start=partial.start, next_batch=partial.stop, **extra)
    arrays["meta_json"] = np.array(json.dumps(meta, sort_keys=True, default=str))
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())

    write_atomic(path, write, what="--checkpoint")


def load(path: Path, fingerprint: dict) -> tuple[PartialState, dict] | None:
    """(partial state, meta) if ``path`` holds a readable checkpoint of this plan, else None."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta_json"]))
            arrays = {k: z[k] for k in z.files if k != "meta_json"}
    except Exception as exc:  # noqa: BLE001 - a damaged checkpoint means: start over
        warnings.warn(f"ignoring unreadable checkpoint {path}: {exc}", stacklevel=3)
        return None
    if meta.get("format") != FORMAT:
        return None
    if json.loads(json.dumps(fingerprint, sort_keys=True, default=str)) != meta.get("fingerprint"):
        warnings.warn(f"checkpoint {path} belongs to another configuration; starting over", stacklevel=3)
        return None
    return PartialState.from_arrays(int(meta["start"]), int(meta["next_batch"]), arrays), meta


CHECKPOINT_EVERY_S = 60.0
"""A foreground compute's and the worker's periodic checkpoint interval (an interrupt saves at once)."""

COST_SHARE = 0.1
"""A periodic save is due no sooner than 1 / COST_SHARE times the last save's duration after it: the periodic
checkpoints cost at most about a tenth of the run's wall time, whatever the state's size (an interrupt saves
at once, whatever the interval)."""


class Checkpointer:
    """Saves the partial state every ``every_s`` seconds (or, when a save takes long, every ``1 / COST_SHARE``
    times its duration) and on interruption between batches (``path`` None: never)."""

    def __init__(self, path: Path | None, fingerprint: dict, every_s: float):
        self.path, self.fingerprint, self.every_s = path, fingerprint, every_s
        self.last = time.monotonic()
        self.cost = 0.0  # seconds the last save took

    def due(self) -> bool:
        wait = max(self.every_s, self.cost / COST_SHARE) if self.every_s > 0 else 0.0
        return self.path is not None and time.monotonic() - self.last >= wait

    def save(self, measures: dict, next_batch: int, extra: dict) -> None:
        if self.path is None:
            return
        t0 = time.monotonic()
        save(self.path, self.fingerprint, partial_state(measures, 0, next_batch), extra)
        self.last = time.monotonic()
        self.cost = self.last - t0

    def save_quietly(self, measures: dict, next_batch: int, extra: dict) -> None:
        """Save on the way out of an error or interruption: that error matters more than a failed save."""
        quietly(self.save, measures, next_batch, extra)

    def save_early(self, states: dict[str, dict], done: int, planned: int) -> None:
        """Unfinished early passes ({measure name: ``EarlyPass.state_dict``}), ``done`` of their about ``planned``
        batches: the checkpoint holds them (``early_key``) in place of the measures (``next_batch`` 0)."""
        if self.path is None:
            return
        save(self.path, self.fingerprint, PartialState(0, 0, {early_key(n): st for n, st in states.items()}),
             {"early_done": int(done), "early_batches": int(planned)})
        self.last = time.monotonic()

    def save_early_quietly(self, states: dict[str, dict], done: int, planned: int) -> None:
        quietly(self.save_early, states, done, planned)


EARLY_SUFFIX = "_early"


def early_key(name: str) -> str:
    """A checkpoint's entry for measure ``name``'s unfinished early pass: ``<name>_early``."""
    return name + EARLY_SUFFIX


def early_states_of(resumed: tuple | None) -> dict[str, dict] | None:
    """{measure name: early pass state} of a checkpoint saved in the early passes (meta ``early_done``), else None."""
    if resumed is None or resumed[1].get("early_done") is None:
        return None
    return {k[:-len(EARLY_SUFFIX)]: st for k, st in resumed[0].states.items() if k.endswith(EARLY_SUFFIX)}


def early_meta(ctx: RunContext, registry=MEASURES) -> dict:
    """The meta entries a checkpoint of the pass keeps for every registered early pass (``checkpoint_meta`` of its
    result in ``ctx.early``, or of None when the run has none)."""
    out: dict = {}
    for cls in registry:
        if cls.early_pass is not None:
            out.update(cls.early_pass.checkpoint_meta(ctx.early.get(cls.name)))
    return out


def quietly(save, *args) -> None:
    """``save(*args)``, its failure ignored: on the way out of an error, that error matters more."""
    try:
        save(*args)
    except Exception:  # noqa: BLE001
        pass


def early_results_of(resumed: tuple | None, ctx: RunContext, registry=MEASURES) -> dict:
    """{measure name: its early pass's result} that a checkpoint of the pass carries (``from_checkpoint`` of the
    measure's saved state and the meta), so a resumed run does not run those passes again."""
    if resumed is None:
        return {}
    partial, meta = resumed
    out = {}
    for cls in registry:
        if cls.early_pass is not None and cls.name in partial.states:
            result = cls.early_pass.from_checkpoint(partial.states[cls.name], meta, ctx)
            if result is not None:
                out[cls.name] = result
    return out


def describe(path: Path | None) -> str | None:
    """What a checkpoint file keeps, in words: "N of M batches" (in the early passes: "N of M batches of the early
    pass"); None when there is no readable checkpoint at ``path``."""
    if path is None or not Path(path).exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta_json"]))
    except Exception:  # noqa: BLE001
        return None
    total = int((meta.get("fingerprint") or {}).get("n_batches") or 0)
    if meta.get("early_done") is not None:
        return f"{int(meta['early_done'])} of {int(meta.get('early_batches') or 0)} batches of the early pass"
    return f"{int(meta.get('next_batch') or 0)} of {total} batches"


__all__ = ["FORMAT", "PartialState", "partial_state", "load_partial", "save", "load", "Checkpointer", "early_key",
           "early_states_of", "early_meta", "early_results_of", "describe"]
