"""SIGTERM during a foreground ``normvar compute`` (``kill``, ``timeout``, ``docker stop``, a cluster
scheduler) is handled as Ctrl-C: one line on stderr, temp files removed, the checkpoint kept, exit 143.
A real ``normvar compute`` process is told (by a patch run before the CLI) to write a marker and
wait at a chosen point — inside the third forward pass, or in the run file's write after two
tables — and the test sends it a real SIGTERM there. The rerun of the same command resumes from the
checkpoint (run in-process here) and publishes the same statistics as an uninterrupted run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from normvar_core.runs.reader import open_run
from cross_process import assert_close
from normvar_core.service import cli

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

PAUSE = {
    "forward": """
        from normvar_core.pipeline import sources as S
        real, calls = S.TransformerSource._forward, [0]
        def forward(self, *a, **k):
            calls[0] += 1
            if calls[0] == 3:   # two batches done, the third in its forward pass
                pause()
            yield from real(self, *a, **k)
        S.TransformerSource._forward = forward
    """,
    "write": """
        from normvar_core.runs import writer
        real, calls = writer._append, [0]
        def append(*a):
            if calls[0] == 2:   # the temp file holds the run row and two tables
                pause()
            calls[0] += 1
            return real(*a)
        writer._append = append
    """,
}


def _compute(argv: list[str], stage: str | None, marker: Path, log: Path) -> subprocess.Popen:
    code = "import sys, time\nfrom pathlib import Path\n"
    code += f"def pause():\n    Path({str(marker)!r}).write_text('x')\n    time.sleep(120)\n"
    code += textwrap.dedent(PAUSE[stage]) if stage else ""
    code += f"from normvar_core.service import cli\nsys.exit(cli.main({argv!r}))\n"
    env = dict(os.environ, PYTHONPATH=os.getcwd(), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    with open(log, "wb") as fh:
        return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=fh, env=env)


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_models):
    root = tmp_path_factory.mktemp("sigterm")
    corpus = root / "c.txt"
    corpus.write_text("\n".join(f"the cat {i % 9} sat on mat {i % 13} with a dog {i % 5}" for i in range(120)) + "\n")

    def argv(data: Path, name: str = "r") -> list[str]:
        return ["compute", "--model", str(tiny_models["bert"]), "--corpus", str(corpus), "--name", name,
                "--batch-size", "8", "--id-sample", "200", "--quiet", "--data-dir", str(data),
                "--occurrences", "0",  # their early axes would run every batch of this small corpus before the pass
                "--checkpoint", str(data.parent / f"{name}.ckpt")]
    ref = root / "ref" / "data"
    assert cli.main(argv(ref)) == 0
    return argv, open_run(ref / "runs" / "r.duckdb")


@pytest.mark.parametrize("stage", ["forward", "write"])
def test_sigterm_mid_stage_removes_temps_keeps_checkpoint_exits_143_and_resumes(stage, tmp_path, setup):
    argv, ref = setup
    data = tmp_path / "data"
    marker, log = tmp_path / "marker", tmp_path / "log"
    p = _compute(argv(data), stage, marker, log)
    t0 = time.monotonic()
    while not marker.exists():
        assert p.poll() is None, log.read_text()
        assert time.monotonic() - t0 < 240
        time.sleep(0.05)
    if stage == "write":
        assert [q for q in (data / "runs").iterdir() if ".tmp-" in q.name], "the temp run file is being written"
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=60) == 143
    err = [x for x in log.read_text().splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("normvar: terminated (SIGTERM)"), err
    assert "checkpoint kept" in err[0]
    assert os.listdir(data / "runs") == []                 # no temp run file, no WAL, nothing published
    ckpt = tmp_path / "r.ckpt"
    assert ckpt.exists() and not [q for q in tmp_path.iterdir() if ".tmp-" in q.name]

    assert cli.main(argv(data)) == 0                       # the same command: resumes and finishes
    run = open_run(data / "runs" / "r.duckdb")
    resumed = run.meta["notes"]["resumed_from_batch"]
    assert resumed == (2 if stage == "forward" else 15)    # 120 sentences / 8 = 15 batches
    a, b = run.stats(), ref.stats()
    np.testing.assert_array_equal(a.n, b.n)
    # the batches before the signal ran in the killed process: equal to float32 rounding (tests/cross_process.py)
    assert_close(a.mean, b.mean)
    assert_close(a.q, b.q)
    assert not ckpt.exists()
