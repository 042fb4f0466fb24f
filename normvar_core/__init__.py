"""normvar_core — exact moments of contextualized embeddings (Yamagiwa & Shimodaira, 2024).

Data flow, one module per step:
    corpus.py (text → sentences) → batches.py (sentences → token batches → hidden states)
    → moments.py (TokenMoments → TokenStats) → runfile.py (DuckDB run file)
    → analyses.py (the study's figures as tidy tables) → figures.py (plotly figures).
compute.py drives the pipeline; jobs.py queues it for the background worker.
"""
from .config import RunConfig
from .errors import NormvarError
from .moments import TokenMoments, TokenStats

__all__ = ["RunConfig", "NormvarError", "TokenMoments", "TokenStats"]
__version__ = "0.1.0"
