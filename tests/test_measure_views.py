"""What the pages, the deck and the findings show: every page's figures (``viz.page_figures``) are on a page of the
dashboard, once each, and read tables and columns that run files hold; on a real run every figure, slide and claim
draws (whatever the registries hold); every tabbed page draws its figures through ``views/_sections.draw``; and one
predicate (``page_figures.holds``) decides, for the page and the deck, whether a run holds a figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from normvar_core.viz.page_figures import FIGURES, ISOSCORE, OVERLAP, figures, holds
from normvar_core.viz.pages import PAGE_KEYS

ALL = [(page, f) for page, fs in FIGURES.items() for f in fs]


def test_every_figure_is_on_a_page_once_and_reads_tables_a_run_file_holds():
    import numpy as np

    from normvar_core.pipeline.measures import MEASURES
    from normvar_core.stats.layer_geometry import SPECTRAL_COLUMNS, layer_row

    written = {t for cls in MEASURES for t in cls.table_names}  # the tables the registry's measures write
    assert set(FIGURES) <= set(PAGE_KEYS)
    for page, f in ALL:
        assert f.tables and set(f.tables) <= written, (page, f.key)
        assert callable(f.builder) and f.builder.__module__.startswith("normvar_core.viz."), (page, f.key)
    keys = [(page, f.key) for page, f in ALL]
    assert len(keys) == len(set(keys))  # a figure key is its page's widget key and tab slug
    # IsoScore's column is a spectral column, in every layer_geometry row (whose layer the writer adds)
    row, _ = layer_row(
        np.diag([3.0, 2.0, 1.0]), np.zeros((0, 3)), n=10, sum_u_sq=4.0, n_u=10, norm_sum=10.0, sq_sum=20.0
    )
    assert ISOSCORE.tables[0] == "layer_geometry" and set(ISOSCORE.columns) <= set(SPECTRAL_COLUMNS) & set(row)
    with pytest.raises(KeyError):
        figures("no-such-page")
    assert figures("runs") == ()


def test_every_figure_slide_and_claim_draws_on_a_real_run(run):
    """On a real run holding every measure (the dashboard's MiniLM run): every figure of every page holds
    (``holds``: its tables and columns are in the file), every builder of the deck (``REGISTRY``) gives its slide,
    every claim (``CLAIMS``, each rule the function of its id) gives a finding with a verdict, in order, and the
    ``intervals`` table holds every split-half quantity in ``SPLIT_QUANTITIES`` order."""
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.measures import MEASURES
    from normvar_core.report.slides import REGISTRY, build_slides
    from normvar_core.stats.findings import CLAIM_IDS, CLAIMS, findings
    from normvar_core.stats.intervals import SPLIT_QUANTITIES

    assert set(run.measures) >= {c.name for c in MEASURES if c.asked(RunConfig.from_dict(run.meta["options"]))}
    assert [(page, f.key) for page, f in ALL if not holds(run, f)] == []
    slides = build_slides([run])
    # one slide per builder, and one per figure drawn below the overlap in its tab; the declared curves' builder
    # gives one per curve the run's measures declare
    assert len(slides) == len(REGISTRY) - 1 + len(OVERLAP.below) + len(run.curves)
    assert all(s.title and s.takeaway for s in slides)
    assert len(CLAIM_IDS) == len(set(CLAIM_IDS)) and all(c.rule.__name__ == c.id for c in CLAIMS)
    found = findings(run, resamples=50)  # 50 resamples: the verdicts' wording, not their intervals, is checked
    assert [f.id for f in found] == list(CLAIM_IDS) and all(f.verdict for f in found)
    quantities = list(dict.fromkeys(run.table("intervals")["quantity"]))
    assert [q for q in quantities if q in SPLIT_QUANTITIES] == list(SPLIT_QUANTITIES)


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

    from normvar_core.report.figure_reads import column_range

    t = pd.DataFrame({"layer": [0, 1, 2], "isoscore": [np.nan, 0.2, 0.3]})
    assert column_range(t, "isoscore", "IsoScore ι") == "IsoScore ι 0.200–0.300 (largest at layer 2)"
    assert column_range(t.assign(isoscore=np.nan), "isoscore", "IsoScore ι") == "IsoScore ι undefined"


def _named_tables(paths) -> set[str]:
    """Every string literal in the Python files ``paths`` (a page or a slide names the tables it reads)."""
    import ast

    return {
        n.value
        for p in paths
        for n in ast.walk(ast.parse(Path(p).read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def unshown(registry) -> list[str]:
    """The measures of ``registry`` of which nothing is on a page or a slide: no declared curve (a tab of its page
    and a slide, from the run file), none of their tables read by a figure of ``FIGURES`` (a tab and its slide) and
    none named by a page (``views/*.py``) or a slide builder (``normvar_core/report/``)."""
    root = Path(__file__).resolve().parent.parent
    shown = {t for _, f in ALL for g in (f, *f.below) for t in g.tables}
    shown |= _named_tables([*(root / "views").glob("*.py"), *(root / "normvar_core" / "report").glob("*.py")])
    return [cls.name for cls in registry if not cls.curves and not set(cls.table_names) & shown]


def test_every_registered_measure_is_on_a_page_or_a_slide():
    """Each measure of ``MEASURES`` shows something: a declared curve, or a table that a page's figure, a page or a
    slide reads; a measure whose tables nothing reads is named (a made-up one, registered beside them)."""
    from normvar_core.pipeline.measures import MEASURES, Measure

    class Unread(Measure):
        name, table_names = "unread", ("nowhere_read",)

    assert unshown(MEASURES) == []
    assert unshown((*MEASURES, Unread)) == ["unread"]
