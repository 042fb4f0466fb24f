"""Peak resident memory of ``load_sentences`` on corpora 10x apart in size, same kept count.

Generates one-sentence-a-line files in a temp directory (200k and 2M lines by default, ~60
bytes a line; ``--lines 200000,2000000,10000000`` adds a 10M-line file), then for each runs
``load_sentences`` in a fresh subprocess with ``--sample-frac`` scaled so that about
``--keep`` sentences are kept (10x smaller for the 10x larger file), and reports the child's
peak RSS (``VmHWM`` of /proc/self/status: ``ru_maxrss`` keeps the parent's peak across the
exec), the peak right after the imports and the wall time. The streamed reader's peak must not grow with the file
(criterion: the largest
file within 10 % of the smallest). ``--baseline`` also runs the read-everything reader that
``load_sentences`` replaced (``tests/corpus_brute.py``) on files up to 2M lines.
``--formats txt,txt.gz,jsonl,csv,parquet`` repeats it for other formats. The generated files
are deleted at the end. Timings are noisy on a shared 2-core machine.

Usage: .venv/bin/python benchmarks/bench_corpus_memory.py [--lines 200000,2000000] [--baseline]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
sys.path[:0] = [{root!r}, {tests!r}]
from normvar_core.config import RunConfig
from normvar_core.pipeline.corpus.read import load_sentences
from corpus_brute import brute_load
import pandas, pyarrow.parquet  # the table readers' imports, so the baseline RSS includes them
def hwm():  # peak RSS of this process image (ru_maxrss would carry the parent's over the exec)
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]) * 1024
base = hwm()
load = brute_load if {brute} else load_sentences
t0 = time.perf_counter()
c = load(RunConfig(corpus={path!r}, sample_frac={frac!r}, seed=0, text_column={column!r}))
secs = time.perf_counter() - t0
peak = hwm()
print(json.dumps(dict(kept=c.n_kept, read=c.n_read, base=base, peak=peak, secs=secs)))
"""

VOCAB = np.array(
    "the of and to a in was he it that his her you as had with for she not at but be my on have "
    "by which is mr elizabeth all they said were so this from would very could been an what".split()
)


def write_corpus(path: Path, n_lines: int, fmt: str, seed: int = 0) -> None:
    """``n_lines`` sentences of 5-14 words (~60 bytes), written 100k lines at a time."""
    rng = np.random.default_rng(seed)
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        writer = pq.ParquetWriter(path, pa.schema([("id", pa.int64()), ("text", pa.string())]))
    opener = gzip.open if fmt == "txt.gz" else open
    fh = None if fmt == "parquet" else opener(path, "wt", encoding="utf-8")
    if fmt == "csv":
        fh.write("id,text\n")
    for start in range(0, n_lines, 100_000):
        k = min(100_000, n_lines - start)
        lens = rng.integers(5, 15, size=k)
        words = rng.choice(VOCAB, size=int(lens.sum()))
        cuts = np.cumsum(lens)[:-1]
        sents = [" ".join(w) for w in np.split(words, cuts)]
        ids = range(start, start + k)
        if fmt in ("txt", "txt.gz"):
            fh.write("\n".join(sents) + "\n")
        elif fmt == "jsonl":
            fh.write("".join(json.dumps({"id": i, "text": s}) + "\n" for i, s in zip(ids, sents)))
        elif fmt == "csv":
            fh.write("".join(f"{i},{s}\n" for i, s in zip(ids, sents)))
        else:
            writer.write_table(pa.table({"id": list(ids), "text": sents}), row_group_size=100_000)
    (writer if fmt == "parquet" else fh).close()


def measure(path: Path, frac: float, column: str | None, brute: bool) -> dict:
    code = CHILD.format(
        root=str(ROOT), tests=str(ROOT / "tests"), path=str(path), frac=frac, column=column, brute=brute
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return dict(error=(out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", default="200000,2000000")
    ap.add_argument("--keep", type=int, default=1000, help="about this many sentences kept from each file")
    ap.add_argument("--formats", default="txt")
    ap.add_argument("--baseline", action="store_true", help="also run the read-everything reader (<= 2M lines)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.lines.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="normvar-corpus-mem-"))
    mb = 2**20
    print(
        "| format | lines | file (MB) | sample-frac | kept | reader | peak RSS after imports (MB) | peak RSS (MB) "
        "| peak - imports (MB) | seconds |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    try:
        for fmt in args.formats.split(","):
            peaks = {}
            for n in sizes:
                path = tmp / f"c{n}.{fmt}"
                write_corpus(path, n, fmt)
                frac = min(1.0, args.keep / n)
                column = "text" if fmt in ("jsonl", "csv", "parquet") else None
                readers = [("streamed", False)] + (
                    [("read-everything", True)] if args.baseline and n <= 2_000_000 else []
                )
                for label, brute in readers:
                    r = measure(path, frac, column, brute)
                    if "error" in r:
                        print(
                            f"| {fmt} | {n:,} | {path.stat().st_size / mb:.0f} | {frac:g} | - | {label} | - | - | - "
                            f"| {r['error']} |"
                        )
                        continue
                    if not brute:
                        peaks[n] = r["peak"]
                    print(
                        f"| {fmt} | {n:,} | {path.stat().st_size / mb:.0f} | {frac:g} | {r['kept']:,} | {label} "
                        f"| {r['base'] / mb:.0f} | {r['peak'] / mb:.0f} | {(r['peak'] - r['base']) / mb:.0f} "
                        f"| {r['secs']:.1f} |",
                        flush=True,
                    )
                path.unlink()
            if len(peaks) >= 2:
                lo, hi = peaks[min(peaks)], peaks[max(peaks)]
                verdict = "within 10 %" if hi <= 1.10 * lo else "NOT within 10 %"
                print(
                    f"\n{fmt}: streamed peak RSS {lo / mb:.0f} MB at {min(peaks):,} lines -> {hi / mb:.0f} MB at "
                    f"{max(peaks):,} lines ({(hi / lo - 1) * 100:+.1f} %, {verdict})\n"
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
