"""The program's end (cli.end_process): the ``normvar`` process ends without the interpreter's teardown, yet
with its whole output, its exit status and its atexit handlers — checked on real processes."""

import subprocess
import sys

import pytest

PROGRAM = """
import atexit, sys
atexit.register(lambda: print("atexit ran", flush=True))
sys.argv = ["normvar", *sys.argv[1:]]
from normvar_core.service import cli
sys.exit(cli.main())
"""


def _normvar(*argv):
    return subprocess.run([sys.executable, "-c", PROGRAM, *argv], capture_output=True, text=True, timeout=120)


@pytest.mark.subprocess
def test_output_status_and_atexit_handlers_survive_the_fast_end(tmp_path):
    ok = _normvar("models", "--data-dir", str(tmp_path))
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.splitlines()
    assert any("minilm" in line for line in lines) and lines[-1] == "atexit ran"
    bad = _normvar("show", "no-such-run", "--data-dir", str(tmp_path))
    assert bad.returncode == 2
    assert bad.stderr.startswith("normvar: error:") and "no-such-run" in bad.stderr
    assert bad.stdout.splitlines()[-1] == "atexit ran"


def test_in_process_callers_keep_their_process(tmp_path):
    """main(argv) returns its status (tests and other programs call it so); the process goes on."""
    from normvar_core.service import cli

    assert cli.main(["models", "--data-dir", str(tmp_path)]) == 0
    assert cli.main(["show", "no-such-run", "--data-dir", str(tmp_path)]) == 2
