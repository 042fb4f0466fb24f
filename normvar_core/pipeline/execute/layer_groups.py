"""State beside its layer: a device-mapped model's kept layers in groups, one per device-map entry
(``places.py``), and every measure held as one measure per group, on that group's device.

    groups_of(ctx)        [(entry, device, positions of its layers in ctx.layers)], None for one group
    LayerSplit            one measure name over the groups: update per group, state on the host
    update_split(measures, b) a StateBatch whose ``groups`` hold each group's states on its own device

During the pass no hidden state crosses devices: group g's measures read only group g's states,
which the source left on the device that computed them. The state a checkpoint, a resume, a Ray partial
or a merge sees is the whole run's (``state_dict``: each group's layer rows put back in layer order on the
host, the per-type ids sorted; the other keys are the same in every group), so those paths do not change,
and ``gathered()`` gives the measure of the whole run on the host for publishing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures.layerview import update_all
from normvar_core.pipeline.measures.state import DictReader
from normvar_core.pipeline.measures.token_moments import TokenMoments


def groups_of(ctx: RunContext) -> list[tuple[str, str, np.ndarray]] | None:
    """(map entry, state device, positions in ``ctx.layers``) per group, in order of first layer; None when
    the run has no places or all its kept layers sit in one group."""
    places = ctx.places
    if not places:
        return None
    order: dict[str, list[int]] = {}
    devices: dict[str, str] = {}
    for j, (entry, device) in enumerate(places):
        order.setdefault(entry, []).append(j)
        devices[entry] = device
    if len(order) < 2:
        return None
    return [(e, devices[e], np.asarray(pos, np.int64)) for e, pos in order.items()]


def sub_context(ctx: RunContext, device: str, positions: np.ndarray) -> RunContext:
    """The run's context for one group: its layers, its device."""
    return dataclasses.replace(ctx, layers=[ctx.layers[j] for j in positions], device=device, places=None)


def _sorted_types(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every nested per-type moments holder's rows in token-id order (``TokenMoments.sorted_rows``)."""
    out = dict(state)
    for key in [k for k in state if k == "ids" or k.endswith(".ids")]:
        pre = key[:-3]
        if all(pre + k in state for k in ("n", "mean", "s")):
            sub = TokenMoments.sorted_rows({k: state[pre + k] for k in ("ids", "n", "mean", "s")})
            out.update({pre + k: v for k, v in sub.items()})
    return out


class _GroupReader:
    """A reader of the whole run's state seen by one group: its layers' rows of the layer keys."""

    def __init__(self, reader, positions: np.ndarray, layered: set[str], prefix: str = ""):
        self.reader, self.positions, self.layered, self.prefix = reader, positions, layered, prefix

    def get(self, key: str) -> np.ndarray:
        a = self.reader.get(key)
        return np.asarray(a)[self.positions] if self.prefix + key in self.layered else a

    def blocks(self, key: str):
        if self.prefix + key not in self.layered:
            yield from self.reader.blocks(key)
            return
        want = set(int(p) for p in self.positions)
        for i, block in enumerate(self.reader.blocks(key)):
            if i in want:
                yield block

    def sub(self, prefix: str) -> _GroupReader:
        return _GroupReader(self.reader.sub(prefix), self.positions, self.layered, self.prefix + prefix)

    def has(self, key: str) -> bool:
        return self.reader.has(key)


class LayerSplit:
    """One measure (``cls``) of the run held as one per layer group (module docstring)."""

    def __init__(self, cls, ctx: RunContext, groups, parts: list):
        self.cls, self.name, self.ctx, self.groups, self.parts = cls, cls.name, ctx, groups, parts
        self.layered = parts[0].layer_keys()

    @classmethod
    def build(cls, acc_cls, ctx: RunContext, groups) -> LayerSplit | None:
        parts = [acc_cls.for_run(sub_context(ctx, dev, pos)) for _, dev, pos in groups]
        return None if any(p is None for p in parts) else cls(acc_cls, ctx, groups, parts)

    def state_dict(self) -> dict[str, np.ndarray]:
        """The whole run's state on the host: each group's layer rows in place, the rest from the first group."""
        states = [_sorted_types(p.state_dict()) for p in self.parts]
        L = len(self.ctx.layers)
        out = dict(states[0])
        for key in self.layered:
            first = np.asarray(states[0][key])
            full = (
                np.empty((L, *first.shape[1:]), first.dtype)
                if all(np.asarray(s[key]).shape[1:] == first.shape[1:] for s in states)
                else None
            )
            if full is None:  # rows of another length per group (the top activations): padded by the merge
                raise ValueError(f"state {self.name}.{key} differs in shape between layer groups")
            for (_, _, pos), s in zip(self.groups, states):
                full[pos] = np.asarray(s[key])
            out[key] = full
        return out

    def state_spec(self) -> dict[str, Any]:
        return {k: (tuple(v.shape), v.dtype) for k, v in self.state_dict().items()}

    def negative_counts(self) -> list[str]:
        """The state keys of counts holding a negative value, in any group (``State.negative_counts``)."""
        return sorted({k for part in self.parts for k in part.negative_counts()})

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for (_, _, pos), part in zip(self.groups, self.parts):
            part.load_state_dict({k: (np.asarray(v)[pos] if k in self.layered else v) for k, v in state.items()})

    def merge_from(self, reader) -> LayerSplit:
        for (_, _, pos), part in zip(self.groups, self.parts):
            part.merge_from(_GroupReader(reader, pos, self.layered))
        return self

    def merge(self, other) -> LayerSplit:
        return self.merge_from(DictReader(other.state_dict()))

    def gathered(self):
        """The whole run's measure on the host (CPU), holding this state: what publish reads."""
        measure = self.cls.for_run(dataclasses.replace(self.ctx, device="cpu", places=None))
        measure.load_state_dict(self.state_dict())
        return measure


def update_split(measures: dict, batch) -> None:
    """One StateBatch with per-group states (``batch.groups``) into every ``LayerSplit``: group g's part of
    each measure takes group g's states, on its device (the layer-major ones share their views)."""
    for g, states in enumerate(batch.groups):
        sub = dataclasses.replace(batch, states=states, groups=None)
        update_all({name: measure.parts[g] for name, measure in measures.items()}, sub)


def gather(measures: dict) -> dict:
    """Every ``LayerSplit`` replaced by the whole run's measure on the host (finalize)."""
    return {
        name: measure.gathered() if isinstance(measure, LayerSplit) else measure for name, measure in measures.items()
    }


__all__ = ["groups_of", "sub_context", "LayerSplit", "update_split", "gather"]
