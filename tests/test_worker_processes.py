"""End-to-end tests of the background worker with real processes, the real ``compute_run`` and
the real MiniLM on a few hundred sentences of the shipped novels (CPU, offline).

Every worker is a subprocess ``python -m normvar_core.service.cli worker --data-dir D``; fixtures kill
any that is still alive at teardown. Jobs are submitted and read through ``JobStore`` from this
(other) process, as the dashboard does.
"""
from __future__ import annotations

import gzip
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import cross_process
from normvar_core.config import RunConfig
from normvar_core.datadir import DEFAULT_CORPUS, DataDir
from normvar_core.service.jobs import JobStore

pytestmark = pytest.mark.subprocess

REPO = Path(__file__).resolve().parent.parent


def _env() -> dict:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1",
               PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(REPO))
    env.pop("NORMVAR_DATA", None)
    return env


def wait_for(pred, timeout: float, what: str, step: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The first 300 sentences (< 64 words) of the shipped novels as a .txt file."""
    out = tmp_path_factory.mktemp("corpus") / "novels_300.txt"
    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        lines = [s.strip() for s in itertools.islice(fh, 2000) if s.strip() and len(s.split()) < 64]
    out.write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
    return out


class Workers:
    """Starts worker subprocesses; kills every one still alive at teardown."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.procs: list[subprocess.Popen] = []

    def start(self, data_dir: Path, *, checkpoint_every: float = 0.2) -> subprocess.Popen:
        log = open(self.tmp / f"worker-{len(self.procs)}.log", "wb")
        p = subprocess.Popen(
            [sys.executable, "-m", "normvar_core.service.cli", "worker", "--data-dir", str(data_dir),
             "--poll", "0.1", "--checkpoint-every", str(checkpoint_every)],
            stdout=log, stderr=subprocess.STDOUT, env=_env(), cwd=self.tmp)
        p.log_path = log.name  # type: ignore[attr-defined]
        log.close()
        self.procs.append(p)
        wait_for(lambda: JobStore(data_dir).worker() is not None or p.poll() is not None, 60, "worker start")
        assert p.poll() is None, self.log(p)
        return p

    @staticmethod
    def log(p) -> str:
        return Path(p.log_path).read_text(errors="replace")[-4000:]

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=30)


@pytest.fixture
def workers(tmp_path):
    w = Workers(tmp_path)
    yield w
    w.close()


def mini(minilm_path, corpus, name: str, **kw) -> RunConfig:
    # the worker is under test here, not the geometry (tests/test_geometry*.py): keep the runs light so
    # the timing-bound tests (progress within 2 s, the soak) measure the worker, not the CPU
    opts = dict(model=str(minilm_path), corpus=str(corpus), name=name, device="cpu",
                batch_size=8, samples_per_token=20, geometry=False)
    opts.update(kw)
    return RunConfig(**opts)


def wait_final(store: JobStore, job_id: str, timeout: float = 240):
    return wait_for(lambda: (j := store.get(job_id)).state in ("done", "failed", "cancelled") and j,
                    timeout, f"job {job_id} to finish", step=0.1)


def table(path, sql: str) -> pd.DataFrame:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.sql(sql).df()
    finally:
        con.close()


MOMENT_QUERIES = ("SELECT * FROM token_stats ORDER BY layer, token_id",
                  "SELECT * FROM layer_stats ORDER BY layer",
                  "SELECT layer, token_id, mean FROM token_means ORDER BY layer, token_id",
                  "SELECT layer, token_id, i, vector FROM samples ORDER BY layer, token_id, i")
GEOMETRY_QUERIES = ("SELECT * FROM layer_geometry ORDER BY layer", "SELECT * FROM layer_spectrum ORDER BY layer, k")


def assert_same_stats(a, b, queries=MOMENT_QUERIES + GEOMETRY_QUERIES) -> None:
    """Two runs computed by different worker processes: the same rows, keys and counts; every float (and the
    float32 means and sampled vectors) to float32 rounding, not bit for bit (tests/cross_process.py)."""
    for sql in queries:
        ta, tb = table(a, sql), table(b, sql)
        assert len(ta) > 0 and list(ta.columns) == list(tb.columns) and len(ta) == len(tb), sql
        for col in ta.columns:
            x, y = ta[col], tb[col]
            if col in ("mean", "vector"):
                cross_process.assert_close(np.stack(x), np.stack(y), err_msg=f"{sql}: {col}")
            elif col == "norm_cv":  # √(Σ‖x‖²/n − mean²)/mean cancels when every norm is equal: ε moves it by √ε
                np.testing.assert_allclose(x, y, rtol=cross_process.RTOL, atol=4 * np.sqrt(cross_process.RTOL))
            elif pd.api.types.is_float_dtype(x):
                cross_process.assert_close(x, y, err_msg=f"{sql}: {col}")
            else:
                assert x.tolist() == y.tolist(), (sql, col)


