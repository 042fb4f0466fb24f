"""Bad options through the real CLI: configs with wrong values and vision folders
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
from cli_helpers import assert_bad, run_cli, without_log
from corpus_files import EMOJI

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
    return subprocess.run(
        [sys.executable, "-m", "normvar_core.service.cli", *map(str, argv)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=kw.pop("timeout", 300),
        **kw,
    )


def _with_config(src: Path, dst: Path, changes: dict) -> Path:
    shutil.copytree(src, dst)
    conf = json.loads((dst / "config.json").read_text())
    conf.update(changes)
    (dst / "config.json").write_text(json.dumps(conf))
    return dst


@pytest.mark.parametrize(
    "changes,named", WRONG_VALUES, ids=[next(iter(c)) + str(i) for i, (c, _) in enumerate(WRONG_VALUES)]
)
def test_plan_and_compute_on_a_config_with_wrong_values_say_one_line(
    capsys, tmp_path, tiny_models, corpus40, changes, named
):
    model = _with_config(tiny_models["bert"], tmp_path / "m", changes)
    for command in ("plan", "compute"):
        line = assert_bad(capsys, tmp_path / "data", command, "--model", model, "--corpus", corpus40, match=named)
        assert "config" in line, line


def test_plan_refuses_a_vision_model_as_compute_does(capsys, tmp_path, tiny_models, corpus40):
    import transformers as T

    vit = tmp_path / "tiny-vit"
    T.ViTModel(
        T.ViTConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            image_size=32,
            patch_size=8,
        )
    ).save_pretrained(vit)
    lines = [
        assert_bad(capsys, tmp_path / "data", cmd, "--model", vit, "--corpus", corpus40, match="is a vision model")
        for cmd in ("plan", "compute")
    ]
    for f in Path(tiny_models["bert"]).iterdir():  # a "complete" folder: even tokenizer files
        if "token" in f.name:
            shutil.copy(f, vit / f.name)
    lines += [
        assert_bad(capsys, tmp_path / "data", cmd, "--model", vit, "--corpus", corpus40, match="pixel_values")
        for cmd in ("plan", "compute")
    ]
    assert len(set(lines)) == 1, lines  # the same check, the same line


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, tiny_models, corpus40) -> tuple[Path, str]:
    """A published run of tiny BERT on forty sentences: (data dir, run name)."""
    from normvar_core.service import cli

    data = tmp_path_factory.mktemp("round3") / "data"
    assert (
        cli.main(
            [
                "compute",
                "--model",
                str(tiny_models["bert"]),
                "--corpus",
                str(corpus40),
                "--name",
                "r",
                "--id-sample",
                "100",
                "--quiet",
                "--data-dir",
                str(data),
            ]
        )
        == 0
    )
    return data, "r"


def _closed_pipe(*argv) -> tuple[int, str]:
    """Run ``normvar ARGV`` with its stdout a pipe whose reader has already gone (``| head -0``)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "normvar_core.service.cli", *map(str, argv)],
            stdout=w,
            stderr=subprocess.PIPE,
            text=True,
            env=env(),
            timeout=300,
        )
    finally:
        os.close(w)
    return p.returncode, p.stderr


@pytest.mark.slow
def test_printing_commands_end_cleanly_when_their_reader_goes(small_run, tiny_models, corpus40):
    """``normvar show RUN | head -1`` and every other command that prints: no BrokenPipeError traceback,
    nothing on stderr, the status a shell gives a process ended by SIGPIPE (141)."""
    data, run = small_run
    for argv in (
        ["show", run],
        ["show"],
        ["findings", run, "--resamples", 100],
        ["models"],
        ["jobs"],
        ["contexts", run, "the"],
        ["plan", "--model", tiny_models["bert"], "--corpus", corpus40],
    ):
        code, err = _closed_pipe(*argv, "--data-dir", data)
        assert err == "" and code == 141, (argv, code, err)
    # the real shell pipeline of the issue, with pipefail: head prints the first line, normvar ends quietly
    p = subprocess.run(
        [
            "bash",
            "-o",
            "pipefail",
            "-c",
            f"{sys.executable} -m normvar_core.service.cli show {run} --data-dir {data} | head -1",
        ],
        capture_output=True,
        text=True,
        env=env(),
        timeout=300,
    )
    assert p.stderr == "" and len(p.stdout.splitlines()) == 1 and p.returncode in (0, 141), p


