"""normvar_core — exact moments of contextualized embeddings (Yamagiwa & Shimodaira, 2024).

Layers (each imports only the ones above it; see ARCHITECTURE.md and tests/test_layers.py):
    errors, constants, config, datadir   the base: no numpy-heavy imports
    stats/      pure statistics (TokenStats, analyses, geometry): numpy/pandas, numba only lazily
    runs/       the run file: DuckDB writer and reader (no torch)
    pipeline/   plan -> state source -> measures -> merge -> publish (torch lives here)
    viz/        plotly figure builders and view state (no streamlit)
    service/    the worker, the job queue and the CLI

The public names below load lazily, so light commands (``normvar jobs``) skip torch.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_PUBLIC = {
    "RunConfig": "config",
    "NormvarError": "errors",
    "DataDir": "datadir",
    "TokenStats": "stats.tokenstats",
    "open_run": "runs.reader",
    "list_runs": "runs.reader",
    "TokenMoments": "pipeline.measures.token_moments",
    "compute_run": "pipeline.execute.local",
    "export_run": "runs.export",
    "JobStore": "service.jobs",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    raise AttributeError(f"module 'normvar_core' has no attribute {name!r}")