def ckpt_exists(dd: DataDir, job_id: str) -> bool:
    return (dd.checkpoints / f"{job_id}.ckpt").exists()


# ----------------------------------------------------------------------------- tests
def test_kill9_mid_run_resumes_and_equals_uninterrupted(tmp_path, workers, minilm_path, corpus):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    # with the geometry on: its checkpointed state (scatter, cosines, TwoNN sample) must resume exactly too
    # 24 batches of 4: many still to go when the kill lands, however fast the machine
    resumed = store.submit(mini(minilm_path, corpus, "resumed", max_sentences=96, batch_size=4, geometry=True,
                                id_sample=256))
    w = workers.start(dd.root, checkpoint_every=0.2)
    wait_for(lambda: ckpt_exists(dd, resumed)
             and (store.get(resumed).progress or {}).get("sentences_done", 0) >= 40, 180,
             "a checkpoint of the running job, 40 sentences in")
    before = store.get(resumed).progress["sentences_done"]
    os.kill(w.pid, signal.SIGKILL)
    w.wait(timeout=30)
    job = store.get(resumed)
    assert job.state == "running" and job.interrupted, job  # what the dead worker left
    assert before < 96 and not dd.run_path("resumed").exists()

    straight = store.submit(mini(minilm_path, corpus, "straight", max_sentences=96, batch_size=4, geometry=True,
                                 id_sample=256))
    workers.start(dd.root, checkpoint_every=0.2)
    a, b = wait_final(store, resumed), wait_final(store, straight)
    assert a.state == "done" and b.state == "done", (a, b, workers.log(workers.procs[-1]))
    assert a.attempts == 2 and b.attempts == 1
    assert a.finished <= b.started  # the resumed job went first
    notes = json.loads(table(a.run_path, "SELECT notes FROM run").iloc[0, 0])
    assert notes["resumed_from_batch"] and notes["resumed_from_batch"] > 0
    assert_same_stats(a.run_path, b.run_path)
    print(f"kill -9 after {before} sentences; resumed from batch {notes['resumed_from_batch']} "
          f"of {notes['n_batches']}; token_stats/layer_stats/token_means/samples identical")
    assert not list(dd.checkpoints.iterdir())


def test_sigterm_stops_at_next_batch_keeps_checkpoint_and_resumes(tmp_path, workers, minilm_path, corpus):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    # 150 batches of 2: the job is still far from done when the signal lands, however fast the machine
    # (with 12 batches of 8 a fast run finished within the 0.5 s between progress writes)
    jid = store.submit(mini(minilm_path, corpus, "term", batch_size=2))
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


def test_cancel_queued_and_running(tmp_path, workers, minilm_path, corpus):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    running = store.submit(mini(minilm_path, corpus, "long", batch_size=2))
    queued = store.submit(mini(minilm_path, corpus, "never", max_sentences=20))
    r = subprocess.run([sys.executable, "-m", "normvar_core.service.cli", "cancel", queued, "--data-dir", str(dd.root)],
                       capture_output=True, text=True, env=_env(), timeout=60)
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


