"""Corpora named as Hugging Face datasets (``--dataset``, ``corpus.dataset``), offline.

The same sentences as a text file's lines, given as a ``save_to_disk`` folder, as Parquet data files, or
as a Hub id resolved from a local cache (both caches: the Hub cache's snapshot layout that
``snapshot_download`` writes, and the ``datasets`` cache that ``load_dataset`` prepares), give the text
file's run: every table, the same selection counts. The run row records where the rows came from, checked
against independent ground truth (the files' sha256 by hashlib, the fingerprint in the folder's
state.json, the commit the cache was written under). Bad input: one line, exit 2, before any model loads.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest
from cli_helpers import without_log
from corpus_files import corpus_lines
from same_run import assert_same_run

from normvar_core.config import RunConfig
from normvar_core.pipeline.corpus.read import load_sentences
from normvar_core.pipeline.execute.local import compute_run
from normvar_core.runs.reader import open_run

COMMIT = "0123456789abcdef0123456789abcdef01234567"
SELECTION = ("n_read", "n_kept", "n_empty", "n_too_long", "n_sampled_out", "n_capped")


def _sentences() -> list[str]:
    lines = corpus_lines(150, seed=7)
    lines[10] = "word " * 20  # too long for max_words=12
    return lines


def _write_sources(root: Path, lines: list[str]) -> dict:
    """The same lines as a text file, a save_to_disk folder (with an int column) and two Parquet files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from normvar_core.pipeline.corpus.dataset import datasets_offline

    datasets = datasets_offline()  # offline, no progress bars
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    datasets.Dataset.from_dict({"id": list(range(len(lines))), "text": lines}).save_to_disk(str(root / "saved"))
    half = len(lines) // 2
    for i, part in enumerate((lines[:half], lines[half:])):
        pq.write_table(
            pa.table({"n": list(range(len(part))), "text": part}), root / f"part{i}.parquet", row_group_size=17
        )
    return dict(
        text=root / "corpus.txt", saved=root / "saved", parquet=[root / "part0.parquet", root / "part1.parquet"]
    )


def _opts(model) -> dict:
    return dict(
        model=str(model),
        batch_size=4,
        samples_per_token=5,
        id_sample=64,
        sample_frac=0.7,
        seed=5,
        max_sentences=60,
        max_words=12,
    )


def _same_selection(a, b) -> None:
    ca, cb = a.meta["notes"]["corpus"], b.meta["notes"]["corpus"]
    assert {k: ca[k] for k in SELECTION} == {k: cb[k] for k in SELECTION}
    assert ca["n_sampled_out"] > 0 and ca["n_capped"] > 0 and ca["n_too_long"] > 0 and ca["n_empty"] > 0


@pytest.mark.slow
def test_save_to_disk_and_parquet_files_give_the_text_files_run(tmp_path, tiny_models, hf_home):
    src = _write_sources(tmp_path / "src", _sentences())
    opts = _opts(tiny_models["bert"])
    text = open_run(compute_run(RunConfig(**opts, corpus=str(src["text"]), name="text"), tmp_path / "a"))
    saved = open_run(compute_run(RunConfig(**opts, dataset=str(src["saved"]), name="saved"), tmp_path / "b"))
    files = ",".join(map(str, src["parquet"]))
    pq = open_run(compute_run(RunConfig(**opts, dataset=files, name="pq"), tmp_path / "c"))
    for run in (saved, pq):  # the same run but for where its sentences came from
        assert_same_run(
            run,
            text,
            frozenset({"name", "corpus_sha256", "dataset", "split", "dataset_config", "dataset_revision"}),
            one_process=True,
        )
        _same_selection(run, text)
    state = json.loads((src["saved"] / "state.json").read_text())
    content = hashlib.sha256(
        b"".join((src["saved"] / f["filename"]).read_bytes() for f in state["_data_files"])
    ).hexdigest()
    assert saved.meta["dataset"] == dict(
        id=str(src["saved"].resolve()),
        kind="save_to_disk",
        config=None,
        split=None,
        revision=None,
        fingerprint=content,
        text_column="text",
        rows=150,
    )
    assert saved.meta["corpus_sha256"] == content
    sha = hashlib.sha256(b"".join(p.read_bytes() for p in src["parquet"])).hexdigest()
    assert pq.meta["dataset"] == dict(
        id=files, kind="files", config="default", split="train", revision=None, text_column="text", sha256=sha
    )
    assert pq.meta["corpus_sha256"] == sha and pq.meta["corpus_name"] == "part0"
    assert text.meta["dataset"] == {}
    assert "dataset" not in pq.meta["notes"]["corpus"]