def _one_line(capsys, *argv, match: str) -> str:
    from normvar_core.service import cli

    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    lines = [x for x in without_log(err).splitlines() if x.strip()]
    assert code == 2 and out == "" and len(lines) == 1 and lines[0].startswith("normvar: error:"), (code, out, err)
    assert match.lower() in lines[0].lower(), lines[0]
    return lines[0]


def test_count_options_past_their_bound_are_refused_before_any_work(capsys, tmp_path, small_run, tiny_models, corpus40):
    """The issue's ``findings RUN --resamples 100000000000`` (577 s and 14 GB before) and every other
    count option: one line naming the bound, at once (each refusal well under a second of work)."""
    import time

    from normvar_core.constants import MAX_ID_SAMPLE, MAX_RESAMPLES, MAX_WORKERS

    data, run = small_run
    t0 = time.monotonic()
    _one_line(
        capsys,
        "findings",
        run,
        "--resamples",
        "100000000000",
        "--data-dir",
        data,
        match=f"--resamples 100000000000 is not a whole number from 100 to {MAX_RESAMPLES:,}",
    )
    _one_line(
        capsys,
        "findings",
        run,
        "--resamples",
        "lots",
        "--data-dir",
        data,
        match="--resamples lots is not a whole number",
    )
    _one_line(
        capsys,
        "findings",
        run,
        "--resamples",
        "50",
        "--data-dir",
        data,
        match="--resamples 50 is not a whole number from 100",
    )
    _one_line(
        capsys,
        "contexts",
        run,
        "the",
        "--k",
        "10000000000",
        "--data-dir",
        data,
        match="--k 10000000000 is not a whole number from 1 to ",
    )
    assert time.monotonic() - t0 < 10
    model = ["--model", tiny_models["bert"], "--corpus", corpus40, "--data-dir", tmp_path / "d"]
    for command in ("compute", "plan", "submit"):
        _one_line(
            capsys,
            command,
            *model,
            "--id-sample",
            10 * MAX_ID_SAMPLE,
            match=f"--id-sample {10 * MAX_ID_SAMPLE} is not a whole number from 0 to {MAX_ID_SAMPLE:,}",
        )
        _one_line(
            capsys,
            command,
            *model,
            "--samples-per-token",
            10**12,
            match="--samples-per-token 1000000000000 is not a whole number from 0 to ",
        )
        _one_line(
            capsys,
            command,
            *model,
            "--executor",
            "ray",
            "--workers",
            MAX_WORKERS + 1,
            match=f"--workers {MAX_WORKERS + 1} is not a whole number from 1 to {MAX_WORKERS}",
        )
    cores = os.cpu_count() or 1
    for command in ("compute", "plan"):
        _one_line(
            capsys,
            command,
            *model,
            "--executor",
            "ray",
            "--workers",
            cores + 1,
            match=f"more than this machine's {cores} cores",
        )
    assert not (tmp_path / "d" / "runs").exists() or not list((tmp_path / "d" / "runs").iterdir())


def test_ray_options_on_a_local_run_are_refused(capsys, tmp_path, tiny_models, corpus40):
    model = ["--model", tiny_models["bert"], "--corpus", corpus40, "--data-dir", tmp_path / "d"]
    for command in ("compute", "plan", "submit"):
        _one_line(
            capsys,
            command,
            *model,
            "--executor",
            "local",
            "--ray-address",
            "127.0.0.1:6379",
            match="--ray-address is an option of the Ray executor",
        )
        _one_line(capsys, command, *model, "--workers", "2", match="--workers is an option of the Ray executor")


