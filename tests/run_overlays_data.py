"""The data directory of tests/test_browser_run_overlays.py: the dashboard tests' MiniLM run (RUN) and its
even-layer copy (RUN2), a second real MiniLM run on an *uploaded* corpus (stored through the upload
path, so it is named after the file) whose lines include sentences over the 64-word limit, and the
isotropic Gaussian null of both real runs."""

from __future__ import annotations

import gzip
import itertools
import shutil
from pathlib import Path

from dashboard_run import RUN

UPLOAD_FILE = "my corpus.txt"  # the name a researcher's file has
UPLOAD_RUN = "minilm-my-corpus"
N_UPLOAD = 160  # sentences of the uploaded corpus
LONG_SENTENCES = [" ".join(f"w{i}x{j}" for j in range(64 + 3 * i)) + "." for i in range(3)]


def null_of(name: str) -> str:
    return f"{name}__null-isotropic-s0"


def upload_lines() -> list[str]:
    from normvar_core.datadir import DEFAULT_CORPUS

    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        lines = [x.strip() for x in itertools.islice(fh, 5000, 5000 + N_UPLOAD) if x.strip()]
    return lines[:40] + LONG_SENTENCES + lines[40:]


def build_items_data(root: Path, dashboard: Path, run_null: Path) -> Path:
    """Build into ``root`` (the ``items_data`` fixture builds it once per session). ``dashboard``: the dashboard
    tests' data dir (``build_dashboard_data``), whose runs are copied here; ``run_null``: RUN's isotropic null,
    drawn once per session by ``write_null_run`` (the ``dashboard_null`` fixture), copied here."""
    from normvar_core.config import RunConfig
    from normvar_core.datadir import DataDir
    from normvar_core.pipeline.execute.local import compute_run
    from normvar_core.pipeline.execute.null_run import write_null_run
    from normvar_core.runs.reader import open_run
    from normvar_core.service.corpus_store import store_corpus

    shutil.copytree(dashboard / "runs", root / "runs", dirs_exist_ok=True)
    corpus = store_corpus(DataDir.at(root), ("\n".join(upload_lines()) + "\n").encode(), UPLOAD_FILE)
    compute_run(RunConfig(model="minilm", corpus=str(corpus), name=UPLOAD_RUN), root)
    shutil.copy(run_null, root / "runs" / f"{null_of(RUN)}.duckdb")
    write_null_run(
        open_run(root / "runs" / f"{UPLOAD_RUN}.duckdb"), "isotropic", root / "runs" / f"{null_of(UPLOAD_RUN)}.duckdb"
    )
    return root
