"""Every number one line: the one validator (``normvar_core.numbers.Number``) of every numeric option and
environment variable, checked against Python's own reading of the same text (``float``/``int`` and ``math``), and
through the real CLI: NaN, infinities, a float that overflows, an integer past its range and a negative size are
each one ``normvar: error:`` line naming the option or variable and its range, exit 2, before any work (the
dashboard never starts on a bad cap; ``plan`` reads no corpus)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_bad

from normvar_core.errors import NormvarError

ROOT = Path(__file__).resolve().parent.parent
MAX_SEED = 2**53 - 1  # numbers.MAX_SEED: the largest integer a browser's number field holds exactly
TEXTS = [
    "0",
    "1",
    "-5",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e400",
    "-1e400",
    "1e300",
    "3.5",
    "2.0",
    "1_000",
    " 7 ",
    "",
    "x",
    "0x10",
    "99999999999999999999999",
    "65535",
    "65536",
    str(MAX_SEED),
    str(MAX_SEED + 1),
    "1e-300",
]


def _truth(text: str, kind: type, least, most, least_open: bool):
    """The value a bounded ``kind`` should take from ``text``, or None: Python's reading, then the range."""
    t = text.strip().replace("_", "")
    try:
        value = int(t) if kind is int else float(t)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    ok = (value > least if least_open else value >= least) and value <= most
    return value if ok else None


@pytest.mark.parametrize(
    "name,bounds",
    [
        ("--port", dict(kind=int, least=0, most=65535)),
        ("NORMVAR_MAX_UPLOAD_MB", dict(kind=float, least=0, most=1 << 20, least_open=True)),
        ("--seed", dict(kind=int, least=0, most=MAX_SEED)),
        ("--memory-gb", dict(kind=float, least=0.01, most=1 << 20)),
    ],
)
def test_the_validator_agrees_with_pythons_reading_and_names_the_range(name, bounds):
    from normvar_core import numbers

    assert numbers.MAX_SEED == MAX_SEED and numbers.PORT["most"] == 65535 and numbers.UPLOAD_MB["least_open"]
    check = numbers.Number(name, **bounds)
    for text in TEXTS:
        want = _truth(text, bounds["kind"], bounds["least"], bounds["most"], bounds.get("least_open", False))
        if want is not None:
            got = check(text)
            assert got == want and type(got) is bounds["kind"], (name, text, got)
            continue
        with pytest.raises(NormvarError) as err:
            check(text)
        line = str(err.value)
        assert "\n" not in line and name in line and str(bounds["most"])[:3] in line.replace(",", ""), line
        given = f"{name}={text.strip()}" if not name.startswith("-") else f"{name} {text.strip()}"
        assert line.startswith(given), (line, given)


def test_an_unset_variable_takes_the_default_and_an_empty_one_is_refused():
    from normvar_core.numbers import PORT, env_number

    assert env_number("NORMVAR_PORT", 8501, {}, **PORT) == 8501
    assert env_number("NORMVAR_PORT", 8501, {"NORMVAR_PORT": "0"}, **PORT) == 0
    with pytest.raises(NormvarError, match="NORMVAR_PORT= is not a whole number from 0 to 65535"):
        env_number("NORMVAR_PORT", 8501, {"NORMVAR_PORT": ""}, **PORT)


def _serve(*argv: str, env: dict) -> subprocess.CompletedProcess:
    """``normvar ARGV`` in its own process group; one that is still running after 40 s (a dashboard that started
    on a bad value) is killed with everything it started, and the test fails on the timeout."""
    full = {k: v for k, v in os.environ.items() if k not in ("NORMVAR_TOKEN", "NORMVAR_PORT", "NORMVAR_MAX_UPLOAD_MB")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "normvar_core.service.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(full, PYTHONPATH=str(ROOT), **env),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "env,said",
    [
        ({"NORMVAR_MAX_UPLOAD_MB": "nan"}, "NORMVAR_MAX_UPLOAD_MB=nan is not a number above 0 and at most 1,048,576"),
        ({"NORMVAR_MAX_UPLOAD_MB": "1e400"}, "NORMVAR_MAX_UPLOAD_MB=1e400 is not a number above 0"),
        ({"NORMVAR_MAX_UPLOAD_MB": "-5"}, "NORMVAR_MAX_UPLOAD_MB=-5 is not a number above 0"),
        ({"NORMVAR_PORT": "99999"}, "NORMVAR_PORT=99999 is not a whole number from 0 to 65535 (0: any free port)"),
    ],
)
def test_a_bad_serving_variable_is_one_line_and_nothing_starts(tmp_path, env, said):
    out = (
        _serve("dashboard", "--port", "0", "--data-dir", str(tmp_path / "d"), env=env)
        if "PORT" not in str(env)
        else (_serve("dashboard", "--data-dir", str(tmp_path / "d"), env=env))
    )
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and out.stdout == "", (out.stdout, out.stderr)
    assert lines[0].startswith("normvar: error: ") and said in lines[0], lines[0]
    if "PORT" in str(env):
        assert "--port" not in lines[0]  # the value came from the variable: the line names the variable only


def test_numbers_past_their_range_are_one_line_before_any_work(capsys, tmp_path, tiny_models, corpus40):
    base = ["--model", tiny_models["bert"], "--corpus", corpus40]
    for argv, said in (
        (["--seed", "99999999999999999999999"], "--seed 99999999999999999999999 is not a whole number from 0 to "),
        (["--memory-gb", "1e300"], "--memory-gb 1e300 is not a number from 0.01 to 1,048,576"),
        (["--memory-gb", "nan"], "--memory-gb nan is not a number from 0.01"),
        (["--sample-frac", "inf"], "--sample-frac inf is not a number above 0 and at most 1"),
        (["--batch-size", "1e400"], "--batch-size 1e400 is not a whole number from 1 to "),
    ):
        for command in ("plan", "compute", "submit"):
            assert_bad(capsys, tmp_path / command, command, *base, *argv, match=said)
    for argv, said in (
        (["findings", "r", "--seed", "-1"], "--seed -1 is not a whole number from 0 to "),
        (["null", "r", "--seed", "1e30"], "--seed 1e30 is not a whole number"),
        (["show", "--n-min", "nan"], "--n-min nan is not a number from 0 to "),
        (["jobs", "--limit", "-3"], "--limit -3 is not a whole number from 0 to "),
        (["worker", "--poll", "0"], "--poll 0 is not a number above 0"),
    ):
        assert_bad(capsys, tmp_path / "other", *argv, match=said)