def _hub_snapshot(home: Path, repo_id: str, parquet: Path) -> None:
    """The Hub cache as ``snapshot_download(repo_id, repo_type="dataset")`` leaves it: the file in blobs/
    under its hash, a snapshot folder of links named by the commit, refs/main naming the commit."""
    repo = home / "hub" / ("datasets--" + repo_id.replace("/", "--"))
    blob = repo / "blobs" / hashlib.sha256(parquet.read_bytes()).hexdigest()
    blob.parent.mkdir(parents=True)
    shutil.copyfile(parquet, blob)
    link = repo / "snapshots" / COMMIT / "data" / "train-00000-of-00001.parquet"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)


def _datasets_cache(home: Path, repo_id: str, splits: dict) -> None:
    """The ``datasets`` cache as ``load_dataset(repo_id)`` leaves it after a download (Arrow files under
    <ns>___<name>/default/0.0.0/<commit>), prepared by the library's own Parquet builder from local files."""
    from datasets.packaged_modules.parquet.parquet import Parquet

    name = repo_id.split("/")[-1]
    build = home / "build"
    Parquet(
        cache_dir=str(build),
        dataset_name=name,
        hash=COMMIT,
        config_name="default",
        config_id="default",
        data_files={k: [str(v)] for k, v in splits.items()},
    ).download_and_prepare()
    (home / "datasets").mkdir(parents=True, exist_ok=True)
    shutil.move(str(build / name), str(home / "datasets" / repo_id.replace("/", "___")))


def test_hub_ids_resolve_from_the_local_caches_offline(tmp_path, tiny_models, hf_home):
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = _sentences()
    src = _write_sources(tmp_path / "src", lines)
    whole = tmp_path / "whole.parquet"
    pq.write_table(pa.table({"n": list(range(len(lines))), "text": lines}), whole)
    test_split = tmp_path / "test.parquet"
    pq.write_table(pa.table({"text": ["Only this one."]}), test_split)
    _hub_snapshot(hf_home, "someone/snap", whole)
    _datasets_cache(hf_home, "someone/prepared", {"train": whole, "test": test_split})
    cfg = dict(sample_frac=0.7, seed=5, max_sentences=60, max_words=12)
    text = load_sentences(RunConfig(**cfg, corpus=str(src["text"])))
    for repo_id in ("someone/snap", "someone/prepared"):
        got = load_sentences(RunConfig(**cfg, dataset=repo_id))
        assert got.sentences == text.sentences and got.sha256 == COMMIT
        assert got.dataset == dict(
            id=repo_id, kind="hub", config="default", split="train", revision=None, text_column="text", commit=COMMIT
        )
    assert load_sentences(RunConfig(dataset="someone/prepared", split="test")).sentences == ["Only this one."]
    assert load_sentences(RunConfig(dataset="someone/snap", dataset_revision=COMMIT[:10])).n_read == len(lines)
    run = open_run(compute_run(RunConfig(**_opts(tiny_models["bert"]), dataset="someone/prepared"), tmp_path / "r"))
    assert run.meta["dataset"]["commit"] == COMMIT and run.meta["corpus_name"] == "prepared"
    assert run.name == "tiny-bert__prepared"


def _cli(argv: list[str], capsys) -> tuple[int, str]:
    from normvar_core.service import cli

    rc = cli.main(argv)
    return rc, without_log(capsys.readouterr().err)


