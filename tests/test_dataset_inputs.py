"""A ``--dataset`` that holds nothing to measure is refused in one line before any model loads, by ``compute``,
``plan`` and ``submit`` alike: a ``save_to_disk`` dataset with no rows, a folder holding only a README. A
``save_to_disk`` dataset's fingerprint is the sha256 of its Arrow files (by hashlib here), so rewritten data gets
a new one even though ``state.json`` is unchanged; ``normvar show`` prints it."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from cli_helpers import run_cli

from normvar_core.config import RunConfig
from normvar_core.pipeline.corpus.dataset import datasets_offline
from normvar_core.pipeline.corpus.read import load_sentences


def _refused(capsys, *argv, words: str) -> None:
    code, out, err = run_cli(capsys, *argv)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and words in lines[0], (code, out, err)


@pytest.mark.parametrize("command", ["compute", "plan", "submit"])
def test_an_empty_dataset_and_a_folder_that_is_no_dataset_are_refused(capsys, tmp_path, tiny_models, hf_home, command):
    datasets_offline().Dataset.from_dict({"text": []}).save_to_disk(str(tmp_path / "empty"))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("Just a readme. Not a dataset.\n")
    for folder, words in (("empty", "has no rows"), ("notes", "holds no dataset")):
        _refused(
            capsys,
            command,
            "--model",
            tiny_models["bert"],
            "--dataset",
            tmp_path / folder,
            "--data-dir",
            tmp_path / "d",
            words=words,
        )
    assert not (tmp_path / "d" / "runs").exists() or not list((tmp_path / "d" / "runs").iterdir())


def _arrow_sha(folder) -> str:
    state = json.loads((folder / "state.json").read_text())
    return hashlib.sha256(b"".join((folder / f["filename"]).read_bytes() for f in state["_data_files"])).hexdigest()


def test_a_save_to_disk_fingerprint_is_its_data_and_show_prints_it(capsys, tmp_path, tiny_models, hf_home):
    datasets = datasets_offline()
    a, b = tmp_path / "a", tmp_path / "b"
    datasets.Dataset.from_dict({"text": ["The first text.", "A second one."]}).save_to_disk(str(a))
    datasets.Dataset.from_dict({"text": ["Other words here.", "And more of them."]}).save_to_disk(str(b))
    before = load_sentences(RunConfig(dataset=str(a)))
    assert before.sha256 == before.dataset["fingerprint"] == _arrow_sha(a)
    state = (a / "state.json").read_text()
    for f in json.loads(state)["_data_files"]:  # the Arrow data rewritten, state.json kept as it was
        shutil.copyfile(b / f["filename"], a / f["filename"])
    (a / "state.json").write_text(state)
    after = load_sentences(RunConfig(dataset=str(a)))
    assert after.sentences == ["Other words here.", "And more of them."]
    assert after.sha256 == _arrow_sha(a) != before.sha256

    data = tmp_path / "data"
    code, _, err = run_cli(
        capsys,
        "compute",
        "--model",
        tiny_models["bert"],
        "--dataset",
        a,
        "--name",
        "ds",
        "--no-geometry",
        "--quiet",
        "--data-dir",
        data,
    )
    assert code == 0, err
    code, out, err = run_cli(capsys, "show", "ds", "--data-dir", data)
    assert code == 0, err
    assert f"fingerprint (sha256) {after.sha256}" in out and "save_to_disk" in out
