"""Registered state (as torcheval's ``Metric._add_state``): an object that streams a measure declares
each state array once — its name, its initial value (shape and dtype) and how two partial states of
disjoint data merge — and gets ``state_dict`` / ``load_state_dict`` / ``state_spec`` / ``to(device)``
and the merge for free.

Merge rules (``merge=``):

* ``"sum"``, ``"max"``, ``"min"``, ``"or"`` — elementwise: a = a + b, max(a, b), min(a, b), a | b;
* ``"same"`` — not merged: both partial states must hold the same value (e.g. the stored layers'
  indices), checked before anything else is merged;
* a rule object with ``merge(holder, name, reader)`` (as torchmetrics' ``dist_reduce_fx`` takes a function) —
  e.g. ``pooling.Chan`` (Chan, Golub & LeVeque's pooled mean and scatter, written once), ``samples.Fill``
  (planned picks copied where the other filled them), ``token_moments.ByType`` (the per-type table of counts,
  means and S_t, whose rows are matched by token id), ``twonn_stream.NeighbourState`` (the TwoNN sample and its
  neighbours) or ``Custom(fn)``: a function of the measure's own, ``fn(holder, reader)``, passed by reference;
* ``"pooled"`` — merged by another entry's rule (a Chan mean, a Fill's flags are read by it);
* a nested holder (anything with ``state_dict``/``load_state_dict``/``merge_from``/``state_spec``, e.g.
  the moments measure's ``TokenMoments``, itself a ``Stateful``) — its keys are prefixed ``<name>.``.

A state whose saved array is not the live value as it is (``TokenMoments``' tables hold spare rows
beyond the types seen, and only the seen rows are saved) names three hooks, each called with the
holder and the state's name: ``export`` (the host array that ``state_dict`` holds), ``spec`` (its
shape and dtype, without forming it) and ``restore`` (load a saved array back, with the array).
``_add_buffer`` registers a working tensor that is neither saved nor merged but moves with the
state on ``to(device)`` (as torch's non-persistent buffers: e.g. an index rebuilt from the state).

Rule objects run first, in declaration order (they read the counts as they were); the
elementwise ones last. Every merge reads the other state through a **reader** (``get(key)``: one
whole array; ``blocks(key)``: the array one block along its first axis — one layer — at a time), so
the same code merges an in-memory partial (``DictReader``) and one fetched piece by piece from a Ray
actor (``execute.ray_merge``: ``Pieces``, merged by ``MergedState``): at most one block of the incoming
state is held beside the merged one.
Counts are Python ints, stored as ``int64[1]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

ELEMENTWISE = ("sum", "max", "min", "or")


class DictReader:
    """A reader over a dict of arrays (``state_dict`` of another partial, a checkpoint's npz)."""

    def __init__(self, arrays, prefix: str = ""):
        self.arrays, self.prefix = arrays, prefix

    def get(self, key: str) -> np.ndarray:
        return np.asarray(self.arrays[self.prefix + key])

    def blocks(self, key: str) -> Iterator[np.ndarray]:
        yield from self.get(key)

    def sub(self, prefix: str) -> DictReader:
        return DictReader(self.arrays, self.prefix + prefix)

    def has(self, key: str) -> bool:
        return self.prefix + key in self.arrays


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch")


def as_like(block: np.ndarray, target):
    """``block`` as ``target``'s kind: a tensor on its device and dtype, or a numpy array (writable)."""
    if _is_tensor(target):
        import torch

        arr = block if block.flags.writeable else block.copy()
        return torch.from_numpy(np.ascontiguousarray(arr)).to(target.device, target.dtype)
    return np.asarray(block, dtype=target.dtype)


def _host(value) -> np.ndarray:
    return value.detach().cpu().numpy() if _is_tensor(value) else np.asarray(value)


def _is_nested(value) -> bool:
    return hasattr(value, "merge_from") and hasattr(value, "state_spec")


def _elementwise(rule: str, a, b):
    if rule == "sum":
        a += b
    elif rule == "or":
        a |= b
    else:
        fn = (np.maximum if rule == "max" else np.minimum) if not _is_tensor(a) else None
        if fn is not None:
            fn(a, b, out=a)
        else:
            import torch

            (torch.maximum if rule == "max" else torch.minimum)(a, b, out=a)


@dataclass(frozen=True)
class _Entry:
    """One registered state: its merge rule, whether a load must match its shape, and its hooks."""

    rule: Any
    fixed: bool
    export: Callable | None = None
    spec: Callable | None = None
    restore: Callable | None = None


class Custom:
    """The merge rule of a state that its measure merges itself: ``fn(holder, reader)`` (e.g. the outliers' top
    activations: ``Custom(OutlierMeasure.merge_top)``), a function passed by reference, never looked up by name."""

    def __init__(self, fn: Callable[[Any, Any], None]):
        self.fn = fn

    def merge(self, holder, name: str, reader) -> None:
        self.fn(holder, reader)


class Stateful:
    """A holder of registered state (see the module docstring)."""

    _states: dict

    if TYPE_CHECKING:  # for the type checker only: registered states are attributes set by ``_add_state``

        def __getattr__(self, name: str) -> Any: ...

    def _add_state(
        self,
        name: str,
        value: Any,
        merge: Any = "sum",
        *,
        fixed_shape: bool = True,
        per_layer: bool = True,
        export: Callable | None = None,
        spec: Callable | None = None,
        restore: Callable | None = None,
    ) -> None:
        """Register ``self.<name> = value`` (a tensor, a numpy array, an int count or a nested holder)
        merged by ``merge``; ``fixed_shape``: a loaded state must have the registered shape; ``per_layer``:
        an array stacked by kept layer along its first axis (False: one for all layers, e.g. per-type counts).
        ``export(holder, name)`` -> the array ``state_dict`` holds, ``spec(holder, name)`` -> its (shape,
        dtype), ``restore(holder, name, array)`` loads it: for a saved array that is not the value as it is
        (all three, or none)."""
        if "_states" not in self.__dict__:
            self._states = {}
        if isinstance(merge, str) and merge not in (*ELEMENTWISE, "same", "pooled"):
            raise ValueError(f"unknown merge rule {merge!r} for state {name!r}: give a rule object, e.g. Custom(fn)")
        if not isinstance(merge, str) and not _is_nested(value) and not callable(getattr(merge, "merge", None)):
            raise ValueError(f"merge rule {merge!r} for state {name!r} has no merge(holder, name, reader)")
        if len({export is None, spec is None, restore is None}) > 1:
            raise ValueError(f"state {name!r}: give export, spec and restore together, or none")
        self._states[name] = _Entry("nested" if _is_nested(value) else merge, fixed_shape, export, spec, restore)
        if not per_layer or isinstance(value, (int, np.integer)):
            self.__dict__.setdefault("_shared", set()).add(name)
        setattr(self, name, value)

    def _add_buffer(self, name: str, value: Any) -> None:
        """Register ``self.<name> = value``, a working tensor moved by ``to(device)``, never saved or merged."""
        self.__dict__.setdefault("_buffers", set()).add(name)
        setattr(self, name, value)

    def layer_keys(self) -> set[str]:
        """The ``state_dict`` keys stacked by kept layer along axis 0 (a layer group's state holds only its
        layers' rows of them; the others are the same for every group: ``execute/layer_groups.py``)."""
        out: set[str] = set()
        for name in self._states:
            v = getattr(self, name)
            if _is_nested(v):
                out |= {f"{name}.{k}" for k in v.layer_keys()}
            elif name not in self.__dict__.get("_shared", ()):
                out.add(name)
        return out

    count_states: tuple[str, ...] = ()
    """Registered arrays that are counts though not merged by ``"sum"`` (a holder's per-type counts)."""

    def negative_counts(self) -> list[str]:
        """The ``state_dict`` keys of counts holding a negative value: the int counts, integer arrays merged by
        ``"sum"`` and ``count_states``, nested holders included (a loaded checkpoint is checked with it)."""
        out: list[str] = []
        for name, entry in self._states.items():
            v = getattr(self, name)
            if _is_nested(v):
                out += [f"{name}.{k}" for k in v.negative_counts()]
                continue
            count = isinstance(v, (int, np.integer)) or name in self.count_states or entry.rule == "sum"
            a = np.asarray(_host(v)) if count and not isinstance(v, (int, np.integer)) else np.asarray(v)
            if count and a.dtype.kind == "i" and a.size and int(a.min()) < 0:
                out.append(name)
        return out

    # ------------------------------------------------------------------ state
    def state_spec(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """{key: (shape, dtype)} of every registered array, nested ones included (what ``state_dict`` holds)."""
        out = {}
        for name, entry in self._states.items():
            v = getattr(self, name)
            if _is_nested(v):
                out.update({f"{name}.{k}": s for k, s in v.state_spec().items()})
            elif entry.spec is not None:
                shape, dtype = entry.spec(self, name)
                out[name] = (tuple(shape), np.dtype(dtype))
            elif isinstance(v, (int, np.integer)):
                out[name] = ((1,), np.dtype(np.int64))
            else:
                out[name] = (tuple(v.shape), np.dtype(str(v.dtype).replace("torch.", "")))
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        """Numpy arrays only (never pickled): host views of the registered tensors, counts as int64[1]."""
        out: dict[str, np.ndarray] = {}
        for name, entry in self._states.items():
            v = getattr(self, name)
            if _is_nested(v):
                out.update({f"{name}.{k}": a for k, a in v.state_dict().items()})
            elif entry.export is not None:
                out[name] = entry.export(self, name)
            elif isinstance(v, (int, np.integer)):
                out[name] = np.array([int(v)], np.int64)
            else:
                out[name] = _host(v)
        return out

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Replace every registered value by the state's copy (same kind, device and dtype)."""
        for name, entry in self._states.items():
            v = getattr(self, name)
            if _is_nested(v):
                pre = name + "."
                v.load_state_dict({k[len(pre) :]: a for k, a in state.items() if k.startswith(pre)})
                continue
            if name not in state:
                raise ValueError(f"state lacks {name!r}")
            a = np.asarray(state[name])
            if entry.restore is not None:
                entry.restore(self, name, a)
            elif isinstance(v, (int, np.integer)):
                setattr(self, name, int(a.reshape(-1)[0]))
            elif entry.fixed and tuple(a.shape) != tuple(v.shape):
                raise ValueError(f"state {name!r} has shape {a.shape}, this run holds {tuple(v.shape)}")
            else:
                setattr(self, name, as_like(np.array(a), v))

    def to(self, device) -> Stateful:
        """Every registered tensor, buffer and nested holder moved to ``device`` (in place); numpy state
        stays on the host."""
        for name in (*self._states, *self.__dict__.get("_buffers", ())):
            v = getattr(self, name)
            if _is_tensor(v):
                setattr(self, name, v.to(device))
            elif _is_nested(v) and hasattr(v, "to"):
                setattr(self, name, v.to(device))
        if "device" in self.__dict__:
            import torch

            self.device = torch.device(device)
        return self

    # ------------------------------------------------------------------ merge
    def merge_from(self, reader) -> Stateful:
        """Pool another partial state, read through ``reader``, into this one in place."""
        for name, entry in self._states.items():
            if entry.rule == "same":
                self._check_same(name, reader)
        for name, entry in self._states.items():
            v, rule = getattr(self, name), entry.rule
            if _is_nested(v):
                v.merge_from(reader.sub(name + "."))
            elif not isinstance(rule, str):
                rule.merge(self, name, reader)
        for name, entry in self._states.items():
            if entry.rule in ELEMENTWISE:
                self._merge_elementwise(name, entry.rule, reader)
        return self

    def _check_same(self, name: str, reader) -> None:
        mine, theirs = _host(getattr(self, name)), np.asarray(reader.get(name))
        if mine.shape != theirs.shape or not np.array_equal(mine, theirs):
            raise ValueError(f"cannot merge partial states whose {name!r} differ: they are not of the same run")

    def _merge_elementwise(self, name: str, rule: str, reader) -> None:
        v = getattr(self, name)
        if isinstance(v, (int, np.integer)):
            setattr(self, name, int(v) + int(reader.get(name).reshape(-1)[0]))
        elif len(v.shape) < 2:
            _elementwise(rule, v, as_like(reader.get(name), v))
        else:
            for i, block in enumerate(reader.blocks(name)):
                _elementwise(rule, v[i], as_like(block, v))

    def merge(self, other: Stateful) -> Stateful:
        """Pool ``other`` (a partial state of the same run over other data) into this one; returns self."""
        return self.merge_from(DictReader(other.state_dict()))


__all__ = ["Stateful", "Custom", "DictReader", "ELEMENTWISE", "as_like"]
