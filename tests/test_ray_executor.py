"""The Ray executor on a local Ray (2 CPU actors): a sharded run equals the single-process run (every
table, 1e-12 relative); an actor killed in the middle of the run still gives the identical run; a Ray
that cannot be reached gives one line before any model is loaded; progress moves batch by batch
inside the shards, and a cancelled Ray job publishes nothing."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from normvar_core.config import RunConfig
from normvar_core.errors import CancelledError
from normvar_core.pipeline import ray_executor as RE
from normvar_core.pipeline.compute import compute_run
from normvar_core.runs.reader import open_run
from normvar_core.service import cli
from test_cli_runs import corpus40  # noqa: F401  (fixture)

NUMERIC_TABLES = ("token_stats", "layer_stats", "layer_geometry", "layer_spectrum", "token_selfsim", "dim_stats",
                  "layer_outliers", "top_activations", "samples")


def _assert_same(a, b):
    assert a.accumulators == b.accumulators and a.table_names == b.table_names
    for t in NUMERIC_TABLES:
        x, y = a.table(t), b.table(t)
        assert list(x.columns) == list(y.columns) and len(x) == len(y), t
        key = [c for c in ("layer", "token_id", "k", "dim", "rank", "i") if c in x.columns]
        x, y = x.sort_values(key).reset_index(drop=True), y.sort_values(key).reset_index(drop=True)
        for c in x.columns:
            if not pd.api.types.is_numeric_dtype(x[c]):
                if len(x) and isinstance(x[c].iloc[0], np.ndarray):
                    np.testing.assert_array_equal(np.stack(x[c]), np.stack(y[c]))
                else:
                    assert x[c].tolist() == y[c].tolist(), (t, c)
            else:
                yv = y[c].to_numpy(np.float64)
                # eigenvalues at the rounding floor (a LayerNorm makes the covariance singular) compare
                # against the largest one: 1e-12 of the spectrum's scale
                atol = 1e-12 * np.nanmax(np.abs(yv)) if t == "layer_spectrum" else 1e-300
                np.testing.assert_allclose(x[c].to_numpy(np.float64), yv, rtol=1e-12, atol=atol, err_msg=f"{t}.{c}")
    # the means are stored in float32: the exact float64 values may round to neighbouring floats (1 ulp)
    np.testing.assert_allclose(a.stats().mean, b.stats().mean, rtol=2.0 ** -23, atol=1e-30)


@pytest.mark.slow
def test_sharded_run_equals_single_process_even_when_an_actor_dies(tmp_path, tiny_models, corpus40, monkeypatch):
    import ray

    base = dict(model=str(tiny_models["bert"]), corpus=str(corpus40), batch_size=4, samples_per_token=5,
                id_sample=64)
    one = open_run(compute_run(RunConfig(**base, name="one"), tmp_path / "a"))
    marker = tmp_path / "crashed"
    monkeypatch.setenv("NORMVAR_TEST_CRASH_ONCE", str(marker))   # the first shard's actor dies (os._exit)
    monkeypatch.setenv(RE.DELAY_ENV, "0.3")                       # each batch then lingers 0.3 s in its shard
    monkeypatch.setattr(RE, "PROGRESS_EVERY_S", 0.05)
    shards = tmp_path / "ck" / "j.ckpt.shards"
    seen = []  # (embeddings reported, shards finished at that moment)

    def progress(p):
        if p.stage == "compute":
            seen.append((p.embeddings, len(list(shards.glob("*.npz"))) if shards.exists() else 0))

    try:
        sharded = open_run(compute_run(RunConfig(**base, name="one", executor="ray", workers=2), tmp_path / "b",
                                       checkpoint=tmp_path / "ck" / "j.ckpt", progress=progress))
        # a cancelled Ray job stops at the driver's next poll and publishes nothing
        started = []

        def cancel_once_moving(p):
            started.append(p.stage == "compute" and p.embeddings > 0)

        with pytest.raises(CancelledError):
            compute_run(RunConfig(**base, name="two", executor="ray", workers=2), tmp_path / "c",
                        progress=cancel_once_moving, should_cancel=lambda: any(started))
    finally:
        ray.shutdown()
    assert not list((tmp_path / "c").rglob("*.duckdb"))
    # progress moves batch by batch inside the shards, before any shard has finished
    assert any(emb > 0 and finished == 0 for emb, finished in seen), seen
    assert marker.exists()                                        # an actor really died mid-run
    assert sharded.meta["notes"]["executor"] == "ray" and sharded.meta["notes"]["shards"] >= 4
    assert not (tmp_path / "ck" / "j.ckpt.shards").exists() or not list((tmp_path / "ck" / "j.ckpt.shards").iterdir())
    _assert_same(sharded, one)


def test_unreachable_ray_is_one_line_before_the_model_loads(capsys, tmp_path, corpus40, monkeypatch):
    from normvar_core.pipeline import models as M

    monkeypatch.setattr(M, "load_model", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded")))
    code = cli.main(["compute", "--corpus", str(corpus40), "--executor", "ray", "--ray-address", "127.0.0.1:1",
                     "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Ray could not start" in err[0]
    assert cli.main(["compute", "--corpus", str(corpus40), "--executor", "ray", "--ray-address", "nonsense",
                     "--data-dir", str(tmp_path)]) == 2
