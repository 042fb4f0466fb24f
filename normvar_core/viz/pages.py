"""The dashboard's page registry: one line per page (plain data, no streamlit), read by app.py for the
navigation and by the view state to validate ``?page=`` in shared links. Adding a page = one file in
views/ + one line here. The figures a page shows as tabs: ``viz.page_figures``."""

from __future__ import annotations

from typing import NamedTuple


class Page(NamedTuple):
    key: str  # ?page=<key> and the URL path
    file: str  # views/<file>
    title: str
    icon: str  # a Material icon name
    group: str  # the navigation section


PAGES: tuple[Page, ...] = (
    Page("runs", "runs.py", "Runs", "table_view", "Explore"),
    Page("findings", "findings.py", "Findings", "fact_check", "Explore"),
    Page("tradeoff", "tradeoff.py", "Trade-off", "scatter_plot", "Explore"),
    Page("layers", "layers.py", "Layers", "stacked_line_chart", "Explore"),
    Page("decomposition", "decomposition.py", "Decomposition", "stacked_bar_chart", "Explore"),
    Page("frequency", "frequency.py", "Frequency", "bar_chart", "Explore"),
    Page("clouds", "clouds.py", "Token clouds", "bubble_chart", "Explore"),
    Page("token", "token.py", "Token", "search", "Explore"),
    Page("occurrences", "occurrences.py", "Occurrences", "blur_circular", "Explore"),
    Page("geometry", "geometry.py", "Geometry", "blur_on", "Geometry"),
    Page("outliers", "outliers.py", "Outliers", "flare", "Geometry"),
    Page("highdim", "highdim.py", "High-dimensional geometry", "grain", "Geometry"),
    Page("training", "training.py", "Training", "timeline", "Geometry"),
    Page("compare", "compare.py", "Compare", "compare", "Work"),
    Page("new-run", "new_run.py", "New run", "add_circle", "Work"),
)
PAGE_KEYS: tuple[str, ...] = tuple(p.key for p in PAGES)
DEFAULT_PAGE = "runs"


__all__ = ["Page", "PAGES", "PAGE_KEYS", "DEFAULT_PAGE"]
