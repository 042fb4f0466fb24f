"""A cancel during the finalize means it, through the real pipeline (a tiny model): a cancel that arrives while
the measures' results are built stops the finalize with ``CancelledError`` and publishes nothing (no run file,
no temp file left; every batch kept in the checkpoint); once the run file is past the point of no return
(``before_publish``), a cancel no longer stops it and the run is published complete."""

from __future__ import annotations

import pytest

from normvar_core.config import RunConfig
from normvar_core.errors import CancelledError
from normvar_core.pipeline.execute import checkpoint as ckpt
from normvar_core.pipeline.execute.local import compute_run
from normvar_core.runs.reader import open_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cfg(tmp_path_factory, tiny_models) -> RunConfig:
    corpus = tmp_path_factory.mktemp("c") / "c.txt"
    corpus.write_text("\n".join(f"the cat {i % 9} sat on mat {i % 13} with a dog {i % 5}" for i in range(60)) + "\n")
    return RunConfig(model=str(tiny_models["bert"]), corpus=str(corpus), batch_size=8, id_sample=200, name="r")


def test_a_cancel_during_the_finalize_publishes_nothing(cfg, tmp_path):
    stages: list[str] = []
    data, point = tmp_path / "d", tmp_path / "r.ckpt"
    with pytest.raises(CancelledError, match="cancelled during the finalize; nothing was published"):
        compute_run(
            cfg,
            data,
            checkpoint=point,
            progress=lambda p: stages.append(p.stage),
            should_cancel=lambda: "finalize" in stages,  # asked once the finalize has begun
        )
    assert "finalize" in stages and "done" not in stages
    assert list((data / "runs").iterdir()) == []  # no run file, no temp file
    resumed = ckpt.describe(point)
    assert resumed is not None and resumed.startswith("8 of 8 batches"), resumed  # every batch kept


def test_a_cancel_after_the_point_of_no_return_comes_too_late(cfg, tmp_path):
    asked = [False]

    def point_of_no_return() -> bool:
        asked[0] = True  # a cancel arrives just after the publish was decided
        return True

    path = compute_run(cfg, tmp_path / "d", should_cancel=lambda: asked[0], before_publish=point_of_no_return)
    run = open_run(path)
    assert asked[0] and run.record.n_sentences == 60 and "geometry" in run.measures
    with pytest.raises(CancelledError):  # a publish refused at the point of no return: nothing published
        compute_run(cfg, tmp_path / "e", before_publish=lambda: False)
    assert list((tmp_path / "e" / "runs").iterdir()) == []
