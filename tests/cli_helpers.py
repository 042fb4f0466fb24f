"""The CLI in this process: ``run_cli`` (exit status, stdout, stderr of ``cli.main``) and ``assert_bad`` (one
line on stderr, exit status 2, nothing published). ``compute``'s start line ("normvar: start · ...": what it is
about to do, printed before its inputs are read) is left out of the stderr they return: tests/test_compute_log.py
reads it."""
from __future__ import annotations

from pathlib import Path

from normvar_core.service import cli


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, without_start(err)


def without_start(err: str) -> str:
    """stderr without ``compute``'s start line."""
    return "".join(x for x in err.splitlines(keepends=True) if not x.startswith("normvar: start · "))


def assert_bad(capsys, data: Path, *argv, match: str) -> str:
    code, out, err = run_cli(capsys, *argv, "--data-dir", data)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and lines[0].startswith("normvar: error:"), err
    assert match.lower() in lines[0].lower(), lines[0]
    runs = data / "runs"
    assert not runs.exists() or list(runs.iterdir()) == [], list(runs.iterdir())
    return lines[0]
