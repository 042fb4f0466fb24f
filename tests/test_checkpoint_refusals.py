"""A checkpoint is never destroyed by anything but the publish of its own run, and never read into a traceback:
a checkpoint of another configuration under the same name, a crafted or inconsistent one with the right
fingerprint (a batch index past the plan or negative, negative counts, a wrong width, a measure's arrays missing)
and a file of random bytes are each refused in one line before the pass, and left byte for byte as they were;
``--fresh`` starts over over a checkpoint of another configuration. A periodic save that fails is one warning and
the run goes on, in a foreground compute and in a worker's job."""

from __future__ import annotations

import json
import os
import shutil
import warnings

import numpy as np
import pytest
from stopped_run import repetitive_corpus, stopped_checkpoint

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError
from normvar_core.pipeline.execute.local import compute_run
from normvar_core.runs.reader import open_run
from normvar_core.service import cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, tiny_models):
    """(config, corpus, a real checkpoint of 3 of its 15 batches, the uninterrupted run's path)."""
    root = tmp_path_factory.mktemp("ckpt")
    corpus = repetitive_corpus(root / "c.txt")
    cfg = RunConfig(
        model=str(tiny_models["bert"]), corpus=str(corpus), batch_size=8, id_sample=200, occurrences=0, name="r"
    )
    ckpt, _ = stopped_checkpoint(cfg, root)
    return cfg, corpus, ckpt, compute_run(cfg, root / "ref")


def _rewrite(src, dst, *, meta=None, arrays=None, drop=()):
    with np.load(src, allow_pickle=False) as z:
        got = {k: z[k] for k in z.files}
    m = json.loads(str(got["meta_json"]))
    m.update(meta or {})
    got["meta_json"] = np.array(json.dumps(m, sort_keys=True))
    for k, f in (arrays or {}).items():
        got[k] = f(got[k])
    for k in drop:
        del got[k]
    with open(dst, "wb") as fh:
        np.savez(fh, **got)


def _wider(a):
    return np.concatenate([a, a[..., :1]], axis=-1)


def _negative_first(a):
    a = a.copy()
    a[0] = -3
    return a


CRAFTED = {
    "next_batch 999": dict(meta={"next_batch": 999}),
    "negative next_batch": dict(meta={"next_batch": -2}),
    "negative counts": dict(arrays={"moments__acc.n": _negative_first}),
    "negative embedding count": dict(arrays={"moments__acc.n_embeddings": lambda a: -a}),
    "wrong width": dict(arrays={"moments__acc.mean": _wider}),
    "a measure's arrays missing": dict(drop=("geometry__scatter", "geometry__mean")),
}


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_checkpoint_is_refused_before_the_pass_and_kept(case, stopped, tmp_path):
    cfg, _, real, _ = stopped
    ckpt = tmp_path / "r.ckpt"
    _rewrite(real, ckpt, **CRAFTED[case])
    before = ckpt.read_bytes()
    batches = []
    with pytest.raises(NormvarError) as err:
        compute_run(
            cfg,
            tmp_path / "d",
            checkpoint=ckpt,
            progress=lambda p: batches.append(p.done) if p.stage == "compute" else None,
        )
    text = str(err.value)
    assert "\n" not in text and "does not fit this run" in text and "--fresh" in text, text
    assert not any(batches), batches  # refused before the first batch of the pass
    assert ckpt.read_bytes() == before and not list((tmp_path / "d" / "runs").glob("*.duckdb"))


