"""The memory plan against the measured peak on shapes it was not tuned on: for each row of ``SHAPES`` (random-init
BERT encoders and Llama decoders, d from 256 to 2,048, 2 to 24 layers, MLPs from 128 to 4·d wide, 500 to 20,000
sentences, with and without the occurrences), ``normvar plan --json`` (no weights) against the peak RSS of
``normvar compute`` with the same options, each in its own process (``tests/peak_rss.plan_and_peak``: VmHWM of
the child), CPU, ``--batch-size 32``.

Target: every ratio peak / plan host figure in [0.80, 1.00] (docs/scale.md, "The plan on any shape"); a row outside
it is flagged. Prints one markdown row per shape as it ends. ``--lean-measures`` adds ``--no-neighbourhoods
--no-layer-linearity`` to every run (the default runs have them); ``--tiny`` runs the selected rows' kinds and
options at d = 64, 2 layers, 40 sentences (checks the script in seconds; its ratios measure nothing: the runtime
dominates). The last rows run the offline decoder aliases (SmolLM2, Gemma 3 270M when installed) with every
measure on.
Usage: .venv/bin/python benchmarks/bench_plan_peak.py [--only 1,3] [--lean-measures] [--tiny] [--sentences N] [--list]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

LOW, HIGH = 0.80, 1.00  # the target band of peak / plan


class Shape(NamedTuple):
    kind: str  # "encoder" (BERT, MiniLM's WordPiece), "decoder" (Llama, a 500-token BPE) or an offline alias
    dim: int
    layers: int
    intermediate: int
    sentences: int
    occurrences: bool  # False: --occurrences 0
    why: str


SHAPES: tuple[Shape, ...] = (
    Shape("decoder", 1024, 8, 128, 3000, True, "the shape the plan was last checked on"),
    Shape("decoder", 1024, 16, 128, 900, True, "the shape that gave 0.94 in the last check"),
    Shape("decoder", 256, 24, 1024, 3000, True, "many thin layers, a 4·d MLP"),
    Shape("decoder", 2048, 2, 128, 1500, False, "the widest d, two layers, no occurrences"),
    Shape("decoder", 512, 6, 2048, 5000, False, "a 4·d MLP, no occurrences"),
    Shape("encoder", 256, 4, 1024, 20000, False, "the most sentences, no occurrences"),
    Shape("encoder", 768, 12, 3072, 500, True, "bert-base: the weights weigh"),
    Shape("encoder", 2048, 2, 512, 1000, True, "the widest encoder"),
    Shape("smollm2", 576, 31, 1536, 300, True, "a real decoder (SmolLM2-135M), every measure on (--every-measure)"),
    Shape("gemma3-270m", 640, 19, 2048, 300, True, "a real decoder (Gemma 3 270M), every measure on, if installed"),
)
ALIASES = ("smollm2", "gemma3-270m")
"""Rows that run a real pretrained decoder by its alias (``normvar models``), not a random-init shape: dim, layers
and MLP are the model's own, for the table only."""
EVERY = ["--prompt-entropy"]
"""The opt-in measures (with the defaults: every measure on; the neighbourhoods and the linearity are defaults)."""

HEADER = (
    "| # | kind | d | layers | MLP | sentences | occurrences | weights (MB) | state (MB) | early pass (MB) "
    "| plan host (MB) | peak RSS (MB) | peak / plan | seconds |"
)


def build(shape: Shape, root: Path) -> Path | str:
    if shape.kind in ALIASES:
        return shape.kind
    from model_dirs import build_decoder, build_encoder

    builder = build_encoder if shape.kind == "encoder" else build_decoder
    return builder(root, dim=shape.dim, layers=shape.layers, intermediate=shape.intermediate)


def measure(shape: Shape, root: Path, extra: list[str]) -> dict:
    """plan_and_peak's answer for ``shape`` (its model built under ``root``, removed after)."""
    from peak_rss import corpus_of, plan_and_peak

    model = build(shape, root)
    options = ["--batch-size", "32", *([] if shape.occurrences else ["--occurrences", "0"]), *extra]
    if shape.kind in ALIASES:
        options += [o for o in EVERY if o not in options]
    try:
        return plan_and_peak(model, corpus_of(root / "c.txt", shape.sentences), root / "data", *options)
    finally:
        if shape.kind not in ALIASES:
            shutil.rmtree(model, ignore_errors=True)
        shutil.rmtree(root / "data", ignore_errors=True)