def test_jsonl_null_cells_are_counted_and_a_table_without_strings_gets_a_useful_hint(capsys, tmp_path, tiny_models):
    from normvar_core.runs.reader import open_run

    rows = [{"text": f"the cat {i} sat on the mat"} for i in range(30)]
    rows[3]["text"] = None
    rows[7] = {"other": 1}  # the key missing: a null cell too
    rows[9]["text"] = 5  # not text: counted apart, as before
    corpus = tmp_path / "nulls.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    code, out, err = run_cli(
        capsys,
        "compute",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus,
        "--name",
        "n",
        "--no-geometry",
        "--quiet",
        "--data-dir",
        tmp_path / "data",
    )
    assert code == 0, err
    assert "2 cells of column 'text' were null or missing and were skipped" in err, err
    assert "1 cell of column 'text'" in err and "not text" in err, err
    run = open_run(tmp_path / "data" / "runs" / "n.duckdb")
    notes = run.meta["notes"]["corpus"]
    assert notes["n_null"] == 2 and notes["n_not_text"] == 1 and notes["n_kept"] == 27, notes
    for name, text in (("nums.jsonl", '{"a": 1, "b": true}\n{"a": 2, "b": null}\n'), ("nums.csv", "a,b\n1,2\n3,4\n")):
        (tmp_path / name).write_text(text)
        line = assert_bad(
            capsys,
            tmp_path / "empty",
            "compute",
            "--model",
            tiny_models["bert"],
            "--corpus",
            tmp_path / name,
            match=f"{name} has no text column: none of its columns (a, b) holds strings",
        )
        assert "--text-column" not in line and "write the sentences as strings" in line, line


@pytest.mark.subprocess
def test_a_second_worker_refuses_before_its_banner(tmp_path):
    data = tmp_path / "data"
    first = subprocess.Popen(
        [sys.executable, "-m", "normvar_core.service.cli", "worker", "--data-dir", str(data)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env(),
    )
    try:
        seen = []
        for line in first.stderr:  # wait until the first holds the directory and has said so
            seen.append(line)
            if f"worker {first.pid} on" in line:
                break
        assert any("normvar worker: pid" in x for x in seen), seen
        second = normvar("worker", "--data-dir", data, timeout=60)
        lines = [x for x in second.stderr.splitlines() if x.strip()]
        assert second.returncode == 2 and len(lines) == 1, second.stderr
        assert lines[0].startswith("normvar: error: another worker") and f"pid {first.pid}" in lines[0], lines
        assert "normvar worker: pid" not in second.stderr
    finally:
        first.terminate()
        first.wait(timeout=60)


@pytest.mark.model
def test_a_verdict_whose_interval_straddles_its_threshold_says_it_cannot_tell(capsys, tmp_path):
    """The issue's case: MiniLM on the first five sentences of the shipped novels — anisotropy 0.467
    [0.201, 0.734] against the flat-profile threshold 0.5 said "holds"."""
    from normvar_core.stats.claims import FLAT_MAX

    data = tmp_path / "data"
    assert run_cli(capsys, "compute", "--max-sentences", 5, "--name", "five", "--quiet", "--data-dir", data)[0] == 0
    code, out, err = run_cli(capsys, "findings", "five", "--json", "--data-dir", data)
    assert code == 0, err
    f = {x["id"]: x for x in json.loads(out)}["anisotropy_profile"]
    lo, hi = f["interval"]
    assert lo < FLAT_MAX < hi and f["verdict"] == "cannot tell", f
    assert "straddles the threshold" in f["why"]
    code, out, err = run_cli(capsys, "findings", "five", "--data-dir", data)
    assert f"cannot tell: {f['value']:.3g} [{lo:.3g}, {hi:.3g}]" in out


def test_an_all_unknown_run_has_finite_interval_endpoints(capsys, tmp_path, tiny_models):
    """A corpus of emoji (mostly [UNK]) with --allow-unknown: four types in the band, so some bootstrap
    resamples draw one type again and again; their slope and R² are undefined and left out, so the R²
    interval has two finite endpoints within [0, 1] (it had a null one)."""

    corpus = tmp_path / "emoji.txt"
    corpus.write_text("\n".join(EMOJI) + "\n", encoding="utf-8")
    data = tmp_path / "data"
    assert (
        run_cli(
            capsys,
            "compute",
            "--model",
            tiny_models["bert"],
            "--corpus",
            corpus,
            "--name",
            "e",
            "--allow-unknown",
            "--id-sample",
            100,
            "--quiet",
            "--data-dir",
            data,
        )[0]
        == 0
    )
    code, out, err = run_cli(capsys, "findings", "e", "--json", "--data-dir", data)
    assert code == 0, err
    found = {x["id"]: x for x in json.loads(out)}
    for f in found.values():
        assert f["interval"] is None or None not in f["interval"], f
    t = found["tradeoff_slope"]
    assert t["details"]["r2_low"] is not None and t["details"]["r2_high"] is not None, t
    assert 0.0 <= t["details"]["r2_low"] <= t["details"]["r2_high"] <= 1.0 + 1e-12, t
