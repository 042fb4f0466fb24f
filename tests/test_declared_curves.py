"""A measure shows itself by declaring its curves (``Measure.curves``: ``runs.declared.LayerCurve``): a real run of
the Gaussian source with an extra measure that is not built in (the manual's norm measure, declaring its RMS norm
per layer) carries its tables and declaration in the run file; the reader lists and reads it; the Geometry page
draws it as a tab of its own and the deck as a slide, with no registry edited. A run of the built-in measures
declares nothing and shows exactly the page's and the deck's own figures."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from dashboard_run import APP, arr, figure, ok, open_section

from examples.norm_measure import NormMeasure
from normvar_core.runs.declared import NOTES_KEY, LayerCurve
from normvar_core.runs.reader import open_run
from normvar_core.runs.schema import MEASURE_TABLES

CURVE = LayerCurve(
    "layer_norms",
    "rms_norm",
    "RMS norm per layer",
    "√E‖x‖²",
    description="the root mean square norm of a layer's embeddings, √Q(X)",
)


def registry_curves(run) -> tuple:
    """The curves that the registry's own measures declare, for a run of them (none while every registered
    measure is built in and declares none): what a run has besides the test's measure."""
    from normvar_core.pipeline.measures import MEASURES

    return tuple(c for cls in MEASURES if cls.name in run.measures for c in cls.curves)


class ShownNormMeasure(NormMeasure):
    """The manual's norm measure, declaring one curve of its table."""

    curves = (CURVE,)