def row(i: int, shape: Shape, r: dict) -> str:
    """The markdown row of shape ``i``; the ratio in bold, with a warning, when outside [LOW, HIGH]."""
    p, mb = r["plan"], 2**20
    state = sum(b for k, b in p["measures"].items() if k not in p["dropped"])
    ratio = r["peak"] / p["total_bytes"]
    shown = f"{ratio:.2f}" if LOW <= ratio <= HIGH else f"**{ratio:.2f} (outside {LOW:.2f}–{HIGH:.2f})**"
    cells = (
        i,
        shape.kind,
        f"{shape.dim:,}",
        shape.layers,
        f"{shape.intermediate:,}",
        f"{shape.sentences:,}",
        "on" if shape.occurrences else "0",
        f"{p['weights_bytes'] / mb:,.0f}",
        f"{state / mb:,.0f}",
        f"{p['early_pass']['bytes'] / mb:,.0f}",
        f"{p['total_bytes'] / mb:,.0f}",
        f"{r['peak'] / mb:,.0f}",
        shown,
        f"{r['secs']:.0f}",
    )
    return "| " + " | ".join(map(str, cells)) + " |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated row numbers of the shape table (1-based; --list)")
    ap.add_argument(
        "--lean-measures", action="store_true", help="every run with --no-neighbourhoods --no-layer-linearity"
    )
    ap.add_argument(
        "--tiny",
        action="store_true",
        help="d = 64, 2 layers, MLP 128, 40 sentences for every row "
        "selected: checks the script, its ratios measure nothing",
    )
    ap.add_argument("--list", action="store_true", help="print the shape table and exit")
    ap.add_argument("--sentences", type=int, default=0, help="the sentences of every row selected (0: the table's)")
    args = ap.parse_args()
    try:
        picked = sorted({int(x) for x in args.only.split(",") if x.strip()}) or list(range(1, len(SHAPES) + 1))
    except ValueError:
        print(f"bench_plan_peak: --only takes row numbers such as 1,3, got {args.only!r}", file=sys.stderr)
        return 2
    if any(not 1 <= i <= len(SHAPES) for i in picked):
        print(f"bench_plan_peak: --only takes row numbers from 1 to {len(SHAPES)} (see --list)", file=sys.stderr)
        return 2
    if args.list:
        for i, s in enumerate(SHAPES, 1):
            print(
                f"{i}. {s.kind}, d = {s.dim:,}, {s.layers} layers, MLP {s.intermediate:,}, {s.sentences:,} "
                f"sentences, occurrences {'on' if s.occurrences else '0'}: {s.why}"
            )
        return 0
    extra = ["--no-neighbourhoods", "--no-layer-linearity"] if args.lean_measures else []
    print(
        f"CPU, --batch-size 32{' ' + ' '.join(extra) if extra else ''}"
        f"{' (--tiny: not a measurement)' if args.tiny else ''}"
        f"; target peak / plan in [{LOW:.2f}, {HIGH:.2f}]\n"
    )
    print(HEADER)
    print("|" + "---|" * 7 + "---:|" * 7, flush=True)
    outside = []
    for i in picked:
        shape = SHAPES[i - 1]
        if shape.kind in ALIASES:
            from normvar_core.pipeline.models.aliases import alias_installed

            if not alias_installed(shape.kind):
                print(f"| {i} | {shape.kind} | not installed (normvar models --install) |", flush=True)
                continue
        if args.tiny and shape.kind not in ALIASES:
            shape = shape._replace(dim=64, layers=2, intermediate=128, sentences=40)
        if args.sentences:
            shape = shape._replace(sentences=args.sentences)
        root = Path(tempfile.mkdtemp(prefix="normvar-peak-"))
        try:
            r = measure(shape, root, extra)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(row(i, shape, r), flush=True)
        if not LOW <= r["peak"] / r["plan"]["total_bytes"] <= HIGH:
            outside.append(i)
    if outside:
        print(f"\noutside [{LOW:.2f}, {HIGH:.2f}]: row{'s' if len(outside) > 1 else ''} {', '.join(map(str, outside))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