def test_bad_datasets_get_one_line_and_exit_2_before_the_model(tmp_path, hf_home, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = _write_sources(tmp_path / "src", _sentences())
    _datasets_cache(hf_home, "someone/prepared", {"train": src["parquet"][0]})
    numbers = tmp_path / "numbers.parquet"
    pq.write_table(pa.table({"n": [1, 2, 3], "x": [0.5, 1.5, 2.5]}), numbers)
    nowhere = str(tmp_path / "no-model")  # a model that cannot load: the dataset's error must come first
    cases = [
        (["--dataset", "nobody/nothing"], "not in the local Hugging Face cache"),
        (["--dataset", str(tmp_path / "missing.parquet")], "dataset file not found"),
        (["--dataset", str(src["saved"]), "--split", "test"], "split 'test' not in saved"),
        (["--dataset", "someone/prepared", "--split", "validation"], "split 'validation' not in dataset prepared"),
        (["--dataset", "someone/prepared", "--dataset-config", "nope"], "config 'nope'"),
        (["--dataset", str(src["saved"]), "--text-column", "body"], "column 'body' not in saved"),
        (["--dataset", str(src["saved"]), "--text-column", "id"], "column 'id' of saved is not text"),
        (["--dataset", str(numbers)], "numbers has no text column"),
        (["--dataset", "someone/prepared", "--dataset-revision", "feedbeef"], "revision 'feedbeef'"),
    ]
    capsys.readouterr()
    for args, expected in cases:
        for command in ("compute", "submit", "plan"):
            rc, err = _cli([command, "--model", nowhere, *args, "--data-dir", str(tmp_path / "d")], capsys)
            assert rc == 2, (command, args, err)
            assert err.count("\n") == 1 and err.startswith("normvar: error:") and expected in err, (command, err)
            assert "model" not in err.split("—")[0], err
    assert not (tmp_path / "d" / "runs").exists() or not any((tmp_path / "d" / "runs").iterdir())
    from normvar_core.service.jobs import JobStore

    assert JobStore(tmp_path / "d").list() == []


@pytest.mark.subprocess
def test_the_real_cli_and_its_light_paths(tmp_path, hf_home):
    """A subprocess: the installed entry point refuses a missing split with one line and status 2; building
    the parser and reading a run file never import ``datasets`` (``normvar show`` stays light)."""
    src = _write_sources(tmp_path / "src", ["One.", "Two."])
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "normvar",
            "compute",
            "--dataset",
            str(src["saved"]),
            "--split",
            "x",
            "--data-dir",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    err = without_log(out.stderr)
    assert out.returncode == 2 and err.count("\n") == 1 and "split 'x' not in saved" in err
    probe = (
        "import sys\nfrom normvar_core.service.cli import build_parser\nbuild_parser()\n"
        "import normvar_core.runs.reader\nprint('datasets' in sys.modules, 'torch' in sys.modules)"
    )
    light = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert light.stdout.split() == ["False", "False"], light.stderr


@pytest.mark.slow
def test_run_files_without_the_dataset_column_still_read(tmp_path, tiny_models, hf_home):
    src = _write_sources(tmp_path / "src", _sentences())
    path = compute_run(RunConfig(**_opts(tiny_models["bert"]), dataset=str(src["saved"]), name="r"), tmp_path / "a")
    old = tmp_path / "old.duckdb"
    shutil.copyfile(path, old)
    with duckdb.connect(str(old)) as con:
        con.execute("ALTER TABLE run DROP COLUMN dataset")
    run = open_run(old)
    assert run.record.dataset == {} and run.meta["n_sentences"] == open_run(path).meta["n_sentences"]
    np.testing.assert_array_equal(run.stats().n, open_run(path).stats().n)


def test_shards_read_apart_are_the_whole_dataset_in_order(tmp_path, hf_home):
    """The Ray executor's corpus phases run in one process (``ranges_local.select_locally``) over the shards
    ``dataset_cut`` gives: each share reads only its own rows (save_to_disk: contiguous row blocks; Parquet
    files: contiguous files), and sampling, the cap and the sentence splitter give the one-pass corpus."""
    from ranges_local import select_locally

    from normvar_core.pipeline.corpus.dataset import dataset_cut
    from normvar_core.pipeline.corpus.ranges import parse_range, shares_of

    lines = _sentences()
    src = _write_sources(tmp_path / "src", lines)
    for spec, n_shares in ((str(src["saved"]), 3), (str(tmp_path / "src" / "part*.parquet"), 2)):
        for split_sentences in (False, True):
            cfg = RunConfig(
                dataset=spec, sample_frac=0.6, seed=4, max_sentences=50, max_words=12, split_sentences=split_sentences
            )
            whole = load_sentences(cfg)
            cut = dataset_cut(cfg, 3, put=lambda b: b)
            assert len(cut["ranges"]) == n_shares
            rows = [len(parse_range(RunConfig(dataset=spec), s, "text")[0]) for s in shares_of(cut)]
            assert sum(rows) == len(lines) and min(rows) > 0
            local = select_locally(cfg, cut)
            assert local.sentences == whole.sentences and whole.n_capped > 0
            assert [getattr(local, k) for k in SELECTION] == [getattr(whole, k) for k in SELECTION]
            assert local.dataset == whole.dataset and local.sha256 == whole.sha256


@pytest.mark.slow
def test_ray_actors_read_their_own_shards(tmp_path, tiny_models, hf_home, monkeypatch):
    import tempfile

    import ray

    src = _write_sources(tmp_path / "src", _sentences())
    opts = dict(_opts(tiny_models["bert"]), dataset=str(src["saved"]), name="r")
    one = open_run(compute_run(RunConfig(**opts), tmp_path / "a"))
    ray_tmp = tempfile.mkdtemp(prefix="nvray", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", ray_tmp)
    try:
        sharded = open_run(compute_run(RunConfig(**opts, executor="ray", workers=2), tmp_path / "b"))
    finally:
        ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert len(sharded.meta["notes"]["read_cpu_s"]) == 2  # two shards, each read and tokenized by its actor
    assert sharded.meta["dataset"] == one.meta["dataset"]
    _same_selection(sharded, one)
    assert_same_run(sharded, one)


def test_the_new_run_form_queues_a_dataset_run_and_refuses_a_bad_split(tmp_path, hf_home, monkeypatch):
    """The New-run page's Dataset fields (generated from RunConfig) reach the queued job; a bad split is
    shown as the one-line error and nothing is queued."""
    from streamlit.testing.v1 import AppTest

    from normvar_core.service.jobs import JobStore

    src = _write_sources(tmp_path / "src", _sentences())
    data = tmp_path / "data"
    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=90)
    at.run()
    at.switch_page("views/new_run.py").run()
    at.text_input(key="w_cfg_dataset").set_value(str(src["saved"]))
    at.text_input(key="w_cfg_split").set_value("validation")
    at.button(key="w_submit").click().run()
    assert at.error and "split 'validation' not in saved" in at.error[0].value
    assert JobStore(data).list() == []
    at.text_input(key="w_cfg_split").set_value("")
    at.button(key="w_submit").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    jobs = JobStore(data).list()
    assert len(jobs) == 1 and jobs[0].config["dataset"] == str(src["saved"]) and jobs[0].name == "minilm__saved"


def test_a_saved_dataset_dict_reads_the_split_asked_for(tmp_path, hf_home):
    from normvar_core.pipeline.corpus.dataset import datasets_offline

    datasets = datasets_offline()
    train, test = ["One here.", "Two here."], ["Three, from the test split.", None, "Four."]
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_dict({"text": train}), "test": datasets.Dataset.from_dict({"text": test})}
    ).save_to_disk(str(tmp_path / "dd"))
    got = load_sentences(RunConfig(dataset=str(tmp_path / "dd"), split="test"))
    assert got.sentences == ["Three, from the test split.", "Four."] and got.n_empty == 1 and got.n_read == 3
    state = json.loads((tmp_path / "dd" / "test" / "state.json").read_text())
    content = hashlib.sha256(
        b"".join((tmp_path / "dd" / "test" / f["filename"]).read_bytes() for f in state["_data_files"])
    ).hexdigest()
    assert got.dataset["split"] == "test" and got.sha256 == got.dataset["fingerprint"] == content
    assert load_sentences(RunConfig(dataset=str(tmp_path / "dd"))).sentences == train  # default: train
