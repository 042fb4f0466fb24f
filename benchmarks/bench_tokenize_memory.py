"""Peak resident memory of the plan (tokenize, batch, count, choose the samples) vs corpus size.

For each ``--sentences`` size, a fresh subprocess builds that many synthetic sentences (5-40 words
drawn from the novels' vocabulary, seeded), loads the real MiniLM tokenizer, then runs
``run_plan.make_plan`` and reports the peak RSS (VmHWM) above the RSS just before it, what the plan keeps
for its batches (the flat encoding, 9 bytes a token, from which each padded batch is built when the pass
needs it; older versions held every padded batch, 17 bytes a padded token) and the wall time.
``--code DIR`` runs another checkout of normvar (e.g. ``git archive`` of an older commit) for a
before/after comparison. Timings are noisy on a shared 2-core machine.

Usage: .venv/bin/python benchmarks/bench_tokenize_memory.py [--sentences 100000,400000] [--code DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time, gzip
sys.path[:0] = [{root!r}, {tests!r}]
import numpy as np
from transformers import AutoTokenizer
from conftest import installed_minilm_dir
from normvar_core.config import RunConfig
from normvar_core.datadir import DEFAULT_CORPUS
from normvar_core.pipeline.run_plan import corpus_of, make_plan
def rss(key):
    return int(next(l for l in open("/proc/self/status") if l.startswith(key)).split()[1]) * 1024
with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
    vocab = np.array(sorted({{w for line in fh for w in line.split()}}))
rng = np.random.default_rng(0)
lens = rng.integers(5, 41, size={n})
words = rng.integers(0, len(vocab), size=int(lens.sum()))
cut = np.concatenate([[0], np.cumsum(lens)])
sentences = [" ".join(vocab[words[cut[i]:cut[i + 1]]]) for i in range({n})]
del words
tok = AutoTokenizer.from_pretrained(str(installed_minilm_dir()))
tok(["warm up"])
import gc; gc.collect()
base = rss("VmRSS:")
t0 = time.perf_counter()
plan = make_plan(RunConfig(model="minilm"), corpus_of(sentences, name="syn", sha256="x"),
                 tok, num_hidden_states=7, max_length=512)
secs = time.perf_counter() - t0
peak = rss("VmHWM:")
bb = plan.batches
if hasattr(bb, "enc"):  # built on demand from the flat encoding: that is what the plan keeps
    kept = sum(a.nbytes for a in (bb.enc.ids, bb.enc.special, bb.enc.starts, bb.enc.lengths))
else:  # every padded batch held
    kept = sum(b.input_ids.numel() * 17 for b in bb)
print(json.dumps(dict(sentences={n}, tokens=plan.total_embeddings, base=base, peak=peak, batches_bytes=kept,
                      secs=secs)))
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", default="100000,400000")
    ap.add_argument("--code", default=str(ROOT), help="root of the normvar checkout to measure")
    args = ap.parse_args(argv)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    print(f"code: {args.code}")
    print("| sentences | tokens | plan peak above start | batches kept | time |")
    print("|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.sentences.split(",")):
        src = CHILD.format(root=str(Path(args.code).resolve()), tests=str(ROOT / "tests"), n=n)
        out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, env=env, cwd=args.code)
        if out.returncode:
            print(out.stderr[-2000:], file=sys.stderr)
            return 1
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"| {n:,} | {r['tokens']:,} | {(r['peak'] - r['base']) / 2**20:,.0f} MB | "
            f"{r['batches_bytes'] / 2**20:,.0f} MB | {r['secs']:.1f} s |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