def test_random_bytes_and_another_configuration_are_refused_in_one_line_and_kept(stopped, tmp_path, capsys):
    """The real CLI: a random-byte file at the checkpoint path is "not a normvar checkpoint" (no numpy text);
    a checkpoint of another configuration (another --seed) is refused naming --fresh and a different --name;
    both are left byte for byte; ``--fresh`` starts over and the run equals the uninterrupted one."""
    cfg, corpus, real, ref = stopped
    data = tmp_path / "data"
    ckpt = data / "checkpoints" / "r.ckpt"
    ckpt.parent.mkdir(parents=True)
    argv = [
        "compute",
        "--model",
        cfg.model,
        "--corpus",
        str(corpus),
        "--name",
        "r",
        "--batch-size",
        "8",
        "--id-sample",
        "200",
        "--occurrences",
        "0",
        "--quiet",
        "--data-dir",
        str(data),
    ]
    ckpt.write_bytes(np.random.default_rng(0).bytes(4096))
    noise = ckpt.read_bytes()
    assert cli.main(argv) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and "is not a normvar checkpoint" in err[0] and "pickle" not in err[0], err
    assert ckpt.read_bytes() == noise
    assert cli.main([*argv, "--fresh"]) == 2  # --fresh replaces only a checkpoint normvar made
    capsys.readouterr()
    assert ckpt.read_bytes() == noise

    shutil.copy(real, ckpt)
    kept = ckpt.read_bytes()
    assert cli.main([*argv, "--seed", "7"]) == 2  # another configuration of the name "r"
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and "belongs to another configuration" in err[0], err
    assert "--fresh" in err[0] and "--name" in err[0] and "3 of 15 batches" in err[0], err
    assert ckpt.read_bytes() == kept
    assert cli.main(argv) == 0  # its own configuration: resumes from it, publishes, removes it
    capsys.readouterr()
    got = open_run(data / "runs" / "r.duckdb")
    assert got.meta["notes"]["resumed_from_batch"] == 3 and not ckpt.exists()
    np.testing.assert_array_equal(got.stats().n, open_run(ref).stats().n)
    shutil.copy(real, ckpt)
    assert cli.main([*argv, "--seed", "7", "--fresh", "--overwrite"]) == 0
    assert not ckpt.exists() and open_run(data / "runs" / "r.duckdb").meta["notes"]["resumed_from_batch"] is None


def test_a_failing_periodic_save_is_one_warning_and_the_run_goes_on(stopped, tmp_path):
    """A real fault: a folder planted under the name of the checkpoint's temp file makes every periodic save fail
    (one every batch): one warning, and the run publishes what the uninterrupted run publishes."""
    cfg, _, _, ref = stopped
    ckpt = tmp_path / "r.ckpt"
    (tmp_path / f".r.ckpt.tmp-{os.getpid()}").mkdir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = compute_run(cfg, tmp_path / "d", checkpoint=ckpt, checkpoint_every_s=0.0)
    said = [str(w.message) for w in caught if "checkpoint" in str(w.message)]
    assert len(said) == 1 and "could not save the checkpoint" in said[0] and "goes on" in said[0], said
    np.testing.assert_array_equal(open_run(path).stats().n, open_run(ref).stats().n)
    assert not ckpt.exists()


def test_a_failing_periodic_save_does_not_fail_a_worker_job(stopped, tmp_path):
    """The worker's job with the same real fault: done, no message, no traceback file, one warning."""
    from normvar_core.datadir import DataDir
    from normvar_core.service.jobs import JobStore
    from normvar_core.service.worker import Worker

    cfg, _, _, ref = stopped
    dd = DataDir.at(tmp_path / "data")
    store = JobStore(dd)
    job = store.submit(cfg)
    dd.checkpoints.mkdir(parents=True, exist_ok=True)
    (dd.checkpoints / f".{job}.ckpt.tmp-{os.getpid()}").mkdir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert Worker(dd, poll_s=0.05, checkpoint_every_s=0.0).run(once=True, install_signals=False) == 1
    got = store.get(job)
    assert got.state == "done" and got.message is None, (got.state, got.message)
    assert not (dd.queue / "logs").exists() or not os.listdir(dd.queue / "logs")
    said = [str(w.message) for w in caught if "could not save the checkpoint" in str(w.message)]
    assert len(said) == 1, said
    np.testing.assert_array_equal(open_run(got.run_path).stats().n, open_run(ref).stats().n)
