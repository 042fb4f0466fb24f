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
equals the run's, and it is never destroyed by anything but the publish of its own run: a checkpoint of another
configuration, a file that is not a checkpoint, a link or a FIFO under its name, or a checkpoint whose contents do
not fit its run (``check_partial``, ``check_asked``, ``check_planned``, ``load_partial``: batch index, counts, every
measure the run asks for present — unless its own run left it out for memory, meta ``dropped`` — and every measure's
keys, dtypes and shapes) is refused in one line and left as it is (``--fresh`` replaces a normvar checkpoint of another
configuration). It is opened with ``destination.open_regular`` (no link followed, no FIFO opened). Batch order is
deterministic, so a resumed run equals an uninterrupted one to float64 rounding (docs/resume.md).
"""

from __future__ import annotations

import json
import os
import time
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from normvar_core import constants
from normvar_core.destination import open_regular, write_atomic
from normvar_core.errors import NormvarError
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
    def from_arrays(cls, start: int, stop: int, arrays: dict) -> PartialState:
        states: dict = {}
        for key, v in arrays.items():
            a, _, k = key.partition("__")
            states.setdefault(a, {})[k] = v
        return cls(start, stop, states)


def partial_state(measures: dict[str, Measure], start: int, stop: int) -> PartialState:
    """The state of live measures that have seen batches [start, stop)."""
    return PartialState(start, stop, {name: measure.state_dict() for name, measure in measures.items()})


def load_partial(measures: dict[str, Measure], partial: PartialState, path=None) -> dict[str, Measure]:
    """``accs`` (fresh: ``partials.build_measures``) restored from ``partial``, in place and returned. Every
    measure the run wants must be in the partial state, with its keys and shapes, and no count negative: else one
    NormvarError line naming the checkpoint ``path`` (``refused``)."""
    for name, measure in measures.items():
        if name not in partial.states:
            raise refused(path, f"it holds no state of the measure {name}")
        try:
            measure.load_state_dict(partial.states[name])
        except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as exc:
            raise refused(
                path, f"the state of {name} does not fit this run ({str(exc).splitlines()[0][:120]})"
            ) from None
        if bad := measure.negative_counts():
            raise refused(path, f"negative counts in {name} ({', '.join(bad)})")
    return measures


def refused(path, why: str) -> NormvarError:
    """The one line of a checkpoint that does not fit its run; the file is left as it is."""
    return NormvarError(
        f"checkpoint {path} does not fit this run: {why}; it was left as it is",
        fix="pass --fresh to start over (it is replaced), or move it aside",
    )


def save(path: Path, fingerprint: dict, partial: PartialState, extra: dict) -> None:
    arrays = partial.arrays()
    meta = dict(fingerprint=fingerprint, format=FORMAT, start=partial.start, next_batch=partial.stop, **extra)
    arrays["meta_json"] = np.array(json.dumps(meta, sort_keys=True, default=str))
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]  # named arrays
            fh.flush()
            os.fsync(fh.fileno())

    write_atomic(path, write, what="--checkpoint")


def _open_npz(path: Path):
    """The checkpoint's archive (``np.load`` over a descriptor from ``destination.open_regular``: a link, folder
    or FIFO under the name is refused in one line and never followed or opened) and its meta; a file that is
    not a normvar checkpoint is refused in one line (``not_a_checkpoint``)."""
    fd = open_regular(path, os.O_RDONLY, what="the checkpoint")
    fh = os.fdopen(fd, "rb")
    try:
        z = np.load(fh, allow_pickle=False)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        fh.close()
        raise not_a_checkpoint(path, "not a .npz archive") from None
    try:
        meta = json.loads(str(z["meta_json"]))
        if not (isinstance(meta, dict) and str(meta.get("format", "")).startswith("normvar-checkpoint")):
            raise ValueError
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile):
        z.close()
        fh.close()
        raise not_a_checkpoint(path, "no normvar checkpoint metadata in it") from None
    return z, fh, meta


def remove_own(path) -> bool:
    """Remove the checkpoint at ``path`` when it is one normvar wrote (``_open_npz``: a regular file with one name,
    holding normvar's metadata); anything else under the name (a link planted meanwhile, a hard link, another
    program's file) is left as it is. True when it was removed."""
    try:
        z, fh, _ = _open_npz(Path(path))
    except (NormvarError, OSError):
        return False
    z.close()
    fh.close()
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def not_a_checkpoint(path, why: str) -> NormvarError:
    return NormvarError(
        f"{path} is not a normvar checkpoint ({why}); it was left as it is",
        fix="move it aside or choose another --checkpoint (normvar replaces only its own checkpoints)",
    )


def _same(fingerprint: dict, meta: dict) -> bool:
    return meta.get("format") == FORMAT and json.loads(
        json.dumps(fingerprint, sort_keys=True, default=str)
    ) == meta.get("fingerprint")


def load(path: Path, fingerprint: dict, *, fresh: bool = False) -> tuple[PartialState, dict] | None:
    """(partial state, meta) of the checkpoint at ``path`` when it is one of this plan, None when there is none.
    A checkpoint of another configuration is refused in one line (``fresh``: None, so the run starts over and
    replaces it); a file that is not a checkpoint, or one whose batch index or counts cannot be this plan's
    (``check_partial``), is refused whatever ``fresh``. A refused file is never removed or replaced."""
    if path is None or not os.path.lexists(path):
        return None
    z, fh, meta = _open_npz(Path(path))
    try:
        if not _same(fingerprint, meta):
            if fresh:
                return None
            raise NormvarError(
                f"checkpoint {path} ({describe(path)}) belongs to another configuration of this "
                "run name; it was left as it is",
                fix="pass --fresh to start over (the checkpoint is replaced), or choose a different --name",
            )
        try:
            arrays = {k: z[k] for k in z.files if k != "meta_json"}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise not_a_checkpoint(path, f"unreadable array: {str(exc).splitlines()[0][:80]}") from None
    finally:
        z.close()
        fh.close()
    partial = PartialState.from_arrays(_int(meta, "start"), _int(meta, "next_batch"), arrays)
    check_partial(path, partial, meta, int(fingerprint.get("n_batches") or 0))
    return partial, meta


def _int(meta: dict, key: str) -> int:
    try:
        return int(meta.get(key))  # type: ignore[arg-type]  # a missing key raises, caught below
    except (TypeError, ValueError):
        return -1


def check_partial(path, partial: PartialState, meta: dict, n_batches: int) -> None:
    """The batch index and the early passes' counts of a checkpoint can be this plan's: 0 = start <= next_batch
    <= n_batches (an early-pass checkpoint: next_batch 0, 0 <= early_done), and it holds some state."""
    if partial.start != 0 or not 0 <= partial.stop <= n_batches:
        raise refused(path, f"batch index {meta.get('start')}..{meta.get('next_batch')} outside 0..{n_batches}")
    if meta.get("early_done") is not None and (partial.stop != 0 or _int(meta, "early_done") < 0):
        raise refused(path, f"early pass at {meta.get('early_done')} batches")
    if not partial.states:
        raise refused(path, "it holds no state")


def dropped_of(meta: dict) -> set[str]:
    """The measures the checkpoint's own run left out for memory (its meta ``dropped``, written by every save of
    the pass: ``local``'s and ``ray_merge``'s)."""
    names = meta.get("dropped")
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def check_asked(path, partial: PartialState, meta: dict, cfg, registry=MEASURES) -> None:
    """Before the memory plan and the pass, measure by measure: every measure this run asks for
    (``Measure.asked``) is in the checkpoint, unless the checkpoint's run left it out for memory (``dropped_of``:
    the resumed run then leaves it out too, and says so). A checkpoint without one is refused in one line naming
    the measure and ``--fresh``, and left in place; ``check_planned`` then checks each kept measure's keys, dtypes
    and shapes, and ``load_partial`` the values."""
    dropped = dropped_of(meta)
    for cls in registry:
        if cls.asked(cfg) and cls.name not in partial.states and cls.name not in dropped:
            raise refused(path, f"it holds no state of the measure {cls.name}, which this run asks for")


def check_planned(path, partial: PartialState, ctx: RunContext, kept, registry=MEASURES) -> None:
    """Before the pass: every measure of the checkpoint is one this run keeps (``kept``: names), every kept one
    is in it, and each holds exactly the keys, dtypes and dimensions its class plans (``Measure.planned_state``),
    no larger in any axis (the plan is the state after the whole pass); ``load_partial`` checks the rest."""
    classes = {cls.name: cls for cls in registry}
    for name in kept:
        if name not in partial.states:
            raise refused(path, f"it holds no state of the measure {name}")
    for name, state in partial.states.items():
        if name not in classes or name not in kept:
            raise refused(path, f"it holds a measure this run does not keep ({name})")
        planned = classes[name].planned_state(ctx)
        if planned is None:
            continue
        if set(planned) != set(state):
            missing, extra = sorted(set(planned) - set(state)), sorted(set(state) - set(planned))
            raise refused(
                path,
                f"the state of {name} lacks {missing} or has extra {extra}"
                if extra
                else f"the state of {name} lacks {', '.join(missing)}",
            )
        for key, (shape, dtype) in planned.items():
            a = state[key]
            # the plan is the state after the whole pass: a state part-way holds no more in any axis (types seen)
            fits = a.dtype == np.dtype(dtype) and a.ndim == len(shape) and all(h <= p for h, p in zip(a.shape, shape))
            if not fits:
                raise refused(
                    path, f"{name}.{key} is {a.dtype}{list(a.shape)}, this run plans {np.dtype(dtype)}{list(shape)}"
                )


CHECKPOINT_EVERY_S = constants.CHECKPOINT_EVERY_S
"""A foreground compute's and the worker's periodic checkpoint interval (an interrupt saves at once)."""

COST_SHARE = constants.CHECKPOINT_COST_SHARE
"""A periodic save is due no sooner than 1 / COST_SHARE times the last save's duration after it: the periodic
checkpoints cost at most about 3 % of the run's wall time, whatever the state's size (an interrupt saves at once,
whatever the interval). Measured: a 20,000-sentence MiniLM run's state is 1.1 GB and a save of it takes 3.5–5.6 s,
so a save is then due every 2–3 minutes instead of every 60 s. ``normvar plan`` states the interval from the
state's bytes (``memory.plan.checkpoint_every``)."""


class Checkpointer:
    """Saves the partial state every ``every_s`` seconds (or, when a save takes long, every ``1 / COST_SHARE``
    times its duration) and on interruption between batches (``path`` None: never). A periodic save that fails
    (a full disk, a file size limit, a planted temp name) is one warning and the run goes on (``periodic``);
    a save on the way out that fails or is interrupted says so in ``exit_save``'s words."""

    def __init__(self, path: Path | None, fingerprint: dict, every_s: float):
        self.path, self.fingerprint, self.every_s = path, fingerprint, every_s
        self.last = time.monotonic()
        self.cost = 0.0  # seconds the last save took
        self.warned = False

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

    def periodic(self, save_now, *args) -> None:
        """``save_now(*args)`` (``save`` or ``save_early``); a failure is one warning (the first one only) and the
        run goes on, its next periodic save one interval later."""
        try:
            save_now(*args)
        except (OSError, NormvarError) as exc:
            self.last = time.monotonic()
            if not self.warned:
                self.warned = True
                warnings.warn(
                    f"could not save the checkpoint {self.path} ({_reason(exc)}); the run goes on, and "
                    "tries again at the next interval",
                    stacklevel=2,
                )

    def exit_save(self, save_now, *args, batches: str) -> str | None:
        """Save on the way out of an error or interruption (``save_now(*args)``): None when saved, else what
        happened in words (a second interrupt, a full disk): that error matters more, so nothing is raised."""
        if self.path is None:
            return None
        try:
            save_now(*args)
        except KeyboardInterrupt:
            return f"its save of {batches} was stopped by a second interrupt"
        except Exception as exc:
            return f"its save of {batches} failed ({_reason(exc)})"
        return None

    def save_early(self, states: dict[str, dict], done: int, planned: int) -> None:
        """Unfinished early passes ({measure name: ``EarlyPass.state_dict``}), ``done`` of their about ``planned``
        batches: the checkpoint holds them (``early_key``) in place of the measures (``next_batch`` 0)."""
        if self.path is None:
            return
        save(
            self.path,
            self.fingerprint,
            PartialState(0, 0, {early_key(n): st for n, st in states.items()}),
            {"early_done": int(done), "early_batches": int(planned)},
        )
        self.last = time.monotonic()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, NormvarError):
        return exc.message
    return getattr(exc, "strerror", None) or str(exc).splitlines()[0][:120] or type(exc).__name__


