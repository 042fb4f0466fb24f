"""What ``normvar compute`` writes to a log (stderr a file: nohup, SLURM, CI), from a real child process: its
first line at once (what was planned and where it writes, before torch is imported and the model loads), a line
as each phase begins (a forward line on every run), and "resuming from N of M batches" when it resumes. How soon
the first line comes is a time, measured in docs/benchmarks.md ("The first log line"); here its order is checked:
before the child imports torch (``python -X importtime`` writes each import to the same log, in order)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from paused_compute import interrupt_at_pause, paused_compute

pytestmark = pytest.mark.subprocess


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    c = tmp_path_factory.mktemp("log") / "c.txt"
    c.write_text("\n".join(f"the cat {i % 9} sat on mat {i % 13} with a dog {i % 5}" for i in range(120)) + "\n")
    return c


def _argv(model, corpus, data) -> list[str]:
    return [
        "compute",
        "--model",
        str(model),
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
        "--data-dir",
        str(data),
    ]


def _lines(log) -> list[str]:
    """The log's lines, without ``-X importtime``'s."""
    return [x for x in log.read_text().splitlines() if x.strip() and not x.startswith("import time:")]


def test_a_log_starts_before_torch_loads_and_names_every_phase(tiny_models, corpus, tmp_path):
    """The start line before torch is imported, naming the model, the corpus, the batches, the run file and the
    checkpoint; then one line per phase in order (the interval is long, so no line repeats a phase), a forward
    line among them; no carriage return."""
    data, log = tmp_path / "data", tmp_path / "log"
    env = dict(
        os.environ,
        PYTHONPATH=os.getcwd(),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        NORMVAR_PROGRESS_EVERY_S="1000",
    )
    with open(log, "wb") as fh:
        p = subprocess.Popen(
            [
                sys.executable,
                "-X",
                "importtime",
                "-m",
                "normvar_core.service.cli",
                *_argv(tiny_models["bert"], corpus, data),
            ],
            stdout=subprocess.PIPE,
            stderr=fh,
            env=env,
        )
        out, _ = p.communicate(timeout=600)
    assert p.returncode == 0, log.read_text()
    everything = log.read_text().splitlines()
    torch_at = next(
        i for i, x in enumerate(everything) if x.startswith("import time:") and x.split("|")[-1].strip() == "torch"
    )
    assert everything.index(_lines(log)[0]) < torch_at, everything[: torch_at + 1][-5:]
    lines = _lines(log)
    assert lines[0] == (
        f"normvar: start · {tiny_models['bert']} on {corpus} · batches: 8 sentences · device auto · "
        f"writes {data / 'runs' / 'r.duckdb'} · checkpoint {data / 'checkpoints' / 'r.ckpt'}"
    )
    assert out.decode().strip() == str(data / "runs" / "r.duckdb")
    phases = [x.split()[1] for x in lines[1:]]
    assert [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p] == phases, lines  # one line a phase
    assert [p for p in phases if p != "plan"] == ["model", "forward", "finalize", "write"], lines
    assert phases[0] == "plan" and "\r" not in log.read_text()
    assert not any("resuming" in x for x in lines)


def test_a_resumed_run_says_from_which_batch(tiny_models, corpus, tmp_path):
    """SIGTERM in the third forward pass keeps 2 of the 15 batches; the same command's log then says "resuming
    from 2 of 15 batches" on its forward line."""
    data, marker, go, log = tmp_path / "data", tmp_path / "marker", tmp_path / "go", tmp_path / "log"
    argv = _argv(tiny_models["bert"], corpus, data)
    assert interrupt_at_pause(paused_compute(argv, "forward", marker, log, go=go), marker, go, log) == 143
    assert "checkpoint kept" in _lines(log)[-1] and "2 of 15 batches" in _lines(log)[-1], _lines(log)
    again = tmp_path / "log2"
    p = paused_compute(argv, None, tmp_path / "unused", again)
    assert p.wait(timeout=600) == 0, again.read_text()
    forward = [x for x in _lines(again) if x.split()[1] == "forward"]
    assert forward and forward[0].startswith("normvar: forward · resuming from 2 of 15 batches · "), _lines(again)


def test_an_input_refused_before_the_model_gets_its_one_line_and_no_start_line(capsys, tiny_models, tmp_path):
    """A corpus that is not there is refused before the start line: stderr is the one error line."""
    from normvar_core.service import cli

    code = cli.main(_argv(tiny_models["bert"], tmp_path / "missing.txt", tmp_path / "data"))
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("normvar: error:"), err
    assert "missing.txt" in err and not (tmp_path / "data" / "runs").exists()


def test_compute_checks_its_inputs_once(capsys, tiny_models, corpus, tmp_path, monkeypatch):
    """The checks before the start line are the run's: the inputs are checked once in a whole compute (counted by
    one check every ``check_inputs`` makes, whoever holds a reference to it), and the run is published where the
    start line said."""
    from normvar_core.pipeline.execute import preflight
    from normvar_core.service import cli

    calls = []
    real = preflight.check_offload_folder
    monkeypatch.setattr(preflight, "check_offload_folder", lambda *a: calls.append(a) or real(*a))
    data = tmp_path / "data"
    assert cli.main(_argv(tiny_models["bert"], corpus, data)) == 0
    out, err = capsys.readouterr()
    assert len(calls) == 1, calls
    assert out.strip() == str(data / "runs" / "r.duckdb") and f"writes {data / 'runs' / 'r.duckdb'}" in err
