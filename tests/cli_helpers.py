"""The CLI in this process: ``run_cli`` (exit status, stdout, stderr of ``cli.main``) and ``assert_bad`` (one
line on stderr, exit status 2, nothing published). ``compute``'s log lines — its start line ("normvar: start ·
...": what it is about to do) and the line as each phase begins ("normvar: plan · read the corpus · 0/3 steps") —
are left out of the stderr they return: tests/test_compute_log.py reads them. An error or warning is never a log
line."""

from __future__ import annotations

import re
from pathlib import Path

from normvar_core.service import cli
from normvar_core.service.job_progress import LogLines


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, without_log(err)


LOG_LINE = re.compile(rf"normvar: ({'|'.join(map(re.escape, LogLines.HEADS))}) · ")


def without_log(err: str) -> str:
    """stderr without ``compute``'s log lines (``LogLines``)."""
    return "".join(x for x in err.splitlines(keepends=True) if not LOG_LINE.match(x))


def assert_bad(capsys, data: Path, *argv, match: str) -> str:
    code, out, err = run_cli(capsys, *argv, "--data-dir", data)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and lines[0].startswith("normvar: error:"), err
    assert match.lower() in lines[0].lower(), lines[0]
    runs = data / "runs"
    assert not runs.exists() or list(runs.iterdir()) == [], list(runs.iterdir())
    return lines[0]
