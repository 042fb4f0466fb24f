"""Peak resident memory of ``normvar plan`` on a corpus that is ONE line, at several lengths.

Writes single-line ``.txt`` corpora of random words (``--mb 1,20,200`` by default) into a temp folder, then runs
the real CLI, ``normvar plan --model minilm --corpus FILE`` (the default word limit: the line is read, counted
and dropped; and ``--max-words 0``: the line is kept and tokenized), each in a fresh process, and reports the
child's peak RSS (``ru_maxrss`` of the waited-for child, from ``os.wait4``) and the wall time. The reader holds
at most ``stream.LONG_LINE`` characters of a line, so the peak must not grow with the line (criterion: the
largest within 10 % of the smallest). A plan that refuses the corpus ("no sentences left") still reads it whole:
its peak counts too. The files are deleted at the end.

Usage: .venv/bin/python benchmarks/bench_plan_long_line.py [--mb 1,20,200] [--model minilm]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WORDS = np.array("the cat sat on a mat with its dog and ran far away from home".split())


def write_line(path: Path, mb: int) -> None:
    """One line of ``mb`` MB of seeded random words, written in 1 MB pieces (never held whole)."""
    rng = np.random.default_rng(0)
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(mb):
            piece = " ".join(WORDS[rng.integers(0, len(WORDS), 250_000)])
            fh.write(piece[: 1 << 20].ljust(1 << 20) if len(piece) >= 1 << 20 else piece + " ")
        fh.write("\n")


def peak(argv: list[str]) -> tuple[float, float, int, str]:
    """(peak RSS in MiB, wall seconds, exit status, last stderr line) of ``normvar ARGV`` in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "normvar_core.service.cli", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    last = (err.strip().splitlines() or [""])[-1]
    return usage.ru_maxrss / 1024, time.monotonic() - t0, proc.returncode, last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", default="1,20,200", help="line lengths in MB, comma-separated")
    ap.add_argument("--model", default="minilm")
    args = ap.parse_args()
    sizes = [int(x) for x in args.mb.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mb in sizes:
            corpus = Path(tmp) / f"line{mb}.txt"
            write_line(corpus, mb)
            for flags in ([], ["--max-words", "0"]):
                argv = ["plan", "--model", args.model, "--corpus", str(corpus), "--data-dir", str(Path(tmp) / "d")]
                rss, wall, code, last = peak(argv + flags)
                rows.append((mb, " ".join(flags) or "(default)", rss, wall, code, last[:90]))
                print(f"{mb:>5} MB  {rows[-1][1]:<14} peak {rss:8.1f} MiB  {wall:6.1f} s  exit {code}  {last[:90]}")
            corpus.unlink()
    for flags in sorted({r[1] for r in rows}):
        peaks = [r[2] for r in rows if r[1] == flags]
        print(f"{flags}: largest / smallest peak = {max(peaks) / min(peaks):.3f}")


if __name__ == "__main__":
    main()
