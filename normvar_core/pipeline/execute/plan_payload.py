"""A built plan as plain arrays, for workers that run batch ranges of it without the corpus.

The driver builds the plan once (``run_plan.make_plan``, from the encoding the workers made of their
byte ranges of the corpus: ``ray_corpus``); ``plan_payload`` flattens what the forward pass and the measures need — the
flat encoding and the batch groups (``batches.PaddedBatches``), the counted types and counts, the
sample plans — into numpy arrays that travel through Ray's object store (zero-copy on one node).
``plan_from_payload`` rebuilds a ``RunPlan`` whose batches, types and sample picks are the driver's
(the sentences' text and the type strings stay on the driver: only the published tables use them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from normvar_core.pipeline.batches import PaddedBatches
from normvar_core.pipeline.encoding import Encoded
from normvar_core.pipeline.run_plan import RunPlan
from normvar_core.pipeline.sample_plan import SamplePlan

_SAMPLE_FIELDS = ("token_ids", "i", "batch", "sentence", "offset")


def plan_payload(plan: RunPlan) -> dict[str, np.ndarray]:
    """The arrays a worker needs to run any batch range of ``plan``."""
    b = plan.batches
    if not isinstance(b, PaddedBatches):
        raise TypeError("plan_payload needs a plan built by make_plan (PaddedBatches)")
    enc = b.enc
    out: dict[str, Any] = {
        "enc_ids": enc.ids,
        "enc_special": enc.special,
        "enc_starts": enc.starts,
        "enc_lengths": enc.lengths,
        "group_sizes": np.array([len(g) for g in b.groups], np.int64),
        "group_rows": np.concatenate(b.groups).astype(np.int64) if b.groups else np.zeros(0, np.int64),
        "pad_id": np.int64(b.pad_id),
        "left": np.bool_(b.side == "left"),
        "layers": np.asarray(plan.layers, np.int64),
        "max_length": np.int64(plan.max_length),
        "token_ids": plan.token_ids,
        "counts": plan.counts,
    }
    if enc.word_type is not None:
        out.update(enc_word_type=enc.word_type, enc_word_occ=enc.word_occ)
    for name, sp in (("pca", plan.samples), ("uniform", plan.uniform)):  # the PCA picks, the TwoNN sample
        if sp is not None:
            out.update({f"{name}_{f}": getattr(sp, f) for f in _SAMPLE_FIELDS})
    return out


def _sample_plan(arrays: dict, name: str) -> SamplePlan | None:
    if f"{name}_token_ids" not in arrays:
        return None
    sp = SamplePlan(*(np.asarray(arrays[f"{name}_{f}"]) for f in _SAMPLE_FIELDS))  # type: ignore[arg-type]  # the fields in order
    for bi in np.unique(sp.batch):
        sp.by_batch[int(bi)] = np.flatnonzero(sp.batch == bi)
    return sp


def plan_from_payload(cfg, arrays: dict) -> RunPlan:
    """The worker's ``RunPlan``: the driver's batches, types, counts and sample plans."""
    words = "enc_word_type" in arrays
    enc = Encoded(
        np.asarray(arrays["enc_ids"]),
        np.asarray(arrays["enc_special"]),
        np.asarray(arrays["enc_starts"]),
        np.asarray(arrays["enc_lengths"]),
        0,
        word_type=np.asarray(arrays["enc_word_type"]) if words else None,
        word_occ=np.asarray(arrays["enc_word_occ"]) if words else None,
    )
    ends = np.cumsum(arrays["group_sizes"])
    groups = np.split(np.asarray(arrays["group_rows"], np.int64), ends[:-1]) if ends.size else []
    batches = PaddedBatches(enc, groups, int(arrays["pad_id"]), "left" if bool(arrays["left"]) else "right")
    token_ids = np.asarray(arrays["token_ids"], np.int64)
    return RunPlan(
        cfg=cfg,
        sentences=[],
        batches=batches,
        layers=[int(x) for x in arrays["layers"]],
        max_length=int(arrays["max_length"]),
        n_truncated=0,
        token_ids=token_ids,
        counts=np.asarray(arrays["counts"], np.int64),
        tokens={int(t): "" for t in token_ids},
        samples=_sample_plan(arrays, "pca"),  # type: ignore[arg-type]  # None when the run keeps no PCA picks
        uniform=_sample_plan(arrays, "uniform"),
    )


__all__ = ["plan_payload", "plan_from_payload"]
