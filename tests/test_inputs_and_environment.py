"""Inputs and environment through the real CLI: ``submit`` refuses what ``compute`` refuses, in compute's own
words, and queues nothing; a value argparse refuses is one line without the usage; bad environment values
(``NORMVAR_PROGRESS_EVERY_S``, ``NORMVAR_PORT``) are one line each and never stop another command; a closed
stderr (``2>&-``) changes no outcome; ``--dataset`` names a FIFO, a folder named like a file and a link to a text
file rightly (the link's target, a canary file, never named and left unchanged)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_bad, run_cli

from normvar_core.service.jobs import JobStore

ROOT = Path(__file__).resolve().parent.parent


def _queued(data: Path) -> list:
    return JobStore(data).list(limit=None) if (data / "queue" / "jobs.sqlite").exists() else []


def test_submit_refuses_what_compute_refuses_in_its_words(capsys, tmp_path, tiny_models, corpus40):
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    cases = [
        (["--model", tiny_models["bert"], "--layers", "99"], "do not exist"),
        (["--model", empty], "holds no config.json"),
        (["--model", tiny_models["bert"], "--max-length", "99999999999"], "exceeds the model's limit"),
        (["--model", tiny_models["bert"], "--sample-frac", "1e-300"], "--sample-frac 1e-300 keeps no sentence"),
    ]
    for argv, named in cases:
        argv = [*argv, "--corpus", corpus40, "--name", "r"]
        said = assert_bad(capsys, tmp_path / "c", "compute", *argv, match=named)
        assert assert_bad(capsys, tmp_path / "s", "submit", *argv, match=named) == said, argv
        assert _queued(tmp_path / "s") == [], argv
    code, out, _ = run_cli(
        capsys,
        "submit",
        "--model",
        tiny_models["bert"],
        "--layers",
        "0,1",
        "--corpus",
        corpus40,
        "--sample-frac",
        "0.5",
        "--name",
        "fine",
        "--data-dir",
        tmp_path / "s",
    )
    assert code == 0 and [j.id for j in _queued(tmp_path / "s")] == [out.strip()]  # the checks refuse no good run


def test_a_value_of_the_wrong_type_is_one_line_without_the_usage(capsys, tmp_path):
    for argv, named in (
        (["compute", "--batch-size", "7x"], "--batch-size 7x is not a whole number from 1 to "),
        (["show", "--n-min", "ten"], "--n-min ten is not a number from 0 to "),
        (["up", "--port", "http"], "--port http is not a whole number from 0 to 65535 (0: any free port)"),
        (["submit", "--unit", "sentence"], "argument --unit: invalid choice"),
        (["compute", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    ):
        line = assert_bad(capsys, tmp_path, *argv, match=named)
        assert "usage:" not in line, line


@pytest.mark.parametrize("value", ["abc", "", "0x10", "-1", "nan"])
def test_a_bad_progress_interval_is_one_line_before_any_work(
    capsys, tmp_path, monkeypatch, tiny_models, corpus40, value
):
    monkeypatch.setenv("NORMVAR_PROGRESS_EVERY_S", value)
    assert_bad(
        capsys,
        tmp_path,
        "compute",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus40,
        match=f"NORMVAR_PROGRESS_EVERY_S={value} is not a number from 0 to ",
    )


@pytest.mark.parametrize("value", ["abc", "", "8501x"])
def test_a_bad_port_variable_stops_only_the_commands_that_serve(capsys, tmp_path, monkeypatch, value):
    monkeypatch.setenv("NORMVAR_PORT", value)
    for argv in (["--help"], ["up", "--help"], ["dashboard", "--help"], ["show", "--help"]):
        with pytest.raises(SystemExit) as done:  # argparse's help exits 0
            run_cli(capsys, *argv)
        assert done.value.code == 0, argv
        assert "usage: normvar" in capsys.readouterr().out
    code, out, _ = run_cli(capsys, "show", "--data-dir", tmp_path)
    assert code == 0 and "no runs yet" in out
    for command in ("up", "dashboard"):
        assert_bad(
            capsys,
            tmp_path,
            command,
            "--no-default-run" if command == "up" else "--read-only",
            match=f"NORMVAR_PORT={value} is not a whole number from 0 to 65535",
        )


def closed_stderr(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """``normvar ARGV 2>&-``: a real process started with descriptor 2 closed."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    return subprocess.run(
        ["sh", "-c", 'exec "$@" 2>&-', "sh", sys.executable, "-m", "normvar_core.service.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )


@pytest.mark.subprocess
def test_a_closed_stderr_changes_no_outcome(tmp_path, tiny_models, corpus40):
    data = tmp_path / "d"
    done = closed_stderr(
        "compute",
        "--model",
        str(tiny_models["bert"]),
        "--corpus",
        str(corpus40),
        "--name",
        "r",
        "--data-dir",
        str(data),
        cwd=tmp_path,
    )
    assert done.returncode == 0 and done.stderr == "", done
    assert done.stdout.strip() == str(data / "runs" / "r.duckdb") and (data / "runs" / "r.duckdb").is_file()
    shown = closed_stderr("show", "--data-dir", str(data), cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.startswith("r") or " r " in shown.stdout, shown
    queued = closed_stderr(
        "submit",
        "--model",
        str(tiny_models["bert"]),
        "--corpus",
        str(corpus40),
        "--name",
        "q",
        "--data-dir",
        str(data),
        cwd=tmp_path,
    )
    assert queued.returncode == 0, queued
    jobs = closed_stderr("jobs", "--data-dir", str(data), cwd=tmp_path)
    assert jobs.returncode == 0 and queued.stdout.strip() in jobs.stdout, jobs
    bad = closed_stderr("show", "no-such-run", "--data-dir", str(data), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stdout == ""  # a refusal still says so in its status


def test_dataset_paths_that_are_no_data_file_are_named_rightly(capsys, tmp_path, tiny_models):
    canary = tmp_path / "canary.txt"
    canary.write_text("a plain text file\nof two lines\n")
    (tmp_path / "link.json").symlink_to(canary)
    os.mkfifo(tmp_path / "pipe.json")
    (tmp_path / "x.json").mkdir()
    data = tmp_path / "d"
    for command in ("compute", "submit"):
        for name, named in (
            ("pipe.json", "is a FIFO (named pipe), not a regular file"),
            ("x.json", "holds no dataset"),
            ("link.json", "cannot open dataset"),
        ):
            line = assert_bad(
                capsys, data, command, "--model", tiny_models["bert"], "--dataset", tmp_path / name, match=named
            )
            assert "not found" not in line and "canary" not in line, line
            assert str(tmp_path / name) in line, line
    assert canary.read_text() == "a plain text file\nof two lines\n" and _queued(data) == []
