"""The cost of a run against its forward pass, as whole processes on the shipped novels, MiniLM.

Three variants, alternated (A B C A B C ...), median of ``--repeat`` (default 3) at ``--sentences``
(default 3,000):

* default  = ``normvar compute`` (the default measures: moments, samples, geometry, self-similarity, outliers,
  halves, occurrences, the neighbourhoods (GRIDE, the overlap) and the layer linearity; with its periodic
  checkpoints, as a user runs it);
* lean     = ``normvar compute --no-geometry --self-similarity off`` (``lean_no_linearity``: also
  ``--no-layer-linearity``, the lean run without its one exact float64 product);
* bare     = this script's ``--bare``: load the corpus and the model, tokenize (``batches.make_batches``),
  ``model(..., output_hidden_states=True)`` for every batch, nothing else;
* bare_heap = the same with the run's heap set-up (``execute.heap``: glibc serves blocks below 1 GiB from
  the reused main heap, trimmed after a batch only once it keeps twice the first batch's free bytes). A run
  sets its heap up so; a plain script does not, and pays a page fault for every 4 KiB of every large
  activation: the run's ratio is given against both.

Then the tail part: computes at each size of ``--tail-sentences`` (default 600; comma-separated) and in each of
``--tail-variants`` (default ``default``; ``default_no_new`` adds ``--no-neighbourhoods --no-layer-linearity``),
alternated the same way: the share of the process's wall time spent after the last forward batch (the "finalize"
and "write" phases: spectra, TwoNN, seed 004's batches, the neighbourhoods' searches, the run file). Targets:
default (every measure on) <= 1.50x bare at 3,000 sentences and <= 1.35x at 20,000, lean <= 1.15x, tail <= 15 %
at 3,000.
Prints a markdown table of wall and CPU seconds (user + system of the whole process, all threads: the
steadier measure when other jobs share the cores; user and system apart) and both ratios, with the load
average. While developing on a busy machine: fewer sentences and rounds, one variant pair, one torch
thread (no spinning OpenMP threads inflating the CPU time), e.g.
``--sentences 1500 --repeat 1 --variants lean,bare --threads 1 --skip tail``.
Usage: .venv/bin/python benchmarks/bench_cost.py [--sentences N] [--repeat R] [--tail-sentences M]
       [--variants default,lean,bare] [--threads T] [--skip cost,tail]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


THREADS: list = []  # [T] when --threads T: OMP_NUM_THREADS for every process measured


def _env() -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if THREADS:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(THREADS[0])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def bare_main(n: int, data_dir: str, heap: bool = False) -> None:
    """The bare forward pass (run in its own process by the parent); ``heap``: with the run's heap set-up
    (``execute.heap``: blocks below 1 GiB from the reused main heap, trimmed only when grown)."""
    import torch

    from normvar_core.config import RunConfig
    from normvar_core.pipeline import batches as B
    from normvar_core.pipeline.corpus.read import load_sentences
    from normvar_core.pipeline.execute.heap import reuse_heap, trim_if_grown
    from normvar_core.pipeline.models import load_model

    if heap:
        reuse_heap()
    cfg = RunConfig(model="minilm", max_sentences=n)
    corpus = load_sentences(cfg, data_dir)
    loaded = load_model(cfg, data_dir)
    batches, _ = B.make_batches(
        corpus.sentences,
        loaded.tokenizer,
        max_length=loaded.info.max_length,
        max_tokens=B.auto_max_tokens(loaded.device.type),
    )
    with torch.inference_mode():
        for b in batches:
            out = loaded.model(
                input_ids=torch.as_tensor(b.input_ids),
                attention_mask=torch.as_tensor(b.attention_mask),
                output_hidden_states=True,
            )
            del out
            if heap:
                trim_if_grown()


def run_marks(cfg, data_dir: str) -> dict:
    """``compute_run(cfg)`` in this process; {"start", "last_batch", "end", "stages"}: wall clock (time.time) at its
    start, when its last forward batch was done, at its end (the run file published), and each stage's first
    report. end − last_batch is the tail: the measures' results and the write."""
    from normvar_core.pipeline.execute.local import compute_run

    marks: dict = {}

    def progress(p) -> None:
        if p.stage in ("forward", "compute"):
            marks["last_batch"] = time.time()
        marks.setdefault(p.stage, time.time())

    start = time.time()
    compute_run(cfg, data_dir, progress=progress, overwrite=True)
    return {"start": start, "last_batch": marks["last_batch"], "end": time.time(), "stages": marks}


