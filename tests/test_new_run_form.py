"""The New-run form refuses what the worker would refuse, before any job is queued:
a PNG, PNG bytes named .txt, text that is not UTF-8, binary bytes; each refusal names the user's file
(never its stored sha256 name) in the form's own words (its labels, not the CLI's flags). The form does not
submit on Enter (its proto says so here; tests/test_new_run_browser.py presses Enter in a real browser)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from upload_files import STORY, png_bytes

from normvar_core.service.jobs import JobStore

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture
def form(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("NORMVAR_DATA", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/new_run.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def errors(at) -> list[str]:
    assert not at.exception, [e.value for e in at.exception]
    return [e.value for e in at.error]


REFUSED = [
    ("holiday.png", png_bytes(), "is not a corpus file the form reads"),
    ("holiday.txt", png_bytes(), "looks binary"),  # PNG bytes under a .txt name
    ("notes_latin1.txt", "Café au lait, déjà vu.\n".encode("latin-1"), "is not UTF-8"),
    ("random.csv", bytes(range(256)) * 4, "looks binary"),
    ("empty.txt", b"", "is empty"),
]


@pytest.mark.parametrize("button", ["w_submit", "w_plan"])
@pytest.mark.parametrize(("name", "data", "why"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_refused_upload_blocks_the_form_and_names_the_file(form, tmp_path, name, data, why, button):
    form.file_uploader(key="w_upload").set_value((name, data, "application/octet-stream"))
    form.button(key=button).click().run()
    (err,) = errors(form)
    assert why in err
    assert f"“{name.replace('_', chr(92) + '_')}”" in err, err  # the user's file, by its own name
    assert not re.search(r"[0-9a-f]{64}", err), err  # never its stored hash
    assert "--" not in err and "normvar " not in err, err  # no CLI wording
    assert JobStore(tmp_path).list() == []  # nothing queued, no fallback to the novels
    assert not form.success


def test_not_utf8_and_binary_fixes_speak_of_the_upload(form):
    form.file_uploader(key="w_upload").set_value(("notes.txt", "naïve\n".encode("latin-1"), "text/plain"))
    form.button(key="w_submit").click().run()
    (err,) = errors(form)
    assert "“notes.txt” is not UTF-8" in err and "save it as UTF-8" in err and "iconv" not in err


def test_a_name_taken_is_refused_in_the_forms_words(form, tmp_path):
    form.file_uploader(key="w_upload").set_value(("story.txt", STORY, "text/plain"))
    form.button(key="w_submit").click().run()
    assert errors(form) == []
    (job,) = JobStore(tmp_path).list()
    assert job.name == "minilm__story" and job.state == "queued"
    form.button(key="w_submit").click().run()
    (err,) = errors(form)
    assert f"already queued as job {job.id}" in err
    assert "“Replace a run of that name”" in err and "“Run name”" in err and "--" not in err, err
    assert len(JobStore(tmp_path).list()) == 1


def test_enter_does_not_submit(form):
    (f,) = form.get("form")
    assert f.proto.form.enter_to_submit is False  # the real Enter key: tests/test_dashboard_share_browser.py


def test_a_long_file_name_keeps_its_extension(form, tmp_path):
    long = "field notes " * 10 + ".txt"  # 124 characters
    form.file_uploader(key="w_upload").set_value((long, b"\x00" * 10, "text/plain"))
    form.button(key="w_submit").click().run()
    (err,) = errors(form)
    assert f"“{long[:60]}…{long[-19:]}” looks binary" in err  # shortened for the message, not refused for it
    form.file_uploader(key="w_upload").set_value((long, STORY, "text/plain"))
    form.button(key="w_submit").click().run()
    assert errors(form) == [] and len(JobStore(tmp_path).list()) == 1


def test_the_upload_limit_is_stated_once(form, monkeypatch):
    """The drop zone says "Limit N MB per file" (its max_upload_size); the label does not repeat it."""
    import math

    from normvar_core.service.jobs import max_upload_bytes

    up = form.file_uploader(key="w_upload")
    assert "MB" not in up.label
    assert up.proto.max_upload_size_mb == max(1, math.floor(max_upload_bytes() / 2**20))


def test_an_upload_run_is_named_as_the_manual_says(form, tmp_path):
    """docs/dashboard.md's example of an upload's names (a file → its corpus label and its run's name) is what the
    form does: that file uploaded and submitted without a name queues a run of the documented name on a corpus of
    the documented label, the name ``corpus_store.upload_run_name`` gives."""
    from normvar_core.corpus_formats import corpus_label
    from normvar_core.service.corpus_store import upload_run_name

    manual = (Path(__file__).resolve().parent.parent / "docs" / "dashboard.md").read_text()
    example = r"\*\*Uploads\*\* are named after their file \(`([^`]+)` → corpus `([^`]+)`, run `([^`]+)`\)"
    said = re.search(example, manual)
    assert said, "docs/dashboard.md: the Uploads example"
    file, corpus, run = said.groups()
    form.file_uploader(key="w_upload").set_value((file, STORY, "text/plain"))
    form.button(key="w_submit").click().run()
    assert errors(form) == []
    (job,) = JobStore(tmp_path).list()
    assert job.name == run and job.config["model"] == run.split("__")[0]
    assert corpus_label(job.config["corpus"]) == corpus
    assert upload_run_name(job.config["model"], job.config["corpus"]) == run
