"""A folder that a session fixture builds once for the whole test session, however many pytest-xdist processes
run it (``make test`` runs two).

``built_once(tmp_path_factory, name, build)``: under pytest-xdist, the first process that asks calls
``build(folder)`` in the session's common temporary folder (the parent of each process's ``getbasetemp()``), holding
a file lock, and the others wait on that lock; each process then takes its own copy into its ``getbasetemp()``, so
that what one process's tests and servers write there never reaches the other's (as when each built its own).
Without xdist it builds straight into ``getbasetemp() / name``. This is pytest-xdist's documented pattern for
session fixtures ("Making session-scoped fixtures execute only once").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock


def built_once(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """This process's folder ``name`` holding what ``build(folder)`` wrote, built once per session."""
    own = tmp_path_factory.getbasetemp() / name
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        own.mkdir(parents=True, exist_ok=True)
        build(own)
        return own
    common = tmp_path_factory.getbasetemp().parent / name
    done = common.with_name(name + ".built")
    with FileLock(str(common) + ".lock"):
        if not done.exists():
            shutil.rmtree(common, ignore_errors=True)  # what a process that failed to build left
            common.mkdir(parents=True)
            build(common)
            done.touch()
    shutil.copytree(common, own, symlinks=True)
    return own
