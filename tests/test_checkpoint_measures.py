"""A checkpoint is checked measure by measure before the pass: every measure the run asks for must be in it (or have
been left out for memory by the checkpoint's own run, which it records), with its planned keys and shapes. A real
checkpoint of a run with every default measure, with any one measure's arrays removed (each measure the registry
says the run asks for), is refused in one line that names the measure and ``--fresh``, before the first batch, and
is left byte for byte; nothing is published. One whose run recorded the measure as left out for memory resumes
without it, and says why."""

from __future__ import annotations

import json

import numpy as np
import pytest
from stopped_run import repetitive_corpus, stopped_checkpoint

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError
from normvar_core.pipeline.execute.local import compute_run
from normvar_core.pipeline.measures import MEASURES
from normvar_core.runs.reader import open_run

pytestmark = pytest.mark.slow


# every measure the run below asks for, from the registry (the fixture checks each has its state in the checkpoint)
ASKED = [c.name for c in MEASURES if c.asked(RunConfig(model="tiny", occurrences=0))]


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, tiny_models):
    """(config, a real checkpoint of 3 of its batches) of a run with every default measure."""
    root = tmp_path_factory.mktemp("ckpt")
    corpus = repetitive_corpus(root / "c.txt")
    cfg = RunConfig(
        model=str(tiny_models["bert"]), corpus=str(corpus), batch_size=8, id_sample=300, occurrences=0, name="r"
    )
    ckpt, meta = stopped_checkpoint(cfg, root)
    with np.load(ckpt, allow_pickle=False) as z:
        names = {k.partition("__")[0] for k in z.files if k != "meta_json"}
    assert meta["dropped"] == [] and set(ASKED) <= names, (ASKED, names)
    return cfg, ckpt


def _without(src, dst, measure: str, meta: dict | None = None) -> None:
    with np.load(src, allow_pickle=False) as z:
        kept = {k: z[k] for k in z.files if not k.startswith(measure + "__")}
    assert len(kept) < len(np.load(src).files)
    if meta:
        m = json.loads(str(kept["meta_json"]))
        m.update(meta)
        kept["meta_json"] = np.array(json.dumps(m, sort_keys=True))
    with open(dst, "wb") as fh:
        np.savez(fh, **kept)


@pytest.mark.parametrize("measure", ASKED)
def test_a_checkpoint_without_a_measure_the_run_asks_for_is_refused_and_kept(stopped, tmp_path, measure):
    cfg, real = stopped
    ckpt = tmp_path / "r.ckpt"
    _without(real, ckpt, measure)
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
    assert f"no state of the measure {measure}, which this run asks for" in text and "(memory)" not in text, text
    assert not any(batches), batches  # before the first batch of the pass
    assert ckpt.read_bytes() == before and not list((tmp_path / "d" / "runs").glob("*.duckdb"))


def test_a_measure_its_own_run_left_out_for_memory_is_left_out_again(stopped, tmp_path):
    cfg, real = stopped
    ckpt = tmp_path / "r.ckpt"
    _without(real, ckpt, "layer_linearity", meta={"dropped": ["layer_linearity"]})
    path = compute_run(cfg, tmp_path / "d", checkpoint=ckpt)
    run = open_run(path)
    assert "layer_linearity" not in run.measures and "neighbourhoods" in run.measures, run.measures
    assert not ckpt.exists()  # published: its checkpoint is done with
