"""Helpers of the worker tests (tests/test_worker_processes.py, tests/test_worker_faults.py): worker
subprocesses (``Workers``; the ``workers`` fixture in conftest.py kills any still alive at teardown), the light
run configuration they compute, waiting for a job, and two runs' tables compared at float32 rounding."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import cross_process
import duckdb
import numpy as np
import pandas as pd

from normvar_core.config import RunConfig
from normvar_core.datadir import DataDir
from normvar_core.service.jobs import JobStore

REPO = Path(__file__).resolve().parent.parent


def worker_env() -> dict:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        PYTHONUNBUFFERED="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=str(REPO),
    )
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


class Workers:
    """Starts worker subprocesses; kills every one still alive at teardown."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.procs: list[subprocess.Popen] = []

    def start(self, data_dir: Path, *, checkpoint_every: float = 0.2) -> subprocess.Popen:
        log = open(self.tmp / f"worker-{len(self.procs)}.log", "wb")
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "normvar_core.service.cli",
                "worker",
                "--data-dir",
                str(data_dir),
                "--poll",
                "0.1",
                "--checkpoint-every",
                str(checkpoint_every),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=worker_env(),
            cwd=self.tmp,
        )
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


def mini(minilm_path, corpus, name: str, **kw) -> RunConfig:
    # the worker is under test here, not the geometry (tests/test_geometry*.py): keep the runs light so
    # the timing-bound tests (progress within 2 s, the soak) measure the worker, not the CPU
    opts = dict(
        model=str(minilm_path),
        corpus=str(corpus),
        name=name,
        device="cpu",
        batch_size=8,
        samples_per_token=20,
        geometry=False,
    )
    opts.update(kw)
    return RunConfig(**opts)


def wait_final(store: JobStore, job_id: str, timeout: float = 240):
    return wait_for(
        lambda: (j := store.get(job_id)).state in ("done", "failed", "cancelled") and j,
        timeout,
        f"job {job_id} to finish",
        step=0.1,
    )


def table(path, sql: str) -> pd.DataFrame:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.sql(sql).df()
    finally:
        con.close()


MOMENT_QUERIES = (
    "SELECT * FROM token_stats ORDER BY layer, token_id",
    "SELECT * FROM layer_stats ORDER BY layer",
    "SELECT layer, token_id, mean FROM token_means ORDER BY layer, token_id",
    "SELECT layer, token_id, i, vector FROM samples ORDER BY layer, token_id, i",
)
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
