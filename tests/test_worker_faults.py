"""Fault injection in the worker: a real worker process killed (SIGKILL, from inside, at a chosen
point) while loading the model, while computing, while writing the run file and between publishing
it and marking the job done. A plain worker started afterwards cleans up and finishes the job; the
run equals an uninterrupted one; nothing is half-published, no temp file or checkpoint is left."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from paused_compute import PATCHES
from worker_helpers import MOMENT_QUERIES, Workers, assert_same_stats, mini, wait_final, wait_for, worker_env

from normvar_core.datadir import DataDir
from normvar_core.service.jobs import JobStore

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

# Each stage: the code a patched worker runs before its loop (``paused_compute.PATCHES``, or the publish below);
# its ``stop_here()`` kills the process at once.
FAULTS = {
    "loading": PATCHES["load"],
    "computing": PATCHES["forward"],  # two batches in: a checkpoint may or may not exist
    "writing": PATCHES["write"],  # the temp file holds the run row and two tables
    "publishing": """
        import os
        from normvar_core import destination
        def move_into_place(tmp, path, overwrite):
            os.link(tmp, path)   # published under its name, the temp name not yet removed,
            stop_here()          # the job not yet marked done
        destination.move_into_place = move_into_place
    """,
}


def _faulty_worker(data: Path, stage: str, log: Path) -> subprocess.Popen:
    code = "import os, signal, sys\ndef stop_here():\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    code += textwrap.dedent(FAULTS[stage])
    code += textwrap.dedent(f"""
        from normvar_core.service import cli
        sys.exit(cli.main(["worker", "--data-dir", {str(data)!r}, "--poll", "0.1", "--checkpoint-every", "0.2"]))
    """)
    with open(log, "wb") as fh:
        return subprocess.Popen([sys.executable, "-c", code], stdout=fh, stderr=subprocess.STDOUT, env=worker_env())


@pytest.fixture(scope="module")
def reference(tmp_path_factory, minilm_path, novels300):
    """The uninterrupted run, computed by a plain worker."""
    tmp = tmp_path_factory.mktemp("reference")
    dd = DataDir.at(tmp / "data")
    w = Workers(tmp)
    try:
        store = JobStore(dd)
        job = store.submit(mini(minilm_path, novels300, "run", max_sentences=32))
        w.start(dd.root)
        assert wait_final(store, job).state == "done", w.log(w.procs[-1])
    finally:
        w.close()
    return dd.run_path("run")


@pytest.mark.parametrize("stage", list(FAULTS))
def test_worker_killed_at_each_stage_then_finishes_the_job(stage, tmp_path, workers, minilm_path, novels300, reference):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    job = store.submit(mini(minilm_path, novels300, "run", max_sentences=32))
    log = tmp_path / "faulty.log"
    p = _faulty_worker(dd.root, stage, log)
    assert p.wait(timeout=240) == -9, log.read_text(errors="replace")[-3000:]  # killed where it was told
    left = store.get(job)
    assert left.state == "running" and left.interrupted, left
    published = dd.run_path("run").exists()
    assert published == (stage == "publishing"), stage  # only a complete file is ever under the name
    first = dd.run_path("run").stat() if published else None
    if stage == "writing":
        assert [q for q in dd.runs.iterdir() if ".tmp-" in q.name], "the dead writer's temp file"

    w = workers.start(dd.root)
    done = wait_final(store, job)
    assert done.state == "done", (done, workers.log(w))
    assert done.attempts == 2, done
    if first is not None:  # the run the dead worker published is taken as it is, not recomputed
        now = dd.run_path("run").stat()
        assert (now.st_ino, now.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    assert_same_stats(dd.run_path("run"), reference, MOMENT_QUERIES)
    assert [q.name for q in dd.runs.iterdir()] == ["run.duckdb"]  # temp files of the dead process removed
    wait_for(lambda: not list(dd.checkpoints.iterdir()), 10, "the checkpoint to be removed")
