"""Checkpoint series for training sweeps (Razzhigaev et al. 2024 Fig. 2–4): a folder of checkpoints as a trainer
writes them (``checkpoint-500/``, ``step500/``, ``global_step500/``), each with config and weights; or
hub revisions (Pythia's ``step1000``, ``step2000``, ...). The step comes from ``trainer_state.json``'s
``global_step`` when present, else from the folder or revision name."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from normvar_core.errors import NormvarError

_STEP = re.compile(r"^(?:checkpoint|global_step|step)[-_]?(\d+)$", re.IGNORECASE)
_WEIGHTS = ("*.safetensors", "*.bin")


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: str  # a local folder, or the model id for a hub revision
    revision: str | None = None


def _step_of(folder: Path) -> int | None:
    state = folder / "trainer_state.json"
    if state.exists():
        try:
            step = json.loads(state.read_text()).get("global_step")
            if isinstance(step, int) and step >= 0:
                return step
        except (OSError, ValueError):
            pass
    m = _STEP.match(folder.name)
    return int(m.group(1)) if m else None


def discover_checkpoints(folder) -> tuple[list[Checkpoint], list[str]]:
    """(good checkpoints sorted by step, problems): a checkpoint folder without config.json or weights
    is reported, not fatal — the sweep fails only that checkpoint. No checkpoint at all is an error."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise NormvarError(f"checkpoint folder not found: {folder}", fix="pass the trainer's output folder")
    good, problems = [], []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        step = _step_of(d)
        if step is None:
            continue
        missing = [
            n
            for n, ok in (
                ("config.json", (d / "config.json").exists()),
                ("weights", any(any(d.glob(g)) for g in _WEIGHTS)),
            )
            if not ok
        ]
        if missing:
            problems.append(f"{d.name}: no {' and no '.join(missing)}")
            continue
        good.append(Checkpoint(step, str(d)))
    if not good:
        raise NormvarError(
            f"no usable checkpoint in {root}" + (f" ({'; '.join(problems)})" if problems else ""),
            fix="checkpoints are folders named checkpoint-<step> with config.json and weights",
        )
    steps = [c.step for c in good]
    dup = sorted({s for s in steps if steps.count(s) > 1})
    if dup:
        raise NormvarError(f"several checkpoints claim step(s) {dup} in {root}", fix="keep one folder per step")
    return sorted(good, key=lambda c: c.step), problems


def parse_revisions(model: str, revisions: str) -> list[Checkpoint]:
    """Hub revisions 'step1000,step8000' of ``model``; the step is read from each name."""
    out = []
    for r in (x.strip() for x in revisions.split(",")):
        if not r:
            continue
        m = re.search(r"(\d+)", r)
        if not m:
            raise NormvarError(f"cannot read a training step from revision {r!r}", fix="use names like step1000")
        out.append(Checkpoint(int(m.group(1)), model, r))
    if not out:
        raise NormvarError("no revisions given", fix="e.g. --revisions step1000,step8000")
    return sorted(out, key=lambda c: c.step)


__all__ = ["Checkpoint", "discover_checkpoints", "parse_revisions"]
