"""The dashboard's one cache for reads of a run (``views/_run_cache.per_run_version``): a reader runs
once per (run file path, file version, arguments), again when the file is replaced (a new inode), and
every reader has a cache of its own."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from views._run_cache import per_run_version


def test_a_reader_runs_once_per_file_version_and_arguments():
    calls = []

    @per_run_version(8)
    def reader(run, layer, pool=False):
        calls.append((run.path, layer, pool))
        return object()

    run = SimpleNamespace(path="/data/runs/a.duckdb", version=(11, 4096, 1_700_000_000_000_000_000))
    first = reader(run, 3)
    assert reader(run, layer=3) is first and reader(run, np.int64(3), False) is first  # one key, however called
    assert len(calls) == 1
    assert reader(run, 3, True) is not first and len(calls) == 2  # another argument
    replaced = SimpleNamespace(path=run.path, version=(12, 4096, 1_700_000_000_000_000_000))  # renamed over: new inode
    assert reader(replaced, 3) is not first and len(calls) == 3
    assert reader(run, 3) is first  # the old version still cached


def test_every_reader_has_its_own_cache():
    @per_run_version(8)
    def tables(run, band):
        return "tables"

    @per_run_version(8)
    def figures(run, band):
        return "figures"

    run = SimpleNamespace(path="/data/runs/b.duckdb", version=(1, 2, 3))
    assert (tables(run, (1.0, 5.0)), figures(run, (1.0, 5.0))) == ("tables", "figures")


def test_copy_hands_each_caller_its_own_frame():
    @per_run_version(4, copy=True)
    def frame(run):
        return pd.DataFrame({"q": [1.0, 2.0]})

    run = SimpleNamespace(path="/data/runs/c.duckdb", version=(1, 2, 3))
    a = frame(run)
    a.loc[0, "q"] = -1.0
    assert frame(run)["q"].tolist() == [1.0, 2.0]
