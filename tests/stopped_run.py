"""A real checkpoint of a run stopped after its first batches, the starting point of the checkpoint-refusal tests:
``stopped_checkpoint`` computes a run of the tiny BERT over a small repetitive corpus through ``compute_run`` and
cancels it once ``batches`` batches of the pass are done, leaving its checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from normvar_core.config import RunConfig
from normvar_core.errors import CancelledError
from normvar_core.pipeline.execute.local import compute_run


def repetitive_corpus(path: Path, lines: int = 120) -> Path:
    path.write_text("\n".join(f"the cat {i % 9} sat on mat {i % 13} with a dog {i % 5}" for i in range(lines)) + "\n")
    return path


def stopped_checkpoint(cfg: RunConfig, root: Path, batches: int = 3) -> tuple[Path, dict]:
    """(the checkpoint of ``cfg`` computed over the data dir ``root / "a"`` and cancelled after ``batches`` batches,
    its meta)."""
    ckpt, seen = root / f"{cfg.name}.ckpt", []
    with pytest.raises(CancelledError):
        compute_run(
            cfg,
            root / "a",
            checkpoint=ckpt,
            checkpoint_every_s=1e9,
            progress=lambda p: seen.append(p.stage == "compute" and p.done > 0),
            should_cancel=lambda: sum(seen) >= batches,
        )
    with np.load(ckpt, allow_pickle=False) as z:
        meta = json.loads(str(z["meta_json"]))
    assert meta["next_batch"] == batches
    return ckpt, meta
