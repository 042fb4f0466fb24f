"""The shown side of the measure declarations (issue 36): every figure builder, slide and claim rule a measure
names resolves, in the layer that owns it; every figure names a page of the dashboard; the deck keeps its slides
in today's order; the findings and the split-half quantities are the core ones plus the declared ones."""
from __future__ import annotations

from pathlib import Path

import pytest

from normvar_core.measure import all_measures, resolve
from normvar_core.viz.pages import PAGE_KEYS, sections

FIGURES = [(m, f) for m in all_measures() for f in m.figures]


@pytest.mark.parametrize("m,f", FIGURES, ids=[f"{m.name}:{f.key}" for m, f in FIGURES])
def test_declared_figures_resolve_in_their_layer(m, f):
    assert callable(resolve(f.builder)) and f.builder.startswith("normvar_core.viz.")
    assert f.page in PAGE_KEYS and (m, f) in sections(f.page) and f.tables
    assert f.slide is None or (f.slide.startswith("normvar_core.report.") and callable(resolve(f.slide)))


def test_declared_claims_and_spectral_columns_resolve_in_stats():
    refs = [c.rule for m in all_measures() for c in m.claims] + [r for m in all_measures() for _, r in m.spectral]
    assert refs and all(r.startswith("normvar_core.stats.") and callable(resolve(r)) for r in refs)
    keys = [(f.page, f.key) for _, f in FIGURES]
    assert len(keys) == len(set(keys))                          # a figure key is its page's widget key and tab slug


def test_the_deck_and_the_findings_keep_their_order():
    from normvar_core.report.slides import REGISTRY
    from normvar_core.stats.claims import CLAIM_IDS
    from normvar_core.stats.intervals import SPLIT_QUANTITIES

    names = [getattr(b, "__name__", None) or b.func.__name__ for b in REGISTRY]
    assert names == ["findings_slide", "title_slide", "tradeoff_slide", "layers_slide", "decomposition_slide",
                     "frequency_slide", "clouds_slide", "geometry_slide", "figure_slide"]
    assert CLAIM_IDS == ("identity", "cv_min_intermediate", "tradeoff_slope", "vw_share_grows", "m_grows_vb_shrinks",
                         "null_vs_run", "anisotropy_profile", "id_profile", "isoscore_low", "position0_share")
    assert SPLIT_QUANTITIES == ("m_over_q", "v_over_q", "v_w_over_q", "v_b_over_q", "v_w_over_v", "anisotropy",
                                "isoscore", "q_share_pos0")
    assert [f.key for _, f in sections("geometry")] == ["profiles", "spectrum", "isoscore"]


def test_every_page_with_tabs_draws_its_declared_figures_from_the_declarations():
    """A page that shows figures as tabs and has figures declared for it draws its tabs through
    ``views/_sections.draw`` (the declared ones first, in measure order, then the page's own), so a declared
    figure's key is its tab's ``?section=`` slug and its section the tab's title, and no page lists them by hand."""
    views = Path(__file__).resolve().parent.parent / "views"
    pages = {f.page for _, f in FIGURES}
    tabbed = {p for p in pages if "sections(" in (views / f"{p}.py").read_text()
              or "_sections.draw(" in (views / f"{p}.py").read_text()}
    assert {"geometry", "frequency", "decomposition", "outliers", "clouds"} <= tabbed
    for p in tabbed:
        src = (views / f"{p}.py").read_text()
        assert "_sections.draw(" in src and "_chrome.sections(" not in src and "draw_sections(" not in src, p


def test_a_declared_slide_names_a_column_without_values_instead_of_failing():
    """``figure_slide``'s takeaway over a run whose declared column is NaN in every layer (a degenerate
    covariance): "undefined", not pandas' all-NA error that would stop the whole deck."""
    import numpy as np
    import pandas as pd

    from normvar_core.report.slides import _column_range

    t = pd.DataFrame({"layer": [0, 1, 2], "isoscore": [np.nan, 0.2, 0.3]})
    assert _column_range(t, "isoscore") == "isoscore 0.200–0.300 (largest at layer 2)"
    assert _column_range(t.assign(isoscore=np.nan), "isoscore") == "isoscore undefined"
