"""The Ray executor's corpus from byte ranges (``execute.ray_corpus``), on a private local Ray (2 CPU
actors, loopback only): a JSONL corpus with sampling and ``--max-sentences`` is deleted as soon as the
driver has cut it — before any actor parses its range — and the sharded run equals the single-process
run (every table, ``same_run.assert_same_run``), with the same sentences and corpus counts."""

from __future__ import annotations

import shutil

import pytest
from corpus_files import corpus_lines, write_corpus
from ray_driver import not_loopback, ray_listeners
from same_run import assert_same_run

from normvar_core.config import RunConfig
from normvar_core.pipeline.execute import on_ray
from normvar_core.pipeline.execute.local import compute_run
from normvar_core.runs.reader import open_run

pytestmark = pytest.mark.subprocess


@pytest.mark.slow
def test_actors_parse_select_and_tokenize_their_byte_ranges(tmp_path, tiny_models, monkeypatch):
    import tempfile

    import ray

    opts = dict(
        model=str(tiny_models["bert"]),
        batch_size=4,
        samples_per_token=5,
        id_sample=64,
        sample_frac=0.7,
        seed=5,
        max_sentences=45,
        max_words=12,
        text_column="text",
    )
    src = write_corpus(tmp_path / "src.jsonl", ".jsonl", corpus_lines(120, seed=2), newline="\r\n", final_newline=False)
    one = open_run(compute_run(RunConfig(**opts, corpus=str(src), name="one"), tmp_path / "a"))
    corpus = tmp_path / "vanishing.jsonl"
    corpus.write_bytes(src.read_bytes())
    listening, cut_seen = [], []

    def progress(p):
        if p.detail == on_ray.CUT_DETAIL:  # the driver has read the file: the actors never can
            cut_seen.append(corpus.exists())
            corpus.unlink()
        if p.stage == "compute" and not listening:
            listening.extend(ray_listeners())

    ray_tmp = tempfile.mkdtemp(prefix="nvray", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", ray_tmp)
    try:
        cfg = RunConfig(**opts, corpus=str(corpus), name="one", executor="ray", workers=2)
        sharded = open_run(compute_run(cfg, tmp_path / "b", progress=progress))
    finally:
        ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert cut_seen == [True] and not corpus.exists()
    assert listening and not not_loopback(listening), listening
    notes, local = sharded.meta["notes"], one.meta["notes"]
    assert len(notes["tokenize_cpu_s"]) == 2  # both actors tokenized their range
    assert all(r > t for r, t in zip(notes["read_cpu_s"], notes["tokenize_cpu_s"], strict=True))  # + parse, select
    assert {k: v for k, v in notes["corpus"].items() if k != "path"} == {
        k: v for k, v in local["corpus"].items() if k != "path"
    }  # another file name, the same bytes
    assert local["corpus"]["n_capped"] > 0 and local["corpus"]["n_sampled_out"] > 0
    assert sharded.meta["corpus_sha256"] == one.meta["corpus_sha256"]
    assert_same_run(sharded, one)
