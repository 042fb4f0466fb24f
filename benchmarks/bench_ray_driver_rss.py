"""The Ray driver's peak memory (issue 32: the driver loads no weights), MiniLM on the shipped novels.

One Ray run (a private local Ray, 2 CPU actors) of the first N sentences; prints the driver process's
``ru_maxrss`` when the pass starts (the plan phase: before issue 32 the model load and the occurrences' early
batches ran here) and at the end (the merge and the publish), the wall seconds and the load average. Run it
from an older tree's folder with PYTHONPATH on it for the "before" figures (Ray's actors import from the
driver's working folder).
Usage: .venv/bin/python benchmarks/bench_ray_driver_rss.py [--sentences 2000]
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import tempfile
import time
from pathlib import Path

CORPUS = Path("/work/shared/corpora/novels_en.txt.gz")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=2000)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import ray

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.execute.local import compute_run

    out = Path(tempfile.mkdtemp(prefix="nvrss"))
    with gzip.open(CORPUS, "rt") as f:
        (out / "c.txt").write_text("".join(line for _, line in zip(range(args.sentences), f)))
    at: dict = {}

    def progress(p) -> None:
        if p.stage == "compute" and "plan" not in at:  # the plan phase is over: the actors' pass begins
            at["plan"] = peak_mib()

    t = time.time()
    cfg = RunConfig(model="minilm", corpus=str(out / "c.txt"), name="rss", executor="ray", workers=2, batch_size=32)
    try:
        compute_run(cfg, out, progress=progress)
    finally:
        ray.shutdown()
    print(
        f"driver peak RSS through the plan {at.get('plan', float('nan')):,.0f} MiB, whole run {peak_mib():,.0f} MiB; "
        f"{time.time() - t:.0f} s; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