def note_on(exc: BaseException, note: str | None) -> None:
    """Attach ``note`` (what happened to the save on the way out) to the exception being raised: the CLI's
    interrupt line reads it (``checkpoint_note``)."""
    if note:
        try:
            exc.checkpoint_note = note  # type: ignore[attr-defined]  # a note for the CLI's interrupt line
        except (AttributeError, TypeError):
            pass


EARLY_SUFFIX = "_early"


def early_key(name: str) -> str:
    """A checkpoint's entry for measure ``name``'s unfinished early pass: ``<name>_early``."""
    return name + EARLY_SUFFIX


def early_states_of(resumed: tuple | None) -> dict[str, dict] | None:
    """{measure name: early pass state} of a checkpoint saved in the early passes (meta ``early_done``), else None."""
    if resumed is None or resumed[1].get("early_done") is None:
        return None
    return {k[: -len(EARLY_SUFFIX)]: st for k, st in resumed[0].states.items() if k.endswith(EARLY_SUFFIX)}


def early_meta(ctx: RunContext, registry=MEASURES) -> dict:
    """The meta entries a checkpoint of the pass keeps for every registered early pass (``checkpoint_meta`` of its
    result in ``ctx.early``, or of None when the run has none)."""
    out: dict = {}
    for cls in registry:
        if cls.early_pass is not None:
            out.update(cls.early_pass.checkpoint_meta(ctx.early.get(cls.name)))
    return out


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


