"""The run-file tables of each measure, as plain data (no torch): what the measure classes write
(``pipeline/measures``: their ``table_names``), what the reader checks, and how a file older than the
run row's ``accumulators`` column says which measures it holds.

- ``MEASURE_TABLES``: {measure: the tables it writes}, in the measures' order (the run row's
  ``accumulators`` order);
- ``REQUIRED_TABLES``: {measure: the tables every run holding it has} (``runs/integrity.damage`` checks them);
- ``LEGACY_MARKERS``: {table: measure} for files without the ``accumulators`` column: a file holding the
  table holds the measure.

A measure that is not built in is not listed here: the run file records its tables (``runs.declared``).
"""
from __future__ import annotations

MOMENTS_TABLES = ("token_stats", "token_means", "layer_stats", "frequency_hist", "word_units")
SAMPLES_TABLES = ("samples",)
GEOMETRY_TABLES = ("layer_geometry", "layer_spectrum", "pair_cosines", "twonn_decimation")
SELFSIM_TABLES = ("token_selfsim",)
OUTLIERS_TABLES = ("dim_stats", "top_activations", "layer_outliers")
HALVES_TABLES = ("halves_layer", "intervals")
OCCURRENCES_TABLES = ("occurrences", "occurrence_axes")

MEASURE_TABLES: dict[str, tuple[str, ...]] = {
    "moments": MOMENTS_TABLES,
    "samples": SAMPLES_TABLES,
    "geometry": GEOMETRY_TABLES,
    "selfsim": SELFSIM_TABLES,
    "outliers": OUTLIERS_TABLES,
    "halves": HALVES_TABLES,
    "occurrences": OCCURRENCES_TABLES,
}

REQUIRED_TABLES: dict[str, tuple[str, ...]] = {
    "moments": ("token_stats", "token_means", "layer_stats", "frequency_hist"),
    "samples": ("samples",),
}

LEGACY_MARKERS: dict[str, str] = {"token_stats": "moments", "samples": "samples"}

__all__ = ["MEASURE_TABLES", "REQUIRED_TABLES", "LEGACY_MARKERS", "MOMENTS_TABLES", "SAMPLES_TABLES",
           "GEOMETRY_TABLES", "SELFSIM_TABLES", "OUTLIERS_TABLES", "HALVES_TABLES", "OCCURRENCES_TABLES"]