def _run(path: Path, extra: tuple = ()) -> Path:
    """A run of 80 synthetic sentences (vocabulary 60, layers 0 and 1, d = 8) by the real pipeline, with the
    built-in measures and ``extra`` (``tests/gaussian_runs.py``'s run)."""
    import torch

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.execute.partials import build_measures, run_range
    from normvar_core.pipeline.execute.publish import publish_run
    from normvar_core.pipeline.measures import MEASURES
    from normvar_core.pipeline.run_plan import synthetic_plan
    from normvar_core.pipeline.sources import GaussianSource

    cfg = RunConfig(model="gaussian", samples_per_token=3)
    plan = synthetic_plan(cfg, n_sentences=80, vocab_size=60, layers=[0, 1], batch_size=16)
    source = GaussianSource(dim=8, layers=[0, 1])
    ctx = RunContext(cfg=cfg, layers=[0, 1], dim=8, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    measures = build_measures(ctx, registry=MEASURES + extra)
    run_range(source, plan, measures, 0, plan.n_batches)
    return publish_run(
        path, plan=plan, source=source, ctx=ctx, measures=measures, seconds=0.0, notes={}, source_kind="synthetic"
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A data dir holding the run with the declared curve (``shown``) and one of the built-in measures
    (``plain``)."""
    root = tmp_path_factory.mktemp("declared")
    (root / "runs").mkdir()
    _run(root / "runs" / "shown.duckdb", (ShownNormMeasure,))
    _run(root / "runs" / "plain.duckdb")
    return root


def _page(data: Path, monkeypatch, name: str, page: str = "geometry", **params):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"run": name, **params})
    at.run()
    at.switch_page(f"views/{page}.py").run()
    ok(at)
    return at


def test_the_run_file_holds_the_table_and_the_declaration(data):
    import json

    import duckdb

    assert "norms" not in MEASURE_TABLES  # not built in: known from the file alone
    with duckdb.connect(str(data / "runs" / "shown.duckdb"), read_only=True) as con:
        notes, measures = (json.loads(v) for v in con.execute("SELECT notes, accumulators FROM run").fetchone())
        rows = con.execute("SELECT layer, rms_norm FROM layer_norms ORDER BY layer").fetchall()
    assert notes[NOTES_KEY]["norms"] == {"tables": ["layer_norms"], "curves": [CURVE.to_dict()]}
    assert set(notes[NOTES_KEY]) == set(measures) and measures[-1] == "norms"  # every measure of the run
    assert notes[NOTES_KEY]["moments"]["curves"] == []
    assert [r[0] for r in rows] == [0, 1]


def test_open_run_lists_the_measure_and_reads_its_curve(data):
    run = open_run(data / "runs" / "shown.duckdb")
    assert "norms" in run.measures and run.has("norms") and run.curves == registry_curves(run) + (CURVE,)
    t = run.table("layer_norms").sort_values("layer")
    # independent ground truth: the moments' Q(X) = E‖x‖² per layer over the same embeddings; the two sums
    # are float64 in different orders (one over a layer's embeddings, one over per-type tables): 1e-9 relative
    q = run.layer_stats().sort_values("layer")["q"].to_numpy()
    np.testing.assert_allclose(t["rms_norm"].to_numpy() ** 2, q, rtol=1e-9)


def test_a_file_missing_the_declared_table_is_damaged(data, tmp_path):
    """The tables a measure declared are required: a file without them says what is missing."""
    import duckdb

    from normvar_core.errors import NormvarError

    copy = tmp_path / "cut.duckdb"
    shutil.copy(data / "runs" / "shown.duckdb", copy)
    with duckdb.connect(str(copy)) as con:
        con.execute("DROP TABLE layer_norms")
    with pytest.raises(NormvarError, match="missing table.*layer_norms"):
        open_run(copy)


def test_a_built_in_run_declares_nothing_and_shows_todays_figures(data, written_run_path):
    """The built-in measures' run (and the suite's fixture run, as the current code writes it) has no declaration in
    its notes, and each page's figures are its own only."""
    from normvar_core.viz.page_figures import FIGURES, declared_figure, figures

    for path in (data / "runs" / "plain.duckdb", written_run_path):
        run = open_run(path)
        assert (NOTES_KEY in run.meta["notes"]) == bool(registry_curves(run)) and run.curves == registry_curves(run)
        for page, own in FIGURES.items():
            declared = [declared_figure(c).key for c in run.curves if c.page == page]
            assert [f.key for f in figures(page, [run])] == [f.key for f in own] + declared


def test_the_geometry_page_shows_the_declared_curve(data, monkeypatch):
    from views._sections import MORE

    run = open_run(data / "runs" / "shown.duckdb")
    at = _page(data, monkeypatch, "shown")
    labels = [t.label for t in at.tabs]
    assert labels.count(MORE) == 1 and CURVE.title not in labels  # the declared curve: under More curves
    at = open_section(at, "geometry", CURVE.title)
    assert at.radio(key="w_curve_geometry").options.count(CURVE.title) == 1
    fig = figure(at, CURVE.title)
    [line] = [t for t in fig["data"] if t.get("name") == "shown"]
    want = run.table("layer_norms").sort_values("layer")
    np.testing.assert_array_equal(arr(line["y"]), want["rms_norm"].to_numpy())  # the table's values, as stored
    np.testing.assert_array_equal(arr(line["customdata"]), want["layer"].to_numpy())
    assert fig["layout"]["yaxis"]["title"]["text"] == CURVE.y_title


def test_compare_shows_the_declared_curve_of_the_run_that_has_it(data, monkeypatch):
    at = _page(data, monkeypatch, "plain", page="compare", run2="shown")
    fig = figure(open_section(at, "compare", CURVE.title), CURVE.title)
    assert [t["name"] for t in fig["data"] if t.get("name") in ("shown", "plain")] == ["shown"]
    assert any("plain" in c.value for c in at.caption)  # the run without it, named


def test_a_built_in_run_has_the_pages_own_tabs(data, monkeypatch):
    from normvar_core.viz.page_figures import FIGURES

    at = _page(data, monkeypatch, "plain")
    labels = [t.label for t in at.tabs]
    assert labels[: len(FIGURES["geometry"])] == [f.label for f in FIGURES["geometry"]]
    assert CURVE.title not in labels


def test_the_deck_has_a_slide_per_declared_curve(data):
    from normvar_core.report.slides import REGISTRY, build_slides, declared_slides

    shown, plain = (open_run(data / "runs" / f"{n}.duckdb") for n in ("shown", "plain"))
    slides = build_slides([shown])
    [slide] = [s for s in slides if s.title == CURVE.title]
    [line] = [t for t in slide.figure.data if t.name == "shown"]
    np.testing.assert_array_equal(np.asarray(line.y), shown.table("layer_norms").sort_values("layer")["rms_norm"])
    # the takeaway names the curve in words, never by its column
    assert CURVE.title in slide.takeaway and "rms_norm" not in slide.takeaway and "layer" in slide.notes
    # the built-in run: no declared slide, the deck of every other builder as it is
    assert [s.title for s in declared_slides([plain])] == [c.title for c in registry_curves(plain)]
    own = [b for b in REGISTRY if b is not declared_slides]
    made = [b([plain]) for b in own]  # a Slide, None, or a list of Slides (``figure_slides``)
    titles = [s.title for m in made for s in (m if isinstance(m, list) else [m]) if s is not None]
    assert [s.title for s in build_slides([plain])] == titles + [c.title for c in registry_curves(plain)]
    # both runs in one deck: the curve's slide over the run that holds it
    [both] = [s for s in declared_slides([shown, plain]) if s.title == CURVE.title]
    assert [t.name for t in both.figure.data if t.name in ("shown", "plain")] == ["shown"]