def file_size(n: int) -> str:
    """A file's size in decimal units: "812 B", "41.3 kB", "116.2 MB", "1.2 GB"."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def describe(path: Path | None) -> str | None:
    """What a checkpoint file on disk keeps, in words, with its size (``file_size``): "N of M batches, 12.3 MB" (in the
    early
    passes: "N of M batches of the early pass, ..."); None when no normvar checkpoint is at ``path`` (a link,
    FIFO or other file there is not opened as one)."""
    if path is None or not os.path.lexists(path):
        return None
    try:
        z, fh, meta = _open_npz(Path(path))
        size = os.fstat(fh.fileno()).st_size
        z.close()
        fh.close()
    except (NormvarError, OSError):
        return None
    total = _int(meta.get("fingerprint") or {}, "n_batches")
    mb = file_size(size)
    if meta.get("early_done") is not None:
        return f"{_int(meta, 'early_done')} of {_int(meta, 'early_batches')} batches of the early pass, {mb}"
    return f"{_int(meta, 'next_batch')} of {total} batches, {mb}"


__all__ = [
    "FORMAT",
    "PartialState",
    "partial_state",
    "load_partial",
    "save",
    "load",
    "check_partial",
    "check_planned",
    "check_asked",
    "dropped_of",
    "refused",
    "not_a_checkpoint",
    "remove_own",
    "note_on",
    "Checkpointer",
    "early_key",
    "early_states_of",
    "early_meta",
    "early_results_of",
    "describe",
]
