"""What the pages, the deck and the findings show: every page's figures (``viz.page_figures``) are on a page of the
dashboard, once each, and read tables and columns that run files hold; the deck, the claims and the split-half
quantities keep their order; every tabbed page draws its figures through ``views/_sections.draw``; and one
predicate (``page_figures.holds``) decides, for the page and the deck, whether a run holds a figure."""
from __future__ import annotations

from pathlib import Path

import pytest

from normvar_core.viz.page_figures import FIGURES, ISOSCORE, figures, holds
from normvar_core.viz.pages import PAGE_KEYS

ALL = [(page, f) for page, fs in FIGURES.items() for f in fs]


def test_every_figure_is_on_a_page_once_and_reads_tables_a_run_file_holds():
    import numpy as np

    from normvar_core.runs.schema import MEASURE_TABLES
    from normvar_core.stats.layer_geometry import SPECTRAL_COLUMNS, layer_row

    written = {t for tables in MEASURE_TABLES.values() for t in tables}
    assert set(FIGURES) <= set(PAGE_KEYS)
    for page, f in ALL:
        assert f.tables and set(f.tables) <= written, (page, f.key)
        assert callable(f.builder) and f.builder.__module__.startswith("normvar_core.viz."), (page, f.key)
    keys = [(page, f.key) for page, f in ALL]
    assert len(keys) == len(set(keys))                   # a figure key is its page's widget key and tab slug
    # IsoScore's column is a spectral column, in every layer_geometry row (whose layer the writer adds)
    row, _ = layer_row(np.diag([3.0, 2.0, 1.0]), np.zeros((0, 3)), n=10, sum_u_sq=4.0, n_u=10, norm_sum=10.0,
                       sq_sum=20.0)
    assert ISOSCORE.tables[0] == "layer_geometry" and set(ISOSCORE.columns) <= set(SPECTRAL_COLUMNS) & set(row)
    with pytest.raises(KeyError):
        figures("no-such-page")
    assert figures("runs") == ()


def test_the_deck_and_the_findings_keep_their_order():
    from normvar_core.report.slides import REGISTRY
    from normvar_core.stats.findings import CLAIM_IDS, CLAIMS
    from normvar_core.stats.intervals import SPLIT_QUANTITIES

    names = [getattr(b, "__name__", None) or b.func.__name__ for b in REGISTRY]
    assert names == ["findings_slide", "title_slide", "tradeoff_slide", "layers_slide", "decomposition_slide",
                     "frequency_slide", "clouds_slide", "geometry_slide", "figure_slide", "figure_slide",
                     "declared_slides"]
    assert CLAIM_IDS == ("identity", "cv_min_intermediate", "tradeoff_slope", "vw_share_grows", "m_grows_vb_shrinks",
                         "null_vs_run", "anisotropy_profile", "id_profile", "isoscore_low", "position0_share")
    assert all(c.rule.__name__ == c.id for c in CLAIMS)   # each claim's rule is the function of its name
    assert SPLIT_QUANTITIES == ("m_over_q", "v_over_q", "v_w_over_q", "v_b_over_q", "v_w_over_v", "anisotropy",
                                "isoscore", "q_share_pos0")
    assert [f.key for f in figures("geometry")] == ["profiles", "spectrum", "isoscore", "decimation"]


def test_every_page_with_tabs_draws_its_figures_through_sections_draw():
    """A page that shows figures as tabs draws them through ``views/_sections.draw`` (its figures first, in
    ``page_figures`` order, then the page's own), so a figure's key is its tab's ``?section=`` slug and its section
    the tab's title, and no page lists them by hand."""
    views = Path(__file__).resolve().parent.parent / "views"
    src = {p: (views / f"{p}.py").read_text() for p in FIGURES}
    tabbed = {p for p in FIGURES if "sections(" in src[p] or "_sections.draw(" in src[p]}
    assert {"geometry", "frequency", "decomposition", "outliers", "clouds"} <= tabbed
    for p in tabbed:
        assert "_sections.draw(" in src[p] and "_chrome.sections(" not in src[p] and "draw_sections(" not in src[p], p


class _Run:
    """A run's face as ``holds`` reads it: the tables it has, each with its columns."""

    def __init__(self, tables: dict):
        self.tables = tables

    def has(self, what):
        return what in self.tables

    def table(self, name):
        import pandas as pd

        return pd.DataFrame(columns=self.tables[name])


def test_a_run_holds_a_figure_with_its_tables_and_columns():
    """The one predicate of the page and the deck: every table the figure reads, and its columns in the first; a run
    file written before IsoScore was measured (no ``isoscore`` column) does not hold the IsoScore figure."""
    new = _Run({"layer_geometry": ["layer", "anisotropy", "isoscore"]})
    old = _Run({"layer_geometry": ["layer", "anisotropy"]})
    assert holds(new, ISOSCORE) and not holds(old, ISOSCORE) and not holds(_Run({}), ISOSCORE)
    profiles = figures("geometry")[0]
    assert holds(old, profiles) and not holds(_Run({"layer_spectrum": ["layer"]}), profiles)


def test_the_generic_slide_leaves_out_a_run_without_the_figure():
    """``figure_slide`` over a run that lacks the IsoScore column gives no slide (the deck goes on without it)."""
    from normvar_core.report.slides import figure_slide

    assert figure_slide(ISOSCORE, ("isoscore_low",), [_Run({"layer_geometry": ["layer", "anisotropy"]})]) is None


def test_a_figure_slide_names_a_column_without_values_instead_of_failing():
    """``figure_slide``'s takeaway over a run whose column is NaN in every layer (a degenerate covariance):
    "undefined", not pandas' all-NA error that would stop the whole deck."""
    import numpy as np
    import pandas as pd

    from normvar_core.report.slides import _column_range

    t = pd.DataFrame({"layer": [0, 1, 2], "isoscore": [np.nan, 0.2, 0.3]})
    assert _column_range(t, "isoscore") == "isoscore 0.200–0.300 (largest at layer 2)"
    assert _column_range(t.assign(isoscore=np.nan), "isoscore") == "isoscore undefined"
