"""The run-file tables of each measure, as plain data (no torch): what the measure classes write
(``pipeline/measures``: their ``table_names``), what the reader checks, and how a file older than the
run row's ``accumulators`` column says which measures it holds.

- ``MEASURE_TABLES``: {measure: the tables it writes}, in the measures' order (the run row's
  ``accumulators`` order);
- ``REQUIRED_TABLES``: {measure: the tables every run holding it has} (``runs/integrity.damage`` checks them);
- ``LEGACY_MARKERS``: {table: measure} for files without the ``accumulators`` column: a file holding the
  table holds the measure;
- ``REQUIRED_COLUMNS``: {table: the columns the pages need of it}, checked where the table is present.

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

REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "token_stats": ("layer", "token_id", "token", "n", "q", "m", "v"),
    "token_means": ("layer", "token_id", "mean"),
    "layer_stats": ("layer",),
    "frequency_hist": ("log10_n_left",),
    "sentence_lengths": ("words", "count"),
    "layer_linearity": (
        "layer",
        "next_layer",
        "n",
        "cka",
        "linearity",
        "linearity_residual_free",
        "linearity_a",
        "linearity_b",
        *(f"{q}_{end}" for q in ("cka", "linearity", "linearity_residual_free") for end in ("low", "high")),
    ),
    "layer_overlap": ("layer", "overlap_next", "overlap_next_std"),
}
"""{table: the columns every page that reads it needs} (``runs.reader.open_run`` reads them; ``runs/integrity.damage``
checks them, so a file without one is listed as damaged, never opened as a run)."""

__all__ = [
    "MEASURE_TABLES",
    "REQUIRED_TABLES",
    "REQUIRED_COLUMNS",
    "LEGACY_MARKERS",
    "MOMENTS_TABLES",
    "SAMPLES_TABLES",
    "GEOMETRY_TABLES",
    "SELFSIM_TABLES",
    "OUTLIERS_TABLES",
    "HALVES_TABLES",
    "OCCURRENCES_TABLES",
]
