"""Checkpoints: the partial state of batches [0, next) plus ``next`` (see ``execute``).

One ``.npz`` (numpy arrays + a JSON string; loaded with ``allow_pickle=False``) written to
``.<name>.tmp-<pid>`` and ``os.replace``d onto the path (``destination.write_atomic``: never over a
device, FIFO or folder; a user's ``--checkpoint`` is checked by ``destination.resolve_destination``), so a reader sees the old or the new
checkpoint, never half of one. A checkpoint is used only when its plan fingerprint (config,
batches, corpus hash, weights hash, counts) equals the run's; batch order is deterministic, so a
resumed run equals an uninterrupted one exactly.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np

from normvar_core.destination import write_atomic
from normvar_core.pipeline.execute.partials import PartialState

FORMAT = "normvar-checkpoint-3"  # 3: registered state keys (the moments under acc.*)


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


__all__ = ["save", "load", "FORMAT"]
