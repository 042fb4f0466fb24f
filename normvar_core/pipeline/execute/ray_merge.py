"""The Ray driver's one running state (``MergedState``): each actor's flushed partial merged in place as
it arrives, read through ``Pieces`` — the flush's small arrays, then every array of 3+ dimensions one
layer block at a time from the actor (``Shard.piece`` in ``ray_shard``), each block dropped before the
next — and checkpointed with the batch ranges it covers (one file, resumable).

Driver memory: the merged state + one layer block of the incoming partial (two at a block boundary)
+ the flush's small arrays (1- and 2-dimensional: counts, per-layer means, S_t), whatever the number of
actors. A merge is in place, so an actor dying half-way through handing its blocks over (``PieceLost``)
leaves a half-merged state: it is dropped for the last checkpoint — the state before that merge — or,
without a checkpoint, for an empty state; the ranges it no longer covers are run again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from normvar_core.pipeline.execute import checkpoint as ckpt
from normvar_core.pipeline.execute.partials import build_measures, merge_into

TRANSFER = "transfer"  # the actors' concurrency group that hands flushed blocks over while a range runs


class MergedState:
    """The driver's one running state: partials merged as they arrive, checkpointed with their ranges."""

    def __init__(self, ctx, path: Path | None, fingerprint: dict):
        self.ctx, self.path, self.fingerprint = ctx, path, fingerprint
        self.accs: dict | None = None  # the merged measures (None until ``ensure`` or a merge)
        self.covered: list[tuple[int, int]] = []
        self.nodes: set = set()
        self.oom = 0
        self.n_ranges = 0
        self.rollbacks = 0
        self.releases: list = []  # the actors' release calls (``Pieces.release``), awaited before they are killed

    def ensure(self) -> dict:
        """The merged state, empty measures of the run until something is merged."""
        if self.accs is None:
            self.accs = build_measures(self.ctx)
        return self.accs

    def resume(self) -> int:
        """Load the merged checkpoint of this plan, if any; the batches it covers."""
        got = ckpt.load(self.path, self.fingerprint) if self.path is not None else None
        if got is None or "ray_ranges" not in got[1]:
            return 0
        self.accs = ckpt.load_partial(build_measures(self.ctx), got[0], self.path)
        self.covered = [(int(a), int(b)) for a, b in got[1]["ray_ranges"]]
        self.oom = int(got[1].get("oom_splits", 0))
        return sum(b - a for a, b in self.covered)

    def add(self, out: dict, pieces: Pieces) -> None:
        """Merge an actor's flushed state in place, one small array or one layer block at a time, then
        checkpoint. If the actor dies before every block arrived, the half-merged state is dropped and
        the last checkpoint (or an empty state) taken instead: its ranges are run again."""
        ranges = [(int(a), int(b)) for a, b in np.asarray(out["covered"]).reshape(-1, 2)]
        if not ranges:
            return
        self.ensure()
        try:
            merge_into(self.accs, pieces)  # type: ignore[arg-type]  # set before the merge
        except PieceLost:
            self.rollback()
            return
        finally:
            self.releases.append(pieces.release(out["token"]))
        self.nodes.add(out.get("node"))
        self.oom += int(out.get("oom_splits", 0))
        out.clear()
        self.covered += ranges
        self.n_ranges += len(ranges)
        if self.path is not None:
            ckpt.save(
                self.path,
                self.fingerprint,
                ckpt.partial_state(self.accs, 0, 0),  # type: ignore[arg-type]  # set before the merge
                {
                    "ray_ranges": sorted(self.covered),
                    "oom_splits": self.oom,
                    "dropped": [] if self.ctx.memory is None else list(self.ctx.memory.dropped),
                },
            )

    def rollback(self) -> None:
        """Back to the last checkpoint (the state before the failed merge), or to nothing merged."""
        self.accs, self.covered, self.oom = None, [], 0
        if self.path is not None:
            self.resume()
        self.ensure()
        self.rollbacks += 1


class PieceLost(RuntimeError):
    """A flushed state's block could not be fetched (its actor died before handing it over)."""


class Pieces:
    """A reader (``state.DictReader``'s interface) over one actor's flushed state: the small arrays came
    with the flush; each layer block of a larger array is fetched when the merge reaches it and dropped
    before the next, so the driver holds its merged state plus one block (two at a block's boundary)."""

    def __init__(self, ray, actor, out: dict, prefix: str = ""):
        self.ray, self.actor, self.out, self.prefix = ray, actor, out, prefix

    def sub(self, prefix: str) -> Pieces:
        return Pieces(self.ray, self.actor, self.out, self.prefix + prefix)

    def has(self, key: str) -> bool:
        return self.prefix + key in self.out["small"] or self.prefix + key in self.out["blocks"]

    def get(self, key: str) -> np.ndarray:
        k = self.prefix + key
        if k in self.out["small"]:
            return self.out["small"][k]
        if k not in self.out["blocks"]:
            raise KeyError(f"the flushed state lacks {k!r}")
        return np.stack(list(self.blocks(key)))

    def blocks(self, key: str):
        k = self.prefix + key
        if k in self.out["small"]:
            yield from self.out["small"][k]
            return
        for i in range(self.out["blocks"][k]):
            block = self._fetch(k, i)
            yield block
            del block

    def _fetch(self, key: str, i: int) -> np.ndarray:
        try:
            return self.ray.get(self.actor.piece.options(concurrency_group=TRANSFER).remote(self.out["token"], key, i))
        except Exception as exc:
            raise PieceLost(f"block {i} of {key}: {str(exc).splitlines()[0][:160]}") from None

    def release(self, token: str):
        """Let the actor drop its flushed state; the call's reference (None without a token), which the pool
        waits for before it kills its actors (a release still in flight would fail against a killed actor)."""
        if token:
            return self.actor.release.options(concurrency_group=TRANSFER).remote(token)
        return None


__all__ = ["MergedState", "Pieces", "PieceLost", "TRANSFER"]
