"""Fast, in-process tests of the job table, the queue, the worker's state machine and the corpus
store. ``compute_run`` is replaced by a small fake here; tests/test_worker_processes.py runs
the real worker process with the real compute_run and MiniLM."""

from __future__ import annotations

import gzip
import json
import sqlite3
import threading
import time
import zipfile
from pathlib import Path

import pytest

from normvar_core.config import RunConfig
from normvar_core.datadir import DataDir
from normvar_core.errors import CancelledError, NormvarError
from normvar_core.service import jobs as J
from normvar_core.service import worker as W


def write_ckpt(path, step: int) -> None:
    """A stand-in checkpoint the worker takes as normvar's (``job_table.is_own_checkpoint``): a zip archive with a
    ``meta_json.npy`` entry (here holding the step as JSON)."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("meta_json.npy", json.dumps({"step": step}))


def read_ckpt(path) -> int:
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("meta_json.npy"))["step"]


class FakeCompute:
    """Stands in for compute_run: `steps` batches, progress + should_cancel at each, a
    checkpoint file, and a published file. model='bad' fails like an unknown model."""

    def __init__(self, steps=5, step_s=0.0, on_step=None, on_publish=None):
        self.steps, self.step_s, self.on_step, self.on_publish = steps, step_s, on_step, on_publish
        self.calls: list[dict] = []

    def __call__(
        self,
        cfg,
        data_dir=None,
        *,
        overwrite=False,
        progress=None,
        checkpoint=None,
        checkpoint_every_s=30.0,
        should_cancel=None,
        before_publish=None,
    ):
        dd = DataDir.at(data_dir)
        start = 0
        if checkpoint is not None and Path(checkpoint).exists():
            start = read_ckpt(checkpoint)
        self.calls.append(
            {
                "name": cfg.name,
                "start": start,
                "overwrite": overwrite,
                "checkpoint": checkpoint,
                "every": checkpoint_every_s,
            }
        )
        if cfg.model == "bad":
            raise NormvarError(f"unknown model {cfg.model!r}", fix="see `normvar models`")
        if cfg.model == "boom":
            raise RuntimeError("kaboom")
        for i in range(start, self.steps):
            if should_cancel is not None and should_cancel():
                raise CancelledError("cancelled")
            if self.on_step:
                self.on_step(cfg, i)
            time.sleep(self.step_s)
            write_ckpt(checkpoint, i + 1)
            if progress:
                progress(
                    {
                        "stage": "compute",
                        "sentences_done": (i + 1) * 10,
                        "sentences_total": self.steps * 10,
                        "embeddings": (i + 1) * 100,
                        "emb_per_s": 1000.0,
                        "eta_s": float(self.steps - i - 1),
                    }
                )
        out = dd.run_path(cfg.name)
        if out.exists() and not overwrite:
            raise NormvarError(f"run {cfg.name!r} already exists")
        if self.on_publish:
            self.on_publish(cfg, "before")
        if before_publish is not None and not before_publish():
            raise CancelledError("cancelled during the finalize; nothing was published")
        if self.on_publish:
            self.on_publish(cfg, "after")
        out.write_text("run")
        Path(checkpoint).unlink(missing_ok=True)
        return out


def cfg(name, **kw) -> RunConfig:
    return RunConfig(name=name, **kw)


@pytest.fixture
def dd(tmp_path) -> DataDir:
    return DataDir.at(tmp_path / "data")


def work(dd, fake, **kw) -> int:
    return W.Worker(dd, compute=fake, poll_s=0.05, **kw).run(once=True, install_signals=False)


# ------------------------------------------------------------------------- submit / table
def test_submit_list_get_and_json_queue(dd):
    store = J.JobStore(dd)
    a = store.submit(cfg("a"))
    b = store.submit({"name": "b", "max_sentences": 10})
    assert [j.id for j in store.list()] == [b, a]  # newest first
    job = store.get(a)
    assert job.state == "queued" and job.name == "a" and job.cfg == cfg("a")
    assert store.get(b[:6]).id == b  # unique prefix
    with pytest.raises(NormvarError, match="no job"):
        store.get("nope")
    # the queue is the job table alone: one file, each job's options stored as JSON text (never pickle)
    assert sorted(p.name for p in dd.queue.glob("*.sqlite")) == ["jobs.sqlite"]
    con = sqlite3.connect(dd.queue / "jobs.sqlite")
    rows = con.execute("select id, typeof(config), config from jobs order by seq").fetchall()
    con.close()
    assert [(r[0], r[1]) for r in rows] == [(a, "text"), (b, "text")]
    assert [json.loads(r[2])["name"] for r in rows] == ["a", "b"]
    # the worker takes them FIFO, each once
    assert [store.claim_next().id, store.claim_next().id, store.claim_next()] == [a, b, None]
    assert store.get(a).state == store.get(b).state == "running"


def test_submit_validates_and_refuses_duplicates(dd):
    store = J.JobStore(dd)
    with pytest.raises(NormvarError, match="unknown run option"):
        store.submit({"name": "x", "bogus": 1})
    with pytest.raises(NormvarError, match="invalid run name"):
        store.submit({"name": "../evil"})
    store.submit(cfg("dup"))
    with pytest.raises(NormvarError, match="already queued"):
        store.submit(cfg("dup"))
    with pytest.raises(NormvarError, match="would only queue a duplicate"):  # the same options again
        store.submit(cfg("dup"), overwrite=True)
    store.submit(cfg("dup").replace(seed=1), overwrite=True)  # other options: an explicit replacement
    dd.run_path("pub").write_text("x")
    with pytest.raises(NormvarError, match="already exists"):
        store.submit(cfg("pub"))
    jid = store.submit(cfg("pub"), overwrite=True)
    assert store.get(jid).overwrite


def test_submit_fills_default_name_and_absolute_corpus(dd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.txt").write_text("hello world\n")
    store = J.JobStore(dd)
    job = store.get(store.submit(RunConfig(corpus="c.txt")))
    assert job.cfg.corpus == str(tmp_path / "c.txt")
    assert job.name and job.cfg.name == job.name


def test_data_dirs_do_not_interfere(tmp_path):
    d1, d2 = DataDir.at(tmp_path / "one"), DataDir.at(tmp_path / "two")
    J.JobStore(d1).submit(cfg("same"))
    J.JobStore(d2).submit(cfg("same"))  # same name, other data dir: fine
    fake = FakeCompute()
    assert work(d1, fake) == 1
    assert J.JobStore(d1).list()[0].state == "done"
    assert J.JobStore(d2).list()[0].state == "queued"
    assert d1.run_path("same").exists() and not d2.run_path("same").exists()


# ------------------------------------------------------------------------- worker
def test_two_jobs_run_in_order_with_progress(dd):
    store = J.JobStore(dd)
    a, b = store.submit(cfg("a")), store.submit(cfg("b"))
    fake = FakeCompute(steps=3)
    assert work(dd, fake, checkpoint_every_s=0.25) == 2
    assert [c["name"] for c in fake.calls] == ["a", "b"]
    assert fake.calls[0]["every"] == 0.25
    assert fake.calls[0]["checkpoint"] == dd.checkpoints / f"{a}.ckpt"
    ja, jb = store.get(a), store.get(b)
    assert ja.state == jb.state == "done"
    assert ja.finished <= jb.started
    assert ja.run_path == str(dd.run_path("a"))
    assert ja.percent == 100.0 and ja.progress["sentences_done"] == 30
    assert ja.progress["embeddings"] == 300 and "updated" in ja.progress
    assert not list(dd.checkpoints.iterdir())


def test_failing_job_then_good_one(dd):
    store = J.JobStore(dd)
    bad = store.submit(cfg("bad", model="bad"))
    boom = store.submit(cfg("boom", model="boom"))
    good = store.submit(cfg("good"))
    work(dd, FakeCompute())
    assert store.get(bad).state == "failed"
    assert "unknown model 'bad'" in store.get(bad).message
    msg = store.get(boom).message  # one line, the traceback in a log file
    assert store.get(boom).state == "failed" and "\n" not in msg
    assert msg.startswith("unexpected error (RuntimeError: kaboom); full traceback in ")
    log = store.log_path(boom)
    assert str(log) in msg and "Traceback" in log.read_text() and "kaboom" in log.read_text()
    assert store.get(good).state == "done"


def test_cancel_queued_never_runs(dd):
    store = J.JobStore(dd)
    a, b = store.submit(cfg("a")), store.submit(cfg("b"))
    assert store.cancel(a).state == "cancelled"
    fake = FakeCompute()
    work(dd, fake)
    assert [c["name"] for c in fake.calls] == ["b"]
    assert store.get(a).state == "cancelled" and store.get(b).state == "done"
    assert store.cancel(b).state == "done"  # finished jobs are left alone
    # the name of a cancelled job can be submitted again
    store.submit(cfg("a"))


def test_cancel_running_stops_and_publishes_nothing(dd):
    store = J.JobStore(dd)
    jid = store.submit(cfg("a"))

    def on_step(c, i):
        if i == 2:
            assert store.cancel(jid).state == "running"  # the worker stops it at the next batch
            assert store.get(jid).cancel_requested

    fake = FakeCompute(steps=50, step_s=0.02, on_step=on_step)
    work(dd, fake)
    job = store.get(jid)
    assert job.state == "cancelled" and job.finished
    assert not dd.run_path("a").exists()
    assert not list(dd.checkpoints.iterdir())


def test_stop_requeues_at_front_and_resumes_from_checkpoint(dd):
    store = J.JobStore(dd)
    a, b = store.submit(cfg("a")), store.submit(cfg("b"))
    w = W.Worker(dd, compute=None, poll_s=0.05)

    def on_step(c, i):
        if c.name == "a" and i == 3:
            w.stop()

    fake = FakeCompute(steps=8, on_step=on_step)
    w._compute_fn = fake
    w.run(once=True, install_signals=False)
    assert store.get(a).state == "queued" and store.get(b).state == "queued"
    assert (dd.checkpoints / f"{a}.ckpt").exists()  # checkpoint kept
    assert "resumes" in store.get(a).message
    fake2 = FakeCompute(steps=8)
    work(dd, fake2)
    assert [(c["name"], c["start"]) for c in fake2.calls] == [("a", 4), ("b", 0)]
    assert store.get(a).state == "done" and store.get(a).attempts == 1


def test_recovery_of_job_left_running_by_dead_worker(dd):
    store = J.JobStore(dd)
    a, b = store.submit(cfg("a")), store.submit(cfg("b"))
    # what a SIGKILL leaves: the table still says running, and no worker holds the lock
    with store._conn() as conn:
        conn.execute(
            "update jobs set state='running', attempts=1, worker_pid=999999, started=? where id=?", (time.time(), b)
        )
    assert store.get(b).interrupted  # no worker holds the lock
    write_ckpt(dd.checkpoints / f"{b}.ckpt", 2)
    (dd.runs / ".b.tmp-999999.duckdb").write_text("half")
    fake = FakeCompute(steps=4)
    work(dd, fake)
    assert [(c["name"], c["start"]) for c in fake.calls] == [("b", 2), ("a", 0)]  # resumed first
    assert store.get(a).state == store.get(b).state == "done"
    assert store.get(b).attempts == 2
    assert not (dd.runs / ".b.tmp-999999.duckdb").exists()


def test_recovery_gives_up_after_max_attempts_and_honours_cancel(dd):
    store = J.JobStore(dd)
    a, b = store.submit(cfg("a")), store.submit(cfg("b"))
    with store._conn() as conn:
        conn.execute("update jobs set state='running', attempts=?, worker_pid=999999 where id=?", (W.MAX_ATTEMPTS, a))
        conn.execute("update jobs set state='running', attempts=1, worker_pid=999999 where id=?", (b,))
    # cancel while no worker is alive: finished at once
    assert store.cancel(b).state == "cancelled"
    fake = FakeCompute()
    work(dd, fake)
    assert fake.calls == []
    assert store.get(a).state == "failed" and "died 3 times" in store.get(a).message


def test_published_but_not_marked_done_is_not_recomputed(dd):
    store = J.JobStore(dd)
    a = store.submit(cfg("a"))
    t0 = time.time() - 5
    with store._conn() as conn:
        conn.execute("update jobs set state='running', attempts=1, started=? where id=?", (t0, a))
    dd.run_path("a").write_text("published just before the kill")
    fake = FakeCompute()
    work(dd, fake)
    assert fake.calls == [] and store.get(a).state == "done"


def test_one_worker_per_data_dir(dd):
    w1 = W.Worker(dd)
    w1._acquire_lock()
    try:
        assert J.JobStore(dd).worker_running()
        with pytest.raises(NormvarError, match="another worker"):
            W.Worker(dd)._acquire_lock(wait_s=0.2)
    finally:
        w1._release_lock()
    assert not J.JobStore(dd).worker_running()


def test_worker_status_while_running(dd):
    store = J.JobStore(dd)
    assert store.worker() is None
    jid = store.submit(cfg("a"))
    seen = {}

    def on_step(c, i):
        if i == 1:
            seen["info"] = store.worker()
            seen["job"] = store.get(jid)

    work(dd, FakeCompute(steps=3, on_step=on_step))
    assert seen["info"].job_id == jid and seen["info"].pid > 0
    assert seen["job"].state == "running" and not seen["job"].interrupted
    assert store.worker() is None


def test_progress_is_throttled_but_flushed(dd):
    store = J.JobStore(dd)
    jid = store.submit(cfg("a"))
    rep = W._Reporter(store, jid)
    rep.start()
    try:
        for i in range(200):  # a burst: only the first write goes through immediately
            rep.update({"stage": "compute", "sentences_done": i, "sentences_total": 200})
        first = store.get(jid).progress["sentences_done"]
        assert first < 199
        time.sleep(W.PROGRESS_EVERY_S + 2 * W.HEARTBEAT_EVERY_S)  # the heartbeat flushes the rest
        assert store.get(jid).progress["sentences_done"] == 199
    finally:
        rep.stop()


def test_progress_dict_accepts_dataclass_namedtuple_and_nan():
    import collections
    import dataclasses

    @dataclasses.dataclass
    class P:
        stage: str
        eta_s: float

    NT = collections.namedtuple("NT", "stage eta_s")
    assert J.progress_dict(P("load", float("nan"))) == {"stage": "load", "eta_s": None}
    assert J.progress_dict(NT("compute", 1.5)) == {"stage": "compute", "eta_s": 1.5}


# ------------------------------------------------------------------------- CLI
def test_cli_submit_jobs_cancel(dd, capsys):
    from normvar_core.service import cli

    root = str(dd.root)
    assert cli.main(["submit", "--data-dir", root, "--name", "x", "--max-sentences", "5"]) == 0
    jid = capsys.readouterr().out.strip()
    assert J.JobStore(dd).get(jid).cfg.max_sentences == 5
    assert cli.main(["submit", "--data-dir", root, "--name", "x"]) == 2
    assert "already queued" in capsys.readouterr().err
    assert cli.main(["jobs", "--data-dir", root]) == 0
    out = capsys.readouterr().out
    assert "STATE" in out and jid in out and "queued" in out
    assert cli.main(["jobs", "--data-dir", root, "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rows[0]["id"] == jid and rows[0]["state"] == "queued"
    assert cli.main(["cancel", "--data-dir", root, jid[:5]]) == 0
    assert "cancelled" in capsys.readouterr().out
    assert J.JobStore(dd).get(jid).state == "cancelled"
    assert cli.main(["cancel", "--data-dir", root, "zzz"]) == 2


# ------------------------------------------------------------------------- corpus store
def test_store_corpus_dedup_and_hash_name(dd):
    data = b"The cat sat.\nA dog ran.\n"
    p1 = J.store_corpus(dd, data, ".txt")
    p2 = J.store_corpus(dd, data, "my upload.TXT")
    assert p1 == p2 and p1.parent == dd.corpora
    import hashlib

    assert p1.name == hashlib.sha256(data).hexdigest() + ".txt"
    assert p1.read_bytes() == data
    # one copy, no temp left; the upload's file name kept beside it as the label runs record
    assert sorted(p.name for p in dd.corpora.iterdir()) == [p1.name, p1.name + ".name"]
    assert (dd.corpora / (p1.name + ".name")).read_text() == "my-upload"
    gz = J.store_corpus(dd, gzip.compress(data), "corpus.txt.gz")
    assert gz.name.endswith(".txt.gz") and gz != p1
    # another file uploaded under a name already taken: the short hash tells them apart
    other = J.store_corpus(dd, b"Something else.\n", "my upload.txt")
    digest = hashlib.sha256(b"Something else.\n").hexdigest()
    assert (dd.corpora / (other.name + ".name")).read_text() == f"my-upload-{digest[:8]}"


def test_store_corpus_never_uses_the_name_as_a_path(dd, tmp_path):
    for evil in ("../../../etc/passwd.txt", "/tmp/x.jsonl", "..\\..\\a.csv", "a b;rm -rf.txt"):
        p = J.store_corpus(dd, evil.encode() + b"\n", evil)
        assert p.parent == dd.corpora
        assert p.name.split(".")[0].isalnum() and len(p.name.split(".")[0]) == 64
    assert not (tmp_path / "etc").exists()
    for bad in ("x.exe", "x.gz", "", "txt.zip", ".py"):
        with pytest.raises(NormvarError, match="unsupported corpus file type"):
            J.store_corpus(dd, b"x\n", bad)


def test_store_corpus_size_cap_and_content_checks(dd, monkeypatch):
    data = b"x" * 2048
    with pytest.raises(NormvarError, match="over the 0 MB limit"):
        J.store_corpus(dd, data, ".txt", max_mb=0.001)
    monkeypatch.setenv("NORMVAR_MAX_UPLOAD_MB", "0.001")
    with pytest.raises(NormvarError, match="NORMVAR_MAX_UPLOAD_MB"):
        J.store_corpus(dd, data, ".txt")
    assert J.max_upload_bytes() == int(0.001 * 2**20)
    monkeypatch.setenv("NORMVAR_MAX_UPLOAD_MB", "1")
    assert J.store_corpus(dd, data, ".txt").exists()
    monkeypatch.delenv("NORMVAR_MAX_UPLOAD_MB")
    assert J.max_upload_bytes() == 200 * 2**20
    with pytest.raises(NormvarError, match="empty"):
        J.store_corpus(dd, b"", ".txt")
    with pytest.raises(NormvarError, match="not gzip"):
        J.store_corpus(dd, b"plain", ".txt.gz")
    with pytest.raises(NormvarError, match="not a Parquet"):
        J.store_corpus(dd, b"plain", ".parquet")


def test_store_corpus_concurrent_same_bytes(dd):
    data = b"same bytes\n" * 1000
    out, errs = [], []

    def go():
        try:
            out.append(J.store_corpus(dd, data, ".txt"))
        except Exception as e:
            errs.append(e)

    ts = [threading.Thread(target=go) for _ in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errs and len(set(out)) == 1
    assert [p.name for p in dd.corpora.iterdir()] == [out[0].name]


def test_queued_job_with_a_cancel_request_is_never_run(dd):
    # a cancel that raced with the worker's requeue of a crashed job: flag set, state queued
    store = J.JobStore(dd)
    jid = store.submit(cfg("a"))
    with store._conn() as conn:
        conn.execute("update jobs set cancel_requested=1 where id=?", (jid,))
    fake = FakeCompute()
    work(dd, fake)
    assert fake.calls == [] and store.get(jid).state == "cancelled"


def test_upload_gzip_bomb_is_refused_while_streaming(tmp_path):
    """A .txt.gz that expands beyond the cap is refused without inflating it (cap on the expanded size)."""
    import gzip
    import tracemalloc

    from normvar_core.service.corpus_store import store_corpus

    bomb = gzip.compress(b"a" * (64 * 2**20))  # 64 MB of text in ~65 kB
    tracemalloc.start()
    with pytest.raises(NormvarError, match="expands beyond"):
        store_corpus(tmp_path, bomb, "x.txt.gz", max_mb=8)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * 2**20  # never held more than a few chunks
    assert not list((tmp_path / "corpora").glob("*"))  # nothing stored
    ok = store_corpus(tmp_path, gzip.compress(b"one sentence.\n" * 10), "x.txt.gz", max_mb=8)
    assert ok.exists() and ok.suffix == ".gz"


def test_jobs_queued_by_older_versions_still_run(dd):
    """An older normvar kept a second queue file (``queue/huey.sqlite``) beside the job table: the jobs the
    table holds as queued run once each, in order, from the table alone; the old file is never read."""
    store = J.JobStore(dd)
    a, b = store.submit(cfg("a")), store.submit(cfg("b"))
    old = dd.queue / "huey.sqlite"
    old.write_bytes(b"an older version's queue, even a damaged one" * 100)
    fake = FakeCompute(steps=2)
    assert work(dd, fake) == 2
    assert [c["name"] for c in fake.calls] == ["a", "b"]
    assert store.get(a).state == store.get(b).state == "done"
    assert old.read_bytes() == b"an older version's queue, even a damaged one" * 100


def test_runs_page_shows_a_failed_jobs_traceback(dd, monkeypatch):
    """The one-line message is in the jobs table; the full traceback of the log file is on the page."""
    from dashboard_run import APP
    from streamlit.testing.v1 import AppTest

    store = J.JobStore(dd)
    boom = store.submit(cfg("boom", model="boom"))
    work(dd, FakeCompute())
    monkeypatch.setenv("NORMVAR_DATA", str(dd.root))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/runs.py").run()
    assert not at.exception
    [exp] = [e for e in at.expander if boom in e.label]
    code = " ".join(c.value for c in exp.code)
    assert "Traceback (most recent call last)" in code and "RuntimeError: kaboom" in code
    assert any("kaboom" in str(df.value.to_dict()) for df in at.dataframe)


def test_a_cancel_before_the_publish_publishes_nothing_and_one_after_says_it_came_too_late(dd, capsys):
    """The job table decides, in one guarded UPDATE each, whether a cancel or the publish came first: a cancel asked
    before the worker's point of no return (``begin_publish``) ends the job cancelled with nothing published; one
    asked after it is answered "came too late" by ``normvar cancel``, and the job ends "done (cancel came too
    late)" in ``normvar jobs``."""
    from cli_helpers import run_cli

    store = J.JobStore(dd)
    early, late = store.submit(cfg("early")), store.submit(cfg("late"))
    lines = {}

    def on_publish(c, when):
        job_id = early if c.name == "early" else late
        if (c.name, when) in (("early", "before"), ("late", "after")):
            code, out, _ = run_cli(capsys, "cancel", job_id, "--data-dir", dd.root)
            assert code == 0
            lines[c.name] = out.strip()

    work(dd, FakeCompute(on_publish=on_publish))
    assert "cancelling" in lines["early"] and "came too late" not in lines["early"], lines
    assert store.get(early).state == "cancelled" and not dd.run_path("early").exists()
    assert (
        lines["late"] == f"{late}: the cancel came too late: its run file is being published; "
        "the job ends done (cancel came too late)"
    )
    job = store.get(late)
    assert job.state == "done" and job.message == "cancel came too late" and dd.run_path("late").exists()
    code, out, _ = run_cli(capsys, "jobs", "--data-dir", dd.root)
    row = next(x for x in out.splitlines() if x.startswith(late))
    assert code == 0 and "done (cancel came too late)" in row, out
    code, out, _ = run_cli(capsys, "cancel", late, "--data-dir", dd.root)
    assert out.strip() == f"{late}: already done (cancel came too late), nothing to cancel"
