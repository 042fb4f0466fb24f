"""normvar_core — exact moments of contextualized embeddings (Yamagiwa & Shimodaira, 2024).

Data flow, one module per step:
    corpus.py (text → sentences) → batches.py (sentences → token batches → hidden states)
    → moments.py (TokenMoments → TokenStats) → runfile.py (DuckDB run file)
    → analyses.py (the study's figures as tidy tables) → figures.py (plotly figures).
compute.py drives the pipeline; jobs.py queues it for the background worker.

The public names below load lazily, so light commands (``normvar jobs``) skip torch.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_PUBLIC = {
    "RunConfig": "config",
    "NormvarError": "errors",
    "DataDir": "datadir",
    "TokenMoments": "moments",
    "TokenStats": "moments",
    "compute_run": "compute",
    "open_run": "runfile",
    "list_runs": "runfile",
    "JobStore": "jobs",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    raise AttributeError(f"module 'normvar_core' has no attribute {name!r}")
