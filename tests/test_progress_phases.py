"""Progress that tells the truth: the one-line text of every phase (CLI, New-run and Runs pages share
``jobs.progress_text``) and a worker task's own phases with an ETA, through the real job store."""

from __future__ import annotations

import dataclasses
import json

from normvar_core.pipeline.execute.progress import Progress
from normvar_core.service import jobs
from normvar_core.service.worker import _Reporter, _task_progress


def test_progress_text_by_phase():
    def text(p):
        return jobs.progress_text(dataclasses.asdict(p))

    assert (
        text(Progress("tokenize", done=2, total=3, unit="steps", detail="tokenize and count"))
        == "plan · tokenize and count · 2/3 steps"
    )
    assert (
        text(Progress("compute", 1200, 3000, 50000, 5300.0, 42.0))
        == "forward · 1,200/3,000 sentences · 5,300 emb/s · ETA 42 s"
    )
    assert (
        text(Progress("finalize", 600, 600, eta_s=125.0, done=2, total=5, unit="measures", detail="spectra"))
        == "finalize · spectra · 2/5 measures · ETA 2:05"
    )
    assert (
        text(Progress("write", done=3, total=17, unit="tables", detail="samples"))
        == "write · samples · 3/17 tables · ETA –"
    )
    # the percent covers the whole run: a run that wrote its last batch is not "100 %" yet
    assert Progress("compute", 600, 600).percent == 90.0 and Progress("write", done=8, total=16).percent == 97.5
    assert (
        jobs.progress_text({"stage": "compute", "sentences_done": 3, "sentences_total": 10})
        == "compute · 3/10 sentences · 0 emb/s · ETA –"
    )


def test_worker_task_reports_its_own_phases(tmp_path):
    """A task's progress callback (``worker._task_progress``) through a real job store: its phase, counts
    and ETA, and a text without "sentences" or "emb/s"."""
    from normvar_core.config import RunConfig

    store = jobs.JobStore(tmp_path)
    job_id = store.submit(RunConfig(model="minilm", name="x"))
    rep = _Reporter(store, job_id)
    rep.start()
    progress = _task_progress(rep, "null")
    progress("geometry", 0, 7, "layers", "spectra and TwoNN")
    progress("geometry", 3, 7, "layers", "spectra and TwoNN")
    rep.stop()
    p = store.get(job_id).progress
    assert p["phase"] == "geometry" and p["done"] == 3 and p["total"] == 7 and p["eta_s"] is not None
    assert p["percent"] == round(100 * 3 / 7, 1)
    text = jobs.progress_text(p, "null")
    assert text.startswith("null · geometry · spectra and TwoNN · 3/7 layers · ETA ")
    assert "sentences" not in text and "emb/s" not in text and json.loads(json.dumps(p)) == p
