"""Dashboard plumbing, part 0: one cache for every read of a run. ``per_run_version`` turns a reader
``fn(run, *args)`` into one computed once per (run file path, file version, arguments) and shared by
every session (``st.cache_resource``: never pickled or copied; treat what it returns as read-only, or
ask for ``copy=True``). The version is the file's (inode, size, mtime_ns) (``runs.reader.file_version``,
``Run.version``): runs are replaced by atomic rename, never modified in place, so a recomputed run is
read again and an unchanged one never is."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import streamlit as st


def _plain(value: Any) -> Any:
    """An argument as a stable cache key: numpy scalars as Python numbers, lists as tuples."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    return value


def per_run_version(max_entries: int, *, copy: bool = False, spinner: bool | str = False) -> Callable:
    """Decorator: ``fn(run, *args, **kwargs)`` cached per (``run.path``, ``run.version``, the bound
    arguments with their defaults applied — so ``f(run, 3)`` and ``f(run, layer=3)`` share an entry).
    ``copy``: hand each caller its own copy (a DataFrame a page may change). ``spinner``: the text shown
    while a value is computed."""

    def wrap(fn: Callable) -> Callable:
        signature = inspect.signature(fn)

        def cached(_run, path: str, version: tuple, args: tuple):  # _run: not hashed (streamlit skips "_" names)
            return fn(_run, *args)

        # Streamlit keys a function's cache by its module and qualified name (nested functions of one
        # decorator would share a cache): give each reader its own.
        cached.__module__, cached.__qualname__, cached.__name__ = fn.__module__, fn.__qualname__, fn.__name__
        cached = st.cache_resource(show_spinner=spinner, max_entries=max_entries)(cached)

        def read(run, *args: Any, **kwargs: Any):
            bound = signature.bind(run, *args, **kwargs)
            bound.apply_defaults()
            if bound.kwargs:
                raise TypeError(f"{fn.__qualname__}: a cached reader takes positional parameters only")
            out = cached(run, str(run.path), tuple(run.version), _plain(bound.args[1:]))
            return out.copy() if copy else out

        read.__module__, read.__qualname__, read.__name__, read.__doc__ = (
            fn.__module__,
            fn.__qualname__,
            fn.__name__,
            fn.__doc__,
        )
        return read

    return wrap


__all__ = ["per_run_version"]
