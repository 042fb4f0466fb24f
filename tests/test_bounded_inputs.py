"""Sizes, counts and input files are read once, with bounds, and refused in one line (exit 2) before any model
loads: ``plan --devices`` counts at most what a machine can have and finite sizes in ASCII digits;
``--max-memory`` sizes finite, whole bytes; device names in ASCII digits; no device twice; a FIFO as
``--corpus`` or ``--device-map`` refused before it is read, in ``compute``, ``plan`` and ``submit`` alike; a map
naming a module the model lacks, or a GPU the machine lacks, refused by all three as compute refuses it."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from cli_helpers import run_cli

from normvar_core.device_options import parse_devices, parse_max_memory


@pytest.fixture
def no_hang():
    """A read that blocks (a FIFO nobody writes) fails the test after 20 s instead of hanging the suite."""

    def expire(*_):
        raise TimeoutError("blocked reading a FIFO")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _refused(capsys, *argv, words: str) -> str:
    t0 = time.monotonic()
    code, out, err = run_cli(capsys, *argv)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and words.lower() in lines[0].lower(), (code, out, err)
    assert time.monotonic() - t0 < 15  # at once: no model load, no growing plan
    return lines[0]


@pytest.mark.parametrize(
    "devices, words",
    [
        ("1000000000000000x80", "cannot read"),
        ("999999x80", "more than the 1024 GPUs"),
        ("inf", "cannot read the size"),
        ("1e400", "cannot read the size"),
        ("²x80", "cannot read"),
        ("nan", "cannot read the size"),
        ("4x80,cpu=1,cpu=2", "twice"),
        ("2x80,1=40", "twice"),
        ("2x" + "9" * 400, "cannot read the size"),
    ],
)
def test_plan_devices_bounded(capsys, tmp_path, tiny_models, corpus40, devices, words):
    _refused(
        capsys,
        "plan",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus40,
        "--devices",
        devices,
        "--data-dir",
        tmp_path,
        words=words,
    )


@pytest.mark.parametrize(
    "memory, words",
    [
        (f"cpu={'9' * 400}GiB", "cannot read the size"),
        ("cpu=0.1B", "whole number of bytes"),
        ("cpu=infGiB", "cannot read the size"),
        ("cpu=1e400", "cannot read the size"),
        ("٣=1GiB", "unknown device"),
        ("cpu=2000000000TiB", "more than any device"),
    ],
)
@pytest.mark.parametrize("command", ["compute", "plan", "submit"])
def test_max_memory_bounded(capsys, tmp_path, tiny_models, corpus40, memory, words, command):
    _refused(
        capsys,
        command,
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus40,
        "--device-map",
        "auto",
        "--max-memory",
        memory,
        "--data-dir",
        tmp_path,
        words=words,
    )


def test_sizes_read_exactly():
    assert parse_max_memory("0=0.5GiB,cpu=1.5GB,1=3") == {0: 2**29, "cpu": 1_500_000_000, 1: 3}
    assert parse_devices("2x0.5,cpu=256") == {0: 2**29, 1: 2**29, "cpu": 256 * 2**30}  # GiB
    assert parse_devices("1024x1")[1023] == 2**30


@pytest.mark.parametrize("command", ["compute", "plan", "submit"])
@pytest.mark.parametrize("which", ["--corpus", "--device-map"])
def test_a_fifo_is_refused_before_it_is_read(capsys, tmp_path, tiny_models, corpus40, command, which, no_hang):
    fifo = tmp_path / ("pipe.txt" if which == "--corpus" else "map.json")
    os.mkfifo(fifo)
    argv = ["--model", tiny_models["bert"], "--corpus", corpus40, "--data-dir", tmp_path / "d"]
    argv += [which, fifo] if which == "--device-map" else []
    if which == "--corpus":
        argv[3] = fifo
    _refused(capsys, command, *argv, words="FIFO")


@pytest.mark.parametrize("command", ["compute", "plan", "submit"])
@pytest.mark.parametrize(
    "mapping, words",
    [
        ({"": "٣"}, "unknown device"),
        ({"": 1000}, "names GPU 1000, but this machine has"),
        ({"embeddings": "cpu", "no_such_module": "cpu", "encoder": "cpu", "pooler": "cpu"}, "'no_such_module'"),
    ],
)
def test_a_device_map_compute_refuses_is_refused_by_plan_and_submit_too(
    capsys, tmp_path, tiny_models, corpus40, command, mapping, words
):
    path = tmp_path / "map.json"
    path.write_text(json.dumps(mapping))
    line = _refused(
        capsys,
        command,
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus40,
        "--device-map",
        path,
        "--data-dir",
        tmp_path / "d",
        words=words,
    )
    assert "damaged" not in line and "Device" not in line


def test_a_max_memory_naming_an_absent_gpu_is_named_before_the_model_loads(
    capsys, tmp_path, tiny_models, corpus40, monkeypatch
):
    from normvar_core.pipeline import models as M

    monkeypatch.setattr(M, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    _refused(
        capsys,
        "compute",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus40,
        "--device-map",
        "auto",
        "--max-memory",
        "1000=1GiB,cpu=4GiB",
        "--data-dir",
        tmp_path,
        words="names GPU 1000",
    )
