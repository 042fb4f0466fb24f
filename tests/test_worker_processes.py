"""End-to-end tests of the background worker with real processes, the real ``compute_run`` and
the real MiniLM on a few hundred sentences of the shipped novels (CPU, offline).

Every worker is a subprocess ``python -m normvar_core.service.cli worker --data-dir D``; fixtures kill
any that is still alive at teardown. Jobs are submitted and read through ``JobStore`` from this
(other) process, as the dashboard does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from worker_helpers import assert_same_stats, ckpt_exists, mini, table, wait_final, wait_for, worker_env

from normvar_core.config import RunConfig
from normvar_core.datadir import DataDir
from normvar_core.service.jobs import JobStore

pytestmark = pytest.mark.subprocess


# ----------------------------------------------------------------------------- tests
def test_kill9_mid_run_resumes_and_equals_uninterrupted(tmp_path, workers, minilm_path, novels300):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    # with the geometry on: its checkpointed state (scatter, cosines, TwoNN sample) must resume exactly too
    # 48 batches of 2, killed once a checkpoint exists 8 sentences in: many batches still to go when the kill
    # lands, however fast the machine (with 24 of 4, killed 40 sentences in, a fast run had finished by then)
    resumed = store.submit(
        mini(minilm_path, novels300, "resumed", max_sentences=96, batch_size=2, geometry=True, id_sample=256)
    )
    w = workers.start(dd.root, checkpoint_every=0.2)
    wait_for(
        lambda: ckpt_exists(dd, resumed) and (store.get(resumed).progress or {}).get("sentences_done", 0) >= 8,
        180,
        "a checkpoint of the running job, 8 sentences in",
    )
    before = store.get(resumed).progress["sentences_done"]
    os.kill(w.pid, signal.SIGKILL)
    w.wait(timeout=30)
    job = store.get(resumed)
    assert job.state == "running" and job.interrupted, job  # what the dead worker left
    assert before < 96 and not dd.run_path("resumed").exists()

    straight = store.submit(
        mini(minilm_path, novels300, "straight", max_sentences=96, batch_size=2, geometry=True, id_sample=256)
    )
    workers.start(dd.root, checkpoint_every=0.2)
    a, b = wait_final(store, resumed), wait_final(store, straight)
    assert a.state == "done" and b.state == "done", (a, b, workers.log(workers.procs[-1]))
    assert a.attempts == 2 and b.attempts == 1
    assert a.finished <= b.started  # the resumed job went first
    notes = json.loads(table(a.run_path, "SELECT notes FROM run").iloc[0, 0])
    assert notes["resumed_from_batch"] and notes["resumed_from_batch"] > 0
    assert_same_stats(a.run_path, b.run_path)
    print(
        f"kill -9 after {before} sentences; resumed from batch {notes['resumed_from_batch']} "
        f"of {notes['n_batches']}; token_stats/layer_stats/token_means/samples identical"
    )
    assert not list(dd.checkpoints.iterdir())


def test_sigterm_stops_at_next_batch_keeps_checkpoint_and_resumes(tmp_path, workers, minilm_path, novels300):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    # 150 batches of 2: the job is still far from done when the signal lands, however fast the machine
    # (with 12 batches of 8 a fast run finished within the 0.5 s between progress writes)
    jid = store.submit(mini(minilm_path, novels300, "term", batch_size=2))
    w = workers.start(dd.root, checkpoint_every=60)  # only the stop writes a checkpoint
    wait_for(lambda: (store.get(jid).progress or {}).get("sentences_done", 0) >= 24, 180, "compute")
    w.send_signal(signal.SIGTERM)
    assert w.wait(timeout=30) == 0, workers.log(w)
    job = store.get(jid)
    assert job.state == "queued" and ckpt_exists(dd, jid), job
    assert store.worker() is None
    workers.start(dd.root)
    job = wait_final(store, jid)
    assert job.state == "done", job
    notes = json.loads(table(job.run_path, "SELECT notes FROM run").iloc[0, 0])
    assert notes["resumed_from_batch"] > 0


def test_cancel_queued_and_running(tmp_path, workers, minilm_path, novels300):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    running = store.submit(mini(minilm_path, novels300, "long", batch_size=2))
    queued = store.submit(mini(minilm_path, novels300, "never", max_sentences=20))
    r = subprocess.run(
        [sys.executable, "-m", "normvar_core.service.cli", "cancel", queued, "--data-dir", str(dd.root)],
        capture_output=True,
        text=True,
        env=worker_env(),
        timeout=60,
    )
    assert r.returncode == 0 and "cancelled" in r.stdout, r
    workers.start(dd.root, checkpoint_every=0.2)
    wait_for(lambda: ckpt_exists(dd, running), 180, "the long job to checkpoint")
    t0 = time.monotonic()
    assert store.cancel(running).state in ("running", "cancelled")
    job = wait_final(store, running, timeout=30)
    took = time.monotonic() - t0
    assert job.state == "cancelled" and took < 10, (job, took)
    assert store.get(queued).state == "cancelled" and store.get(queued).started is None
    assert not dd.published_runs()
    assert not ckpt_exists(dd, running) and not list(dd.checkpoints.iterdir())


def test_failing_jobs_then_two_good_ones_in_order(tmp_path, workers, minilm_path, novels300, capsys):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    from normvar_core.errors import NormvarError

    with pytest.raises(NormvarError, match="nope.txt"):  # submit checks what compute would refuse: never queued
        store.submit(RunConfig(model=str(minilm_path), corpus=str(tmp_path / "nope.txt"), name="missing"))
    unknown = store.submit(RunConfig(model="no-such-model-xyz", corpus=str(novels300), name="unknown"))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "normvar_core.service.cli",
            "submit",
            "--data-dir",
            str(dd.root),
            "--model",
            str(minilm_path),
            "--corpus",
            str(novels300),
            "--name",
            "good1",
            "--max-sentences",
            "60",
            "--device",
            "cpu",
            "--samples-per-token",
            "5",
        ],
        capture_output=True,
        text=True,
        env=worker_env(),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    good1 = r.stdout.strip()
    good2 = store.submit(mini(minilm_path, novels300, "good2", max_sentences=60))
    workers.start(dd.root)
    jobs = {k: wait_final(store, v) for k, v in dict(unknown=unknown, good1=good1, good2=good2).items()}
    assert jobs["unknown"].state == "failed" and "no-such-model-xyz" in jobs["unknown"].message
    assert jobs["good1"].state == jobs["good2"].state == "done"
    assert jobs["unknown"].started <= jobs["unknown"].finished
    assert jobs["unknown"].finished <= jobs["good1"].started <= jobs["good1"].finished <= jobs["good2"].started
    assert sorted(p.stem for p in dd.published_runs()) == ["good1", "good2"]
    from normvar_core.service import cli

    assert cli.main(["jobs", "--data-dir", str(dd.root)]) == 0
    out = capsys.readouterr().out
    assert "failed" in out and "100.0%" in out and "no-such-model-xyz" in out, out


def test_progress_visible_from_another_process_within_2s(tmp_path, workers, minilm_path, novels300):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    # small batches keep the compute stage several seconds long on a fast or a busy machine
    jid = store.submit(mini(minilm_path, novels300, "prog", max_sentences=300, batch_size=2))
    workers.start(dd.root)
    seen = []  # (time seen here, the worker's time of the update, sentences_done, stage)
    beat_age = []  # age of the running job's heartbeat as seen here
    last = None
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        job = store.get(jid)
        if job.state == "running" and job.heartbeat:
            beat_age.append(time.time() - job.heartbeat)
        p = job.progress
        if p and p.get("updated") != last:
            last = p["updated"]
            seen.append((time.time(), p["updated"], p.get("sentences_done"), p.get("stage")))
        if job.state in ("done", "failed", "cancelled"):
            break
        time.sleep(0.05)
    assert job.state == "done", job
    # the occurrences' early pass reads the first batches (their states reused by the pass): both are progress
    compute = [s for s in seen if s[3] in ("early", "compute")]
    assert len(compute) >= 3, seen
    latency = max(t_seen - t_upd for t_seen, t_upd, *_ in seen)
    gaps = [b[0] - a[0] for a, b in zip(compute, compute[1:])]
    print(
        f"progress: {len(seen)} updates seen from another process, max latency {latency:.3f}s, "
        f"max heartbeat age {max(beat_age):.3f}s, max gap between compute updates {max(gaps):.3f}s"
    )
    assert latency < 2.0  # a progress write is visible here within 2 s
    assert max(beat_age) < 2.0  # and the running job's row is never older than 2 s
    counted = [s[2] for s in compute if s[3] == "compute"]
    assert counted == sorted(counted)


READER = textwrap.dedent("""
    import json, sys, time, traceback
    import duckdb
    from normvar_core.errors import NormvarError
    from normvar_core.runs.reader import list_runs, open_run
    from normvar_core.datadir import DataDir
    from pathlib import Path
    dd, stop = DataDir.at(sys.argv[1]), Path(sys.argv[2]); until = time.monotonic() + float(sys.argv[3])
    out = dict(loops=0, opens=0, queries=0, replaced=0, errors=[], names=set())
    # until told to stop (the test saw its runs published) and 50 queries made; a cap against a lost test
    while time.monotonic() < until and not (stop.exists() and out["queries"] >= 50):
        out["loops"] += 1
        try:
            errs = []
            listed = list_runs(dd, errors=errs)
            out["errors"] += [f"list_runs: {p}: {m}" for p, m in errs]
            for p in dd.published_runs():
                run = open_run(p); out["opens"] += 1; out["names"].add(run.name)
                tt = run.token_table(run.layers[-1]); assert len(tt) > 0
                con = duckdb.connect(str(p), read_only=True)
                try:
                    n = con.execute("SELECT count(*) FROM token_stats WHERE layer = 0").fetchall()[0][0]
                finally:
                    con.close()
                assert n > 0; out["queries"] += 1
                try:
                    run.stats()
                except NormvarError as e:
                    if "was replaced" not in str(e): raise
                    out["replaced"] += 1
        except Exception:
            out["errors"].append(traceback.format_exc())
        time.sleep(0.01)
    out["names"] = sorted(out["names"])
    print(json.dumps(out))
