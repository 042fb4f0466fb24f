"""The Ray executor. On one private local Ray shared by the file's runs (2 CPUs, started by the executor's own
``start_ray`` although a leftover session file names another cluster; the test faults armed per test, see
``ray_session``): the actors tokenize the corpus in shares and never open its path (the file is gone once the driver
has read it); a sharded run equals the single-process run (every table, to float32 rounding: the actors' forward
passes run in other processes) even when an actor dies holding an unflushed range, and the driver loads no weights
(the first actor computes the early axes); progress moves batch by batch inside the shards; a cancelled job
publishes nothing and keeps the merged checkpoint, from which a new driver resumes to the identical run. A real
``normvar compute --executor ray`` process starts its own. On a real two-node cluster
(``ray.cluster_utils.Cluster``): the actors run on both nodes, the run is identical, and every socket Ray listens on
is bound to loopback. A Ray that cannot be reached gives one line before any model is loaded."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from ray_driver import not_loopback, ray_listeners, watch_driver_loads
from same_run import assert_same_run

from normvar_core.config import RunConfig
from normvar_core.errors import CancelledError
from normvar_core.pipeline.execute import on_ray, ray_cluster, ray_shard
from normvar_core.pipeline.execute.local import compute_run
from normvar_core.runs.reader import open_run
from normvar_core.service import cli

pytestmark = pytest.mark.subprocess


def _vanishing_corpus(src, tmp_path):
    """A copy of ``src`` and a progress hook that deletes it once the driver has read it (stage
    "model"): an actor that opened the corpus path would fail."""
    corpus = tmp_path / "vanishing.txt"
    corpus.write_bytes(src.read_bytes())

    def hook(p):
        if p.stage == "model":
            corpus.unlink(missing_ok=True)

    return corpus, hook


@pytest.fixture(scope="module")
def base(tiny_models) -> dict:
    return dict(model=str(tiny_models["bert"]), batch_size=4, samples_per_token=5, id_sample=64)


@pytest.fixture(scope="module")
def one(base, corpus40, tmp_path_factory):
    """The single-process run the sharded runs must equal."""
    return open_run(compute_run(RunConfig(**base, corpus=str(corpus40), name="one"), tmp_path_factory.mktemp("one")))


DELAY_S = 0.3  # each batch lingers this long in its shard: progress is seen inside the shards, cancels land mid-run


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory):
    """The private Ray the file's runs share, started as a run starts it (``ray_cluster.start_ray``, what
    ``RayPool`` calls: a run finds it started and joins it) while a session file left by an earlier ``ray start``
    names a cluster that is gone (127.0.0.1:1): the run must not attach to that. The actors' processes inherit the
    environment Ray started with, so the faults are set here: ``{"crash": marker, "piece": marker}`` (``ray_shard``:
    an actor dies in a range while it holds another unflushed / while the driver fetches its blocks, once its
    marker is absent); both markers exist (disarmed) until a test deletes one."""
    import tempfile

    import ray

    ray.shutdown()
    ray_tmp = Path(tempfile.mkdtemp(prefix="nvray", dir="/tmp"))  # short: socket paths
    (ray_tmp / "ray").mkdir()
    (ray_tmp / "ray" / "ray_current_cluster").write_text("127.0.0.1:1")
    faults = {"crash": ray_tmp / "crashed", "piece": ray_tmp / "died-in-piece"}
    for marker in faults.values():
        marker.write_text("disarmed")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_TMPDIR", str(ray_tmp))
        with pytest.MonkeyPatch.context() as started_with:  # reaches Ray's processes only
            started_with.setenv(ray_shard.CRASH_ENV, str(faults["crash"]))
            started_with.setenv(ray_shard.PIECE_CRASH_ENV, str(faults["piece"]))
            started_with.setenv(ray_shard.DELAY_ENV, str(DELAY_S))
            ray_cluster.start_ray(None, 2)
        try:
            assert ray.get_runtime_context().gcs_address != "127.0.0.1:1"
            yield faults
        finally:
            ray.shutdown()
            shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.mark.slow
def test_a_ray_compute_through_the_cli_prints_no_raw_ray_line_and_equals_local(tmp_path, base, one, corpus40):
    """A real ``normvar compute --executor ray`` process (a private Ray on loopback): stdout is the run's path
    alone, every stderr line is normvar's own — no "Started a local Ray instance", no token-authentication
    warning, no "(raylet) Task Shard.release failed" — and the run equals the local one in every table."""
    import os
    import subprocess
    import sys
    import tempfile

    ray_tmp = Path(tempfile.mkdtemp(prefix="nvray", dir="/tmp"))  # its own Ray session folder
    env = dict(
        os.environ, PYTHONPATH=os.getcwd(), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", RAY_TMPDIR=str(ray_tmp)
    )
    env.pop("NORMVAR_WARNINGS", None)
    data = tmp_path / "data"
    argv = [
        "compute",
        "--model",
        base["model"],
        "--corpus",
        str(corpus40),
        "--name",
        "one",
        "--batch-size",
        str(base["batch_size"]),
        "--samples-per-token",
        str(base["samples_per_token"]),
        "--id-sample",
        str(base["id_sample"]),
        "--executor",
        "ray",
        "--workers",
        "2",
        "--quiet",
        "--data-dir",
        str(data),
    ]
    try:
        p = subprocess.run(
            [sys.executable, "-m", "normvar_core.service.cli", *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [str(data / "runs" / "one.duckdb")], p.stdout
    err = [x for x in p.stderr.splitlines() if x.strip()]
    assert all(x.startswith("normvar: note:") for x in err), err
    assert_same_run(open_run(data / "runs" / "one.duckdb"), one)


@pytest.mark.slow
def test_sharded_run_equals_single_process_even_when_an_actor_dies(
    tmp_path, base, one, corpus40, ray_session, monkeypatch
):
    marker = ray_session["crash"]
    marker.unlink()  # an actor dies in a range while holding another unflushed
    monkeypatch.setattr(on_ray, "PROGRESS_EVERY_S", 0.05)
    loads = watch_driver_loads(monkeypatch)  # the driver never loads the model, in any of the three runs
    corpus, vanish = _vanishing_corpus(corpus40, tmp_path)
    ckpt = tmp_path / "ck" / "j.ckpt"
    seen, listening = [], []  # (embeddings reported, merged checkpoint written); Ray's listeners

    def progress(p):
        vanish(p)
        if p.stage == "compute":
            seen.append((p.embeddings, ckpt.exists()))
            if not listening:
                listening.extend(ray_listeners())

    cfg = RunConfig(**base, corpus=str(corpus), name="one", executor="ray", workers=2)
    sharded = open_run(compute_run(cfg, tmp_path / "b", checkpoint=ckpt, progress=progress))
    assert marker.exists()  # an actor really died mid-run ...
    # cancelled once a merged checkpoint exists: nothing published, the checkpoint kept ...
    corpus, vanish = _vanishing_corpus(corpus40, tmp_path)
    with pytest.raises(CancelledError):
        compute_run(
            cfg.replace(corpus=str(corpus)),
            tmp_path / "c",
            checkpoint=ckpt,
            progress=vanish,
            checkpoint_every_s=0.2,
            should_cancel=ckpt.exists,
        )
    assert ckpt.exists() and not list((tmp_path / "c").rglob("*.duckdb"))
    # ... and a new driver resumes from it, running only the batches it does not cover
    corpus, vanish = _vanishing_corpus(corpus40, tmp_path)
    resumed = open_run(compute_run(cfg.replace(corpus=str(corpus)), tmp_path / "c", checkpoint=ckpt, progress=vanish))
    assert listening and not not_loopback(listening), listening  # the private Ray listens on loopback only
    # progress moves batch by batch inside the shards, before any partial state has been merged
    assert any(emb > 0 and not merged for emb, merged in seen), seen
    notes = sharded.meta["notes"]
    assert notes["executor"] == "ray" and notes["shards"] >= 4
    assert notes["rerun_ranges"] >= 1  # ... and the range it held was run again
    assert len(notes["tokenize_cpu_s"]) == 2  # both actors tokenized a share
    assert resumed.meta["notes"]["resumed_batches"] > 0
    assert not ckpt.exists()
    # no weights in the driver: occurrences on, their early axes computed by the first actor and sent to the others
    assert loads == []
    assert notes["occurrence_early"] > 0 and notes["occurrence_early"] == one.meta["notes"]["occurrence_early"]
    assert_same_run(sharded, one)
    assert_same_run(resumed, one)


@pytest.mark.slow
def test_an_actor_dying_while_the_driver_fetches_its_blocks_rolls_the_merge_back(
    tmp_path, base, one, corpus40, ray_session
):
    """The driver merges a flushed state in place, block by block: an actor that dies half-way leaves
    a half-merged state, which must be dropped (for the last checkpoint, or an empty state) and the
    ranges it no longer covers run again — the published run still equals the single-process one."""
    marker = ray_session["piece"]
    marker.unlink()
    cfg = RunConfig(**base, corpus=str(corpus40), name="one", executor="ray", workers=2)
    run = open_run(compute_run(cfg, tmp_path / "b", checkpoint=tmp_path / "j.ckpt", checkpoint_every_s=0.3))
    assert marker.exists()  # an actor died while handing blocks over ...
    assert run.meta["notes"]["merge_rollbacks"] == 1  # ... the half-merged state was dropped ...
    assert_same_run(run, one)  # ... and the run is still the one-process run


@pytest.mark.slow
def test_two_node_cluster_on_loopback(tmp_path, base, one, corpus40, monkeypatch):
    import tempfile

    import ray
    from ray.cluster_utils import Cluster

    ray.shutdown()
    ray_cluster.loopback_only(ray)  # what pins Ray to 127.0.0.1: see ray_cluster.loopback_only
    ray_tmp = tempfile.mkdtemp(prefix="nvray", dir="/tmp")  # its own session files (short: socket paths)
    monkeypatch.setenv("RAY_TMPDIR", ray_tmp)
    cluster = Cluster(
        initialize_head=True, head_node_args=dict(num_cpus=1, include_dashboard=False, node_ip_address="127.0.0.1")
    )
    corpus, vanish = _vanishing_corpus(corpus40, tmp_path)
    listening = []

    def progress(p):
        vanish(p)
        if p.stage == "compute" and p.embeddings > 0 and not listening:
            listening.extend(ray_listeners())

    try:
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        cfg = RunConfig(**base, corpus=str(corpus), name="one", executor="ray", workers=2, ray_address=cluster.address)
        sharded = open_run(compute_run(cfg, tmp_path / "b", progress=progress))
        nodes = [n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]]
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert nodes == ["127.0.0.1", "127.0.0.1"]
    assert sharded.meta["notes"]["ray_nodes"] == 2  # actors ran on both nodes
    assert {p for _, p in listening} >= {"gcs_server", "raylet"}, listening
    assert not not_loopback(listening), listening
    assert_same_run(sharded, one)


def test_missing_ranges_cover_exactly_the_batches_not_merged():
    from normvar_core.pipeline.batches import batch_token_counts
    from normvar_core.pipeline.run_plan import synthetic_plan

    plan = synthetic_plan(RunConfig(samples_per_token=0), n_sentences=300, vocab_size=50, layers=[0], batch_size=8)
    n, tokens = plan.n_batches, batch_token_counts(plan.batches)
    for covered, pieces in (([], 8), ([(0, 5), (12, 20)], 8), ([(3, n)], 3), ([(0, n)], 4), ([], 1)):
        got = on_ray.missing_ranges(plan, covered, pieces)
        hit = np.zeros(n, int)
        for a, b in covered + got:
            hit[a:b] += 1
        assert (hit == 1).all() and all(b > a for a, b in got)  # every batch exactly once
        if not covered:
            assert len(got) == pieces
            share = [tokens[a:b].sum() / tokens.sum() for a, b in got]
            assert max(share) < 1.6 / pieces  # about equal token counts


def test_unreachable_ray_is_one_line_before_the_model_loads(capsys, tmp_path, corpus40, monkeypatch):
    from normvar_core.pipeline import models as M

    monkeypatch.setattr(M, "load_model", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded")))
    code = cli.main(
        [
            "compute",
            "--corpus",
            str(corpus40),
            "--executor",
            "ray",
            "--ray-address",
            "127.0.0.1:1",
            "--data-dir",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Ray could not start" in err[0]
    assert (
        cli.main(
            [
                "compute",
                "--corpus",
                str(corpus40),
                "--executor",
                "ray",
                "--ray-address",
                "nonsense",
                "--data-dir",
                str(tmp_path),
            ]
        )
        == 2
    )
