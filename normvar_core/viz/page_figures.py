"""Each page's figures, listed by import: for the pages of ``viz.pages`` that show figures as tabs, the figures
in tab order, each with its key (the chart's widget key and the tab's ``?section=`` slug), the tab's title, the
builder (a ``viz`` function), the run-file tables it reads and the per-layer columns it needs in the first of
them. ``views/_sections.draw`` makes the tabs; ``report.slides`` puts figures in the deck. :func:`holds` is the one
test of whether a run holds what a figure reads, for the page and the deck alike.

A figure that the page does not draw itself is drawn by its builder with the generic arguments
``builder(curves, *, relative, num_hidden_states, presentation, bands, null_curves, null_of)`` (IsoScore's);
``measure`` names what it shows to a run without it; ``below`` are further figures drawn the same way under it in
its tab (the overlap against k under the overlap between layers).

Beside these, a page shows the per-layer curves that its runs' measures declare (``runs.declared.LayerCurve``,
carried by the run file): ``figures(page, runs)`` gives them after the page's own, each drawn by
``curve_figures.layer_curve_figure`` (:func:`declared_figure`), so a measure that declares a curve needs no line
here."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

from normvar_core.runs.declared import LayerCurve
from normvar_core.viz.cloud_figures import clouds_figure
from normvar_core.viz.curve_figures import layer_curve_figure
from normvar_core.viz.decomposition_figures import decomposition_bars
from normvar_core.viz.frequency_figures import corpus_histograms, frequency_scatter, frequency_slopes, histograms_figure
from normvar_core.viz.geometry_figures import (
    decimation_figure,
    geometry_profiles,
    outlier_heatmap,
    selfsim_scatter,
    shares_figure,
    spectra_figure,
)
from normvar_core.viz.isoscore_figures import isoscore_figure
from normvar_core.viz.neighbourhood_figures import overlap_figure, overlap_k_figure, scales_figure
from normvar_core.viz.pages import PAGE_KEYS
from normvar_core.viz.tradeoff_figures import layers_figure, tradeoff_scatter


@dataclass(frozen=True)
class Figure:
    """A tab of a page: ``key`` (widget key and ``?section=`` slug, unique on its page), ``section`` (the tab's
    title, and its slide's), ``builder``, the ``tables`` it reads, the per-layer ``columns`` it needs in the first of
    them (absent from a run file written before they were measured), the ``measure`` it shows, named to a run
    without it, the figures drawn ``below`` it in its tab (each on the runs that hold it) and ``tab``, a shorter
    label for the tab strip when the title is long (every tab of a page stays in view at 1280 px)."""

    key: str
    section: str
    builder: Callable
    tables: tuple[str, ...]
    columns: tuple[str, ...] = ()
    measure: str = ""
    below: tuple[Figure, ...] = ()
    tab: str = ""

    @property
    def label(self) -> str:
        """The tab's label: ``tab``, else the title (``section``)."""
        return self.tab or self.section


ISOSCORE = Figure(
    "isoscore",
    "IsoScore per layer",
    isoscore_figure,
    ("layer_geometry",),
    columns=("isoscore",),
    measure="IsoScore",
    tab="IsoScore",
)
"""IsoScore per layer (``stats.isoscore``): on the Geometry page and in the deck, drawn by the generic builder."""

DECIMATION = Figure(
    "decimation",
    "TwoNN decimation",
    decimation_figure,
    ("twonn_decimation",),
    columns=("twonn_id", "twonn_id_cross"),
    measure="TwoNN's decimation curve",
)
"""TwoNN on decimated batches, Razzhigaev et al.'s and the cross-context estimate (``stats.twonn_context``): on the
Geometry page and in the deck, drawn by the generic builder."""

SCALES = Figure(
    "scales",
    "ID across scales",
    scales_figure,
    ("layer_gride",),
    columns=("gride_id",),
    measure="GRIDE's intrinsic dimension across scales",
)
"""GRIDE at n1 = 1 … 64, unmasked and with the own sentence masked (``pipeline.measures.neighbourhoods``): on the
Geometry page and in the deck, drawn by the generic builder (a Gaussian null's curves in grey)."""

OVERLAP_K = Figure(
    "overlap-k",
    "Neighbourhood overlap against k",
    overlap_k_figure,
    ("overlap_curve",),
    columns=("k", "overlap", "chance"),
    measure="the neighbourhood overlap against k",
)
"""χ_k with the next layer for k = 1 … 64, unmasked and masked, beside chance k / n: under ``OVERLAP`` in its tab."""

OVERLAP = Figure(
    "overlap",
    "Neighbourhood overlap",
    overlap_figure,
    ("layer_overlap",),
    columns=("overlap_next", "overlap_last"),
    measure="the neighbourhood overlap between layers",
    below=(OVERLAP_K,),
    tab="Neighbourhoods",
)
"""χ₁₀ with the next and the last layer, unmasked and masked, beside chance (``pipeline.measures.neighbourhoods``);
the overlap against k (``OVERLAP_K``) under it."""

FIGURES: dict[str, tuple[Figure, ...]] = {
    "tradeoff": (Figure("tradeoff", "Trade-off (Fig. 2)", tradeoff_scatter, ("token_stats",)),),
    "layers": (Figure("layers", "Trade-off across layers (Fig. 4)", layers_figure, ("token_stats",)),),
    "decomposition": (Figure("shares", "Shares of Q(X) (Fig. 5, 6)", decomposition_bars, ("layer_stats",)),),
    "frequency": (
        Figure("scatter", "Q, M, V against log₁₀ nₜ (Fig. 7)", frequency_scatter, ("token_stats",)),
        Figure("slopes", "Slopes per layer (Fig. 17)", frequency_slopes, ("token_stats",)),
        Figure("histograms", "Histograms (Fig. 14–16)", histograms_figure, ("token_stats",)),
        Figure("corpus", "The corpus (Fig. 9, 10)", corpus_histograms, ("frequency_hist",)),
        Figure("selfsim", "Self-similarity", selfsim_scatter, ("token_selfsim",)),
    ),
    "clouds": (Figure("cloud", "Cloud (Fig. 1, App. A)", clouds_figure, ("samples",)),),
    "geometry": (
        Figure(
            "profiles",
            "Layer geometry (Razzhigaev et al. 2024 protocol, Fig. 1)",
            geometry_profiles,
            ("layer_geometry",),
            tab="Layer geometry",
        ),
        Figure("spectrum", "Covariance spectrum", spectra_figure, ("layer_spectrum",)),
        ISOSCORE,
        SCALES,
        OVERLAP,
        DECIMATION,
    ),
    "outliers": (
        Figure("dims", "Outlier dimensions", outlier_heatmap, ("dim_stats",)),
        Figure("shares", "Shares of Q(X)", shares_figure, ("layer_outliers",)),
    ),
}
"""Page key -> its figures, in tab order (a page's own further tabs, such as tables, follow them)."""


def declared_figure(curve: LayerCurve) -> Figure:
    """The tab (and slide) of a curve a measure declares: keyed ``<table>-<column>``, titled ``curve.title``,
    drawn by ``layer_curve_figure`` from ``curve.column`` of ``curve.table``."""
    return Figure(
        curve.key,
        curve.title,
        partial(layer_curve_figure, curve=curve),
        (curve.table,),
        columns=(curve.column,),
        measure=curve.title,
    )


def declared_figures(page: str | None, runs: Iterable = ()) -> tuple[Figure, ...]:
    """The figures of the curves that ``runs`` (``runs.reader.Run``s) declare for ``page`` (every page's when
    None), each once, in the runs' order; a curve whose key a built-in figure of its page already takes is
    left out."""
    out: dict[str, Figure] = {}
    for run in runs:
        for c in run.curves:
            taken = {f.key for f in FIGURES.get(c.page, ())}
            if (page is None or c.page == page) and c.key not in taken and c.key not in out:
                out[c.key] = declared_figure(c)
    return tuple(out.values())


def figures(page: str, runs: Iterable = ()) -> tuple[Figure, ...]:
    """The figures of ``page`` (a key of ``viz.pages.PAGES``), in tab order: its own (``FIGURES``), then the
    curves that ``runs`` declare for it (:func:`declared_figures`); none for a page without figure tabs."""
    if page not in PAGE_KEYS:
        raise KeyError(f"no page {page!r}: {list(PAGE_KEYS)}")
    return FIGURES.get(page, ()) + declared_figures(page, runs)


def holds(run, f: Figure) -> bool:
    """Whether ``run`` (a ``runs.reader.Run``) holds what ``f`` reads: each of its tables, and its columns in the
    first of them (a run file written before a column was measured lacks it)."""
    if not all(run.has(t) for t in f.tables):
        return False
    return not f.columns or set(f.columns) <= set(run.table(f.tables[0]).columns)


__all__ = [
    "Figure",
    "ISOSCORE",
    "DECIMATION",
    "SCALES",
    "OVERLAP",
    "OVERLAP_K",
    "FIGURES",
    "figures",
    "declared_figure",
    "declared_figures",
    "holds",
]