""")


SOAK_S = float(os.environ.get("NORMVAR_SOAK_S", "30"))  # docs/benchmarks.md ("Worker soak") gives a 60 s soak
SOAK_CAP_S = 600.0
"""The soak lasts at least ``SOAK_S`` and until 3 runs (one of them an overwrite) were published under the reader,
however slow a loaded machine makes each run; at most this long."""


@pytest.mark.slow
def test_soak_reader_never_fails_while_worker_publishes(tmp_path, workers, minilm_path, novels300):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    first = store.submit(mini(minilm_path, novels300, "soak-0", max_sentences=20, samples_per_token=5))
    workers.start(dd.root)
    assert wait_final(store, first).state == "done"  # something to read from the start
    t_reader = time.time()
    stop = tmp_path / "stop-reading"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(dd.root), str(stop), str(SOAK_CAP_S + 120)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=worker_env(),
        cwd=tmp_path,
    )
    submitted = [first]

    def published() -> list:
        return [j for j in (store.get(s) for s in submitted) if j.state == "done" and j.finished > t_reader]

    try:
        i, t0 = 0, time.monotonic()
        while time.monotonic() < t0 + SOAK_CAP_S:
            if time.monotonic() >= t0 + SOAK_S - 2:
                done = published()
                if len(done) >= 3 and any(j.overwrite for j in done):
                    break
            active = store.list(states=("queued", "running"))
            if len(active) < 2:
                i += 1
                # new names and overwrites of published ones (os.replace under a reader)
                name, overwrite = (f"soak-{i}", False) if i % 2 else (f"soak-{(i // 2) % 3}", True)
                if not overwrite and dd.run_path(name).exists():
                    name, overwrite = name, True
                submitted.append(
                    store.submit(
                        mini(minilm_path, novels300, name, max_sentences=20 + 5 * (i % 4), samples_per_token=5),
                        overwrite=overwrite,
                    )
                )
            time.sleep(0.2)
        stop.touch()
        out, err = reader.communicate(timeout=240)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert reader.returncode == 0, err
    res = json.loads(out.strip().splitlines()[-1])
    done = published()
    print(
        f"soak: {len(done)} runs published while the reader ran; reader {res['loops']} loops, "
        f"{res['opens']} open_run, {res['queries']} queries, {res['replaced']} replaced, "
        f"{len(res['errors'])} errors"
    )
    assert res["errors"] == [], res["errors"][:3]
    assert len(done) >= 3 and res["queries"] >= 50
    assert any(j.overwrite for j in done)  # a published run was replaced under the reader
    assert not [j for j in (store.get(s) for s in submitted) if j.state == "failed"]
