"""Hostile input, round three (issue 35, items 1-3, 8, 9): configs with wrong values and vision folders
under ``plan`` as under ``compute``, count options bounded before any work, a closed stdout pipe, and the
smaller items — each through the real CLI (in-process ``cli.main`` or a real ``normvar`` subprocess)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli_runs import assert_bad, corpus40, run_cli  # noqa: F401  (fixture)

# (config.json changes, what the one line names); the first three are the issue's, the rest a fuzz
WRONG_VALUES = [
    ({"num_hidden_layers": "many"}, "num_hidden_layers' expected int, got str"),
    ({"hidden_size": -5}, "hidden_size = -5"),
    ({"hidden_size": 30, "num_attention_heads": 7}, "not a multiple of the number of attention heads"),
    ({"hidden_size": 32.5}, "hidden_size' expected int, got float"),
    ({"hidden_size": None}, "hidden_size' expected int, got NoneType"),
    ({"num_attention_heads": [4]}, "num_attention_heads' expected int, got list"),
    ({"vocab_size": -1}, "vocab_size = -1"),
    ({"max_position_embeddings": 0}, "max_position_embeddings = 0"),
    ({"intermediate_size": "x"}, "intermediate_size' expected int, got str"),
    ({"num_hidden_layers": True}, "num_hidden_layers"),
    ({"model_type": "nonsense"}, "does not recognize this architecture"),
]


def env() -> dict:
    e = dict(os.environ, PYTHONPATH=os.getcwd(), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    e.pop("NORMVAR_WARNINGS", None)
    return e


def normvar(*argv, **kw) -> subprocess.CompletedProcess:
    """A real ``normvar`` process."""
    return subprocess.run([sys.executable, "-m", "normvar_core.service.cli", *map(str, argv)], capture_output=True,
                          text=True, env=env(), timeout=kw.pop("timeout", 300), **kw)


def _with_config(src: Path, dst: Path, changes: dict) -> Path:
    shutil.copytree(src, dst)
    conf = json.loads((dst / "config.json").read_text())
    conf.update(changes)
    (dst / "config.json").write_text(json.dumps(conf))
    return dst


@pytest.mark.parametrize("changes,named", WRONG_VALUES, ids=[next(iter(c)) + str(i) for i, (c, _) in
                                                            enumerate(WRONG_VALUES)])
def test_plan_and_compute_on_a_config_with_wrong_values_say_one_line(capsys, tmp_path, tiny_models, corpus40,
                                                                     changes, named):
    model = _with_config(tiny_models["bert"], tmp_path / "m", changes)
    for command in ("plan", "compute"):
        line = assert_bad(capsys, tmp_path / "data", command, "--model", model, "--corpus", corpus40, match=named)
        assert "config" in line, line


def test_plan_refuses_a_vision_model_as_compute_does(capsys, tmp_path, tiny_models, corpus40):
    import transformers as T

    vit = tmp_path / "tiny-vit"
    T.ViTModel(T.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                           image_size=32, patch_size=8)).save_pretrained(vit)
    lines = [assert_bad(capsys, tmp_path / "data", cmd, "--model", vit, "--corpus", corpus40, match="is a vision model")
             for cmd in ("plan", "compute")]
    for f in Path(tiny_models["bert"]).iterdir():  # a "complete" folder: even tokenizer files
        if "token" in f.name:
            shutil.copy(f, vit / f.name)
    lines += [assert_bad(capsys, tmp_path / "data", cmd, "--model", vit, "--corpus", corpus40, match="pixel_values")
              for cmd in ("plan", "compute")]
    assert len(set(lines)) == 1, lines  # the same check, the same line


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, tiny_models, corpus40) -> tuple[Path, str]:
    """A published run of tiny BERT on forty sentences: (data dir, run name)."""
    from normvar_core.service import cli

    data = tmp_path_factory.mktemp("round3") / "data"
    assert cli.main(["compute", "--model", str(tiny_models["bert"]), "--corpus", str(corpus40), "--name", "r",
                     "--id-sample", "100", "--quiet", "--data-dir", str(data)]) == 0
    return data, "r"


def _closed_pipe(*argv) -> tuple[int, str]:
    """Run ``normvar ARGV`` with its stdout a pipe whose reader has already gone (``| head -0``)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "normvar_core.service.cli", *map(str, argv)], stdout=w,
                           stderr=subprocess.PIPE, text=True, env=env(), timeout=300)
    finally:
        os.close(w)
    return p.returncode, p.stderr


@pytest.mark.slow
def test_printing_commands_end_cleanly_when_their_reader_goes(small_run, tiny_models, corpus40):
    """``normvar show RUN | head -1`` and every other command that prints: no BrokenPipeError traceback,
    nothing on stderr, the status a shell gives a process ended by SIGPIPE (141)."""
    data, run = small_run
    for argv in (["show", run], ["show"], ["findings", run, "--resamples", 100], ["models"], ["jobs"],
                 ["contexts", run, "the"], ["plan", "--model", tiny_models["bert"], "--corpus", corpus40]):
        code, err = _closed_pipe(*argv, "--data-dir", data)
        assert err == "" and code == 141, (argv, code, err)
    # the real shell pipeline of the issue, with pipefail: head prints the first line, normvar ends quietly
    p = subprocess.run(["bash", "-o", "pipefail", "-c", f"{sys.executable} -m normvar_core.service.cli show {run} "
                        f"--data-dir {data} | head -1"], capture_output=True, text=True, env=env(), timeout=300)
    assert p.stderr == "" and len(p.stdout.splitlines()) == 1 and p.returncode in (0, 141), p