TAIL_VARIANTS = {"default": {}, "default_no_new": {"neighbourhoods": False, "layer_linearity": False}}
"""The tail part's variants: RunConfig options beside the default compute's."""


def tail_main(n: int, data_dir: str, variant: str = "default") -> None:
    """A compute (``TAIL_VARIANTS[variant]``) that prints (as JSON) when its last forward batch was done and when it
    ended."""
    from normvar_core.config import RunConfig

    cfg = RunConfig(model="minilm", max_sentences=n, name="tail", **TAIL_VARIANTS[variant])
    print(json.dumps(run_marks(cfg, data_dir)))


CPU: dict = {}
"""tuple(cmd) -> [(user, system) seconds of each run]."""


def _timed(cmd: list[str]) -> tuple[float, str]:
    """Wall seconds of the whole process (and its user and system CPU seconds in CPU[tuple(cmd)])."""
    t0 = time.time()
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, env=_env(), cwd=ROOT, capture_output=True, text=True)
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    CPU.setdefault(tuple(cmd), []).append((u1.ru_utime - u0.ru_utime, u1.ru_stime - u0.ru_stime))
    return time.time() - t0, r.stdout


def _cpu(cmd: list[str]) -> tuple[float, float, float]:
    """Medians of (user + system, user, system) CPU seconds of ``cmd``'s runs."""
    runs = CPU[tuple(cmd)]
    return (
        statistics.median(u + s for u, s in runs),
        statistics.median(u for u, _ in runs),
        statistics.median(s for _, s in runs),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tail-sentences", default="600", help="comma-separated corpus sizes of the tail part")
    ap.add_argument(
        "--tail-variants",
        default="default",
        help=f"comma-separated variants of the tail part: {', '.join(TAIL_VARIANTS)}",
    )
    ap.add_argument("--bare", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--heap", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tail", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--data-dir", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: cost, tail")
    ap.add_argument(
        "--variants",
        default="default,lean,bare,bare_heap",
        help="comma-separated variants of the cost part (bare is always run: the ratios' base)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="OMP_NUM_THREADS for every measured process (default: torch's own choice)",
    )
    args = ap.parse_args()
    if args.threads:
        THREADS.append(int(args.threads))
    if args.bare is not None:
        return bare_main(args.bare, args.data_dir, heap=args.heap)
    if args.tail is not None:
        return tail_main(args.tail, args.data_dir, args.tail_variants)
    data_dir = tempfile.mkdtemp(prefix="normvar-bench-cost-")
    py = sys.executable
    cli = [
        py,
        "-m",
        "normvar_core.service.cli",
        "compute",
        "--quiet",
        "--overwrite",
        "--data-dir",
        data_dir,
        "--name",
        "bench",
    ]
    variants = {
        "default": cli + ["--max-sentences", str(args.sentences)],
        "lean": cli + ["--max-sentences", str(args.sentences), "--no-geometry", "--self-similarity", "off"],
        # the lean run without the layer linearity (on by default, and the lean run's one exact float64 product)
        "lean_no_linearity": cli
        + ["--max-sentences", str(args.sentences), "--no-geometry", "--self-similarity", "off", "--no-layer-linearity"],
        # a foreground compute checkpoints by default (every 30 s, and after the occurrences' early pass)
        "default_no_checkpoint": cli + ["--max-sentences", str(args.sentences), "--no-checkpoint"],
        # without GRIDE and the neighbourhood overlap, CKA and the linearity score (on in the default)
        "default_no_new": cli + ["--max-sentences", str(args.sentences), "--no-neighbourhoods", "--no-layer-linearity"],
        # the occurrences apart: what their early batches and projections add to each variant
        "default_no_occurrences": cli + ["--max-sentences", str(args.sentences), "--occurrences", "0"],
        "lean_no_occurrences": cli
        + ["--max-sentences", str(args.sentences), "--no-geometry", "--self-similarity", "off", "--occurrences", "0"],
        "bare": [py, str(Path(__file__).resolve()), "--bare", str(args.sentences), "--data-dir", data_dir],
        "bare_heap": [
            py,
            str(Path(__file__).resolve()),
            "--bare",
            str(args.sentences),
            "--data-dir",
            data_dir,
            "--heap",
        ],
    }
    wanted = set(filter(None, args.variants.split(","))) | {"bare"}
    if wanted - set(variants):
        sys.exit(f"bench_cost.py: unknown variant(s) {sorted(wanted - set(variants))}; use {', '.join(variants)}")
    variants = {k: v for k, v in variants.items() if k in wanted}
    skip = set(filter(None, args.skip.split(",")))
    _timed(cli + ["--max-sentences", "100"])  # warm-up: numba's on-disk cache, the OS file cache
    load = [os.getloadavg()[0]]
    lines = [
        f"MiniLM, the shipped novels, whole processes, alternated, median of {args.repeat}; "
        f"{os.cpu_count()} cores; torch threads {args.threads or 'default'}"
    ]
    if "cost" not in skip:
        times: dict = {k: [] for k in variants}
        for _ in range(args.repeat):
            for k, cmd in variants.items():
                times[k].append(_timed(cmd)[0])
                load.append(os.getloadavg()[0])
                u, st = CPU[tuple(cmd)][-1]
                print(
                    f"# {k}: wall {times[k][-1]:.1f} s, CPU {u + st:.1f} s (user {u:.1f}, system {st:.1f}), "
                    f"load {load[-1]:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
        med = {k: statistics.median(v) for k, v in times.items()}
        cpu = {k: _cpu(cmd) for k, cmd in variants.items()}
        base = "bare_heap" if "bare_heap" in variants else "bare"
        lines += [
            "",
            f"{args.sentences:,} sentences:",
            "",
            "| variant | wall, runs (s) | wall median (s) | / bare | / bare, run's heap | CPU median (s) | "
            "user / system (s) | CPU / bare |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for k, label in (
            ("bare", "bare forward, output_hidden_states"),
            ("bare_heap", "bare forward, the run's heap set-up"),
            ("default", "default `normvar compute`"),
            ("lean", "`--no-geometry --self-similarity off`"),
            ("lean_no_linearity", "lean, `--no-layer-linearity`"),
            ("default_no_checkpoint", "default, `--no-checkpoint`"),
            ("default_no_new", "default, `--no-neighbourhoods --no-layer-linearity`"),
            ("default_no_occurrences", "default, `--occurrences 0`"),
            ("lean_no_occurrences", "lean, `--occurrences 0`"),
        ):
            if k not in variants:
                continue
            lines.append(
                f"| {label} | {', '.join(f'{t:.1f}' for t in times[k])} | {med[k]:.1f} | "
                f"{med[k] / med['bare']:.2f}x | {med[k] / med[base]:.2f}x | {cpu[k][0]:.1f} | "
                f"{cpu[k][1]:.1f} / {cpu[k][2]:.1f} | {cpu[k][0] / cpu['bare'][0]:.2f}x |"
            )
    if "tail" not in skip:
        sizes = [int(x) for x in args.tail_sentences.split(",") if x]
        kinds = [v for v in args.tail_variants.split(",") if v]
        if set(kinds) - set(TAIL_VARIANTS):
            sys.exit(f"bench_cost.py: unknown tail variant(s) {sorted(set(kinds) - set(TAIL_VARIANTS))}")
        shares: dict = {(n, v): [] for n in sizes for v in kinds}
        walls: dict = {key: [] for key in shares}
        for _ in range(args.repeat):
            for n, v in shares:  # alternated: every size and variant once per round
                t0 = time.time()
                _, out = _timed(
                    [py, str(Path(__file__).resolve()), "--tail", str(n), "--tail-variants", v, "--data-dir", data_dir]
                )
                m = json.loads(out.strip().splitlines()[-1])
                wall = m["end"] - t0
                walls[n, v].append(wall)
                shares[n, v].append((m["end"] - m["last_batch"]) / wall)
                load.append(os.getloadavg()[0])
                print(
                    f"# tail {n} {v}: wall {wall:.1f} s, after the last batch {shares[n, v][-1] * 100:.1f} %, "
                    f"load {load[-1]:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
        lines.append("")
        for (n, v), sh in shares.items():
            lines.append(
                f"{n} sentences, {v} compute: wall {statistics.median(walls[n, v]):.1f} s, after the last "
                f"forward batch {statistics.median(sh) * 100:.1f} % (runs: "
                f"{', '.join(f'{s * 100:.0f} %' for s in sh)})"
            )
    lines.append(f"\nload average (1 min) during the runs: min {min(load):.1f}, max {max(load):.1f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