def test_failing_jobs_then_two_good_ones_in_order(tmp_path, workers, minilm_path, corpus, capsys):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    missing = store.submit(RunConfig(model=str(minilm_path), corpus=str(tmp_path / "nope.txt"), name="missing"))
    unknown = store.submit(RunConfig(model="no-such-model-xyz", corpus=str(corpus), name="unknown"))
    r = subprocess.run([sys.executable, "-m", "normvar_core.service.cli", "submit", "--data-dir", str(dd.root),
                        "--model", str(minilm_path), "--corpus", str(corpus), "--name", "good1",
                        "--max-sentences", "60", "--device", "cpu", "--samples-per-token", "5"],
                       capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    good1 = r.stdout.strip()
    good2 = store.submit(mini(minilm_path, corpus, "good2", max_sentences=60))
    workers.start(dd.root)
    jobs = {k: wait_final(store, v) for k, v in
            dict(missing=missing, unknown=unknown, good1=good1, good2=good2).items()}
    assert jobs["missing"].state == "failed" and "nope.txt" in jobs["missing"].message
    assert jobs["unknown"].state == "failed" and "no-such-model-xyz" in jobs["unknown"].message
    assert jobs["good1"].state == jobs["good2"].state == "done"
    assert jobs["missing"].finished <= jobs["unknown"].started <= jobs["unknown"].finished
    assert jobs["unknown"].finished <= jobs["good1"].started <= jobs["good1"].finished <= jobs["good2"].started
    assert sorted(p.stem for p in dd.published_runs()) == ["good1", "good2"]
    from normvar_core.service import cli

    assert cli.main(["jobs", "--data-dir", str(dd.root)]) == 0
    out = capsys.readouterr().out
    assert "failed" in out and "100.0%" in out and "no-such-model-xyz" in out, out


def test_progress_visible_from_another_process_within_2s(tmp_path, workers, minilm_path, corpus):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    # small batches keep the compute stage several seconds long on a fast or a busy machine
    jid = store.submit(mini(minilm_path, corpus, "prog", max_sentences=300, batch_size=2))
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
    compute = [s for s in seen if s[3] == "compute"]
    assert len(compute) >= 3, seen
    latency = max(t_seen - t_upd for t_seen, t_upd, *_ in seen)
    gaps = [b[0] - a[0] for a, b in zip(compute, compute[1:])]
    print(f"progress: {len(seen)} updates seen from another process, max latency {latency:.3f}s, "
          f"max heartbeat age {max(beat_age):.3f}s, max gap between compute updates {max(gaps):.3f}s")
    assert latency < 2.0  # a progress write is visible here within 2 s
    assert max(beat_age) < 2.0  # and the running job's row is never older than 2 s
    assert [s[2] for s in compute] == sorted(s[2] for s in compute)


READER = textwrap.dedent("""
    import json, sys, time, traceback
    import duckdb
    from normvar_core.errors import NormvarError
    from normvar_core.runs.reader import list_runs, open_run
    from normvar_core.datadir import DataDir
    dd = DataDir.at(sys.argv[1]); until = time.monotonic() + float(sys.argv[2])
    out = dict(loops=0, opens=0, queries=0, replaced=0, errors=[], names=set())
    while time.monotonic() < until:
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


@pytest.mark.slow
def test_soak_reader_never_fails_while_worker_publishes(tmp_path, workers, minilm_path, corpus):
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    first = store.submit(mini(minilm_path, corpus, "soak-0", max_sentences=20, samples_per_token=5))
    workers.start(dd.root)
    assert wait_final(store, first).state == "done"  # something to read from the start
    t_reader = time.time()
    reader = subprocess.Popen([sys.executable, "-c", READER, str(dd.root), str(SOAK_S)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path)
    try:
        submitted, i = [first], 0
        t_end = time.monotonic() + SOAK_S - 2
        while time.monotonic() < t_end:
            active = store.list(states=("queued", "running"))
            if len(active) < 2:
                i += 1
                # new names and overwrites of published ones (os.replace under a reader)
                name, overwrite = (f"soak-{i}", False) if i % 2 else (f"soak-{(i // 2) % 3}", True)
                if not overwrite and dd.run_path(name).exists():
                    name, overwrite = name, True
                submitted.append(store.submit(
                    mini(minilm_path, corpus, name, max_sentences=20 + 5 * (i % 4), samples_per_token=5),
                    overwrite=overwrite))
            time.sleep(0.2)
        out, err = reader.communicate(timeout=120)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert reader.returncode == 0, err
    res = json.loads(out.strip().splitlines()[-1])
    done = [j for j in (store.get(s) for s in submitted) if j.state == "done" and j.finished > t_reader]
    print(f"soak: {len(done)} runs published while the reader ran; reader {res['loops']} loops, "
          f"{res['opens']} open_run, {res['queries']} queries, {res['replaced']} replaced, "
          f"{len(res['errors'])} errors")
    assert res["errors"] == [], res["errors"][:3]
    assert len(done) >= 3 and res["queries"] >= 50
    assert any(j.overwrite for j in done)  # a published run was replaced under the reader
    assert not [j for j in (store.get(s) for s in submitted) if j.state == "failed"]
