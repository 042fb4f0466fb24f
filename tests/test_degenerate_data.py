"""Degenerate runs and crafted messages: a corpus of one sentence repeated 300 times and one of two sentences,
computed by the real pipeline with the tiny BERT. Their verdicts say "cannot tell" where the data cannot carry a
verdict, their intervals stay in each quantity's range, no page prints "nan", a URL's ``?layer=inf`` and the
crafted selection and click messages of the charts end in no traceback."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from dashboard_run import APP

from normvar_core.viz.pages import PAGES

SENTENCE = "The old man looked at the sea and smiled at the boat."
NAN = re.compile(r"\b(nan|NaN|inf)\b")


@pytest.fixture(scope="module")
def data(tmp_path_factory, tiny_models):
    """A data dir with ``rep`` (one sentence × 300) and ``two`` (two sentences), both with the layer geometry,
    the halves and the occurrences (compute's defaults)."""
    from normvar_core.service import cli

    root = tmp_path_factory.mktemp("degenerate")
    corpora = {"rep": (SENTENCE + "\n") * 300, "two": SENTENCE + "\nA second sentence about the river.\n"}
    for name, text in corpora.items():
        (root / f"{name}.txt").write_text(text, encoding="utf-8")
        code = cli.main(
            [
                "compute",
                "--model",
                str(tiny_models["bert"]),
                "--corpus",
                str(root / f"{name}.txt"),
                "--name",
                name,
                "--quiet",
                "--data-dir",
                str(root / "data"),
            ]
        )
        assert code == 0
    return root / "data"


def _open(data, name):
    from normvar_core.runs.reader import open_run

    return open_run(data / "runs" / f"{name}.duckdb")


# ============================================================================ verdicts
def test_one_sentence_repeated_gets_no_certain_verdict_from_a_zero_width_interval(data):
    """The two halves of a corpus that repeats one sentence hold the same embeddings, so every split-half interval
    has zero width (checked here on the run's own halves table); no claim decided on such an interval, nor any
    claim on the band's per-type statistics (most types occur in one context only: V(X_t) = 0), holds or fails."""
    from normvar_core.stats.claims import ZERO_WIDTH
    from normvar_core.stats.findings import findings

    run = _open(data, "rep")
    halves = run.table("halves_layer").set_index(["half", "layer"])
    # the halves hold the same sentence's states up to float32 rounding (the forward pass rounds a row's states
    # differently in batches of another shape on some CPUs: up to ~3e-7 of their size at the tiny BERT's last
    # layer), so their statistics agree to float32's precision, not float64's: rtol 1e-6
    for col in ("anisotropy", "isoscore", "m_over_q"):
        np.testing.assert_allclose(halves.loc["a", col], halves.loc["b", col], rtol=1e-6)
    # a type whose occurrences are one point, to float32 rounding, at every layer: its occurrences' states differ
    # by at most ~3e-7 of their size (the batch-shape rounding above), so V(X_t) <= (1e-6)^2 Q(X_t)
    tabs = [run.token_table(layer).set_index("token_id") for layer in run.layers]
    band = tabs[0][(tabs[0]["n"] >= 10) & (tabs[0]["n"] <= 1e5)]
    one_point = np.logical_and.reduce(
        [(t.loc[band.index, "v"] <= 1e-12 * t.loc[band.index, "q"]).to_numpy() for t in tabs]
    )
    assert one_point.sum() > len(band) / 2  # most band types: all occurrences one point
    fs = {f.id: f for f in findings(run, resamples=200)}
    for f in fs.values():
        if f.interval is not None and f.interval[1] - f.interval[0] <= ZERO_WIDTH * max(map(abs, f.interval)):
            assert f.verdict == "cannot tell" and "zero width" in f.why, (f.id, f.verdict, f.why)
    for cid in ("isoscore_low", "anisotropy_profile"):
        assert fs[cid].verdict == "cannot tell" and "has zero width" in fs[cid].why, fs[cid]
    for cid in ("cv_min_intermediate", "tradeoff_slope", "vw_share_grows", "m_grows_vb_shrinks", "null_vs_run"):
        assert fs[cid].verdict == "cannot tell", (cid, fs[cid].verdict, fs[cid].why)
        assert (
            f"{int(one_point.sum())} of the band's {len(band)} types have every occurrence at one point" in fs[cid].why
        ), fs[cid].why
    assert fs["identity"].verdict == "holds"  # exact algebra: no interval, no spread needed


def test_settle_keeps_verdicts_of_intervals_with_width_and_of_varied_types():
    """The rule's verdict stands when its interval has width and most band types vary; untestable stays."""
    from normvar_core.stats.claims import Claim, Finding, RunView, settle

    n = np.array([20, 30, 40, 50])
    q = np.full((2, 4), 5.0)
    v = np.array([[1.0, 0.0, 2.0, 3.0], [1.0, 0.0, 2.0, 3.0]])  # 3 of 4 band types vary
    rv = RunView(
        name="x",
        layers=[0, 1],
        num_hidden_states=2,
        is_decoder=False,
        norm_placement="",
        is_null=False,
        exclude_position0=False,
        token_ids=np.arange(4),
        n=n,
        q=q,
        m=q - v,
        v=v,
        layer_stats=pd.DataFrame(),
        halves=None,
        geometry=None,
        outliers=None,
    )
    claim = Claim("c", "000", "w", lambda _: None, per_type=True)
    kept = Finding("c", "", "", "holds", value=0.3, interval=[0.2, 0.4])
    assert settle(claim, kept, rv) is kept
    flat = Finding("c", "", "", "fails", value=0.3, interval=[0.3, 0.3 * (1 + 1e-12)])
    assert settle(claim, flat, rv).verdict == "cannot tell"
    assert settle(claim, Finding("c", "", "", "untestable"), rv).verdict == "untestable"
    rv.v[:, 2:] = 0.0  # 1 of 4 varies: too few
    assert "1 types that vary" in settle(claim, kept, rv).why and settle(claim, kept, rv).verdict == "cannot tell"


# ============================================================================ ranges
def test_split_half_intervals_stay_in_the_quantity_range():
    """θ ± t₁ |θ_A − θ_B| / 2 near 0 reaches below 0; the bounded quantities' ends are clipped to their range,
    the slope's are not."""
    from normvar_core.stats.bootstrap import T1_95, split_half_interval
    from normvar_core.stats.intervals import clip_to_range

    lo, hi = split_half_interval(0.02, 0.0, 0.06, bounds=(0.0, 1.0))
    assert float(lo) == 0.0 and float(hi) == pytest.approx(0.02 + T1_95 * 0.03)
    table = pd.DataFrame(
        {
            "layer": [0, 0, 0, 0],
            "quantity": ["isoscore", "v_w_over_v", "slope", "cv_q"],
            "value": [0.02, 0.98, -1.0, 0.01],
            "low": [-0.04, 0.9, -1.5, -0.01],
            "high": [0.08, 1.06, -0.5, 0.03],
            "method": "split-half",
        }
    )
    got = clip_to_range(table)
    assert got["low"].tolist() == [0.0, 0.9, -1.5, 0.0] and got["high"].tolist() == [0.08, 1.0, -0.5, 0.03]


def test_isoscore_interval_never_starts_below_zero():
    """isoscore_low on halves whose maxima differ by more than the value: the interval's low end is 0 (ι ≥ 0)."""
    from normvar_core.stats.bootstrap import T1_95
    from normvar_core.stats.isoscore import isoscore_low

    geo = pd.DataFrame({"layer": [0, 1, 2], "isoscore": [0.05, 0.01, 0.02]})
    halves = pd.DataFrame(
        {"half": ["a"] * 3 + ["b"] * 3, "layer": [0, 1, 2] * 2, "isoscore": [0.05, 0.0, 0.001, 0.05, 0.03, 0.04]}
    )
    f = isoscore_low(SimpleNamespace(geometry=geo, halves=halves))
    assert f.value == 0.02 and f.interval[0] == 0.0
    assert f.interval[1] == pytest.approx(0.02 + T1_95 * abs(0.001 - 0.04) / 2)


def test_degenerate_runs_intervals_in_range(data):
    """Every stored or recomputed interval row of both degenerate runs, and every finding's interval of a claim
    on a quantity ≥ 0, lies in the quantity's range."""
    from normvar_core.stats.findings import findings
    from normvar_core.stats.intervals import run_intervals

    ranges = {"cv_q": (0.0, np.inf), "r2": (0.0, 1.0)} | {
        q: (0.0, 1.0)
        for q in (
            "m_over_q",
            "v_over_q",
            "v_w_over_q",
            "v_b_over_q",
            "v_w_over_v",
            "anisotropy",
            "isoscore",
            "q_share_pos0",
        )
    }
    for name in ("rep", "two"):
        run = _open(data, name)
        iv = run_intervals(run)
        for q, (lo, hi) in ranges.items():
            rows = iv[(iv["quantity"] == q) & iv["low"].notna()]
            assert (rows["low"] >= lo).all() and (rows["high"] <= hi).all(), (name, q, rows)
        fs = {f.id: f for f in findings(run, resamples=100)}
        for cid in ("anisotropy_profile", "isoscore_low"):
            if fs[cid].interval is not None:
                assert fs[cid].interval[0] >= 0.0, (name, cid, fs[cid].interval)


# ============================================================================ pages
def _texts(at) -> list[str]:
    out = [
        str(el.value)
        for kind in ("markdown", "caption", "info", "warning", "error", "success")
        for el in getattr(at, kind)
    ]
    return out + [f"{m.label}: {m.value}" for m in at.metric]


def _app(data, monkeypatch, **params):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(params)
    at.run()
    return at


@pytest.mark.parametrize("name", ["rep", "two"])
def test_no_page_prints_nan_on_a_degenerate_run(data, monkeypatch, name):
    """Every page of a degenerate run: no traceback, and no "nan" or "inf" in its text; the Trade-off's App. I
    caption says "—" and why when no type is in the band (the two-sentence run)."""
    at = _app(data, monkeypatch, run=name)
    for page in (p.file for p in PAGES):
        at.switch_page(f"views/{page}").run()
        assert not at.exception, (page, [e.value for e in at.exception])
        bad = [t for t in _texts(at) if NAN.search(t)]
        assert not bad, (name, page, bad)
        if page == "tradeoff.py" and name == "two":
            assert any("measured mean — (no token type in the band at this layer)" in t for t in _texts(at))


def test_layer_inf_and_other_crafted_url_values_on_every_page(data, monkeypatch):
    """``?layer=inf`` (and 1e400, a huge or non-ASCII number) on every page: no traceback."""
    from normvar_core.viz.viewstate import DEFAULT_BAND, parse_band, parse_float, parse_ids, parse_int

    for bad in ("inf", "-inf", "nan", "1e400", "٣", "1_0", "3.5", "99999999999", "", "+", "0x1f", "²"):
        assert parse_int(bad) is None, bad
    assert parse_int(" 7 ") == 7 and parse_int("-2") == -2 and parse_int(["1", "12"]) == 12
    assert parse_int("-2", lo=0) is None and parse_int("2147483648") is None
    assert parse_ids("5,٣,1e3,-1,99999999999,5,7") == [5, 7]
    for bad in ("inf", "nan", "1e400", "٠.٥", "1_0", "0x1", "½"):
        assert parse_float(bad) is None and parse_band(f"{bad},3") == DEFAULT_BAND, bad
    assert parse_float(" -2.5e1 ") == -25.0 and parse_band("1.5,4") == (1.5, 4.0)
    for layer in ("inf", "٣"):  # the rest: parse_int above
        at = _app(data, monkeypatch, run="rep", layer=layer, cloud="1e400,inf", depth="inf", band="inf,nan")
        for page in (p.file for p in PAGES):
            at.switch_page(f"views/{page}").run()
            assert not at.exception, (layer, page, [e.value for e in at.exception])


# ============================================================================ crafted chart messages
BAD_PICKS = [
    None,
    "x",
    5,
    [],
    [1, 2, 3],
    {},
    {"index": "0"},
    {"index": None, "x": 0, "y": 0},
    {"index": float("nan"), "x": 0.0, "y": 0.0},
    {"index": float("inf"), "x": 0.0, "y": 0.0},
    {"index": -1, "x": 0.0, "y": 0.0},
    {"index": 10**30, "x": 0.0, "y": 0.0},
    {"index": 0.5, "x": 0.0, "y": 0.0},
    {"index": True, "x": 0.0, "y": 0.0},
    {"index": 0},
    {"index": 0, "x": "a", "y": 0.0},
    {"index": 0, "x": float("nan"), "y": 0.0},
    {"index": 0, "x": [1], "y": {"a": 1}},
    {"index": [0], "x": 0.0, "y": 0.0},
]
BAD_REGIONS = [
    None,
    "box",
    7,
    [],
    {},
    {"kind": None},
    {"kind": "circle"},
    {"kind": ["box"]},
    {"kind": "box"},
    {"kind": "box", "x": [0.0], "y": [0.0, 1.0]},
    {"kind": "box", "x": "ab", "y": "cd"},
    {"kind": "box", "x": [0.0, float("nan")], "y": [0.0, 1.0]},
    {"kind": "box", "x": [0.0, 1e400], "y": [0.0, 1.0]},
    {"kind": "box", "x": [0.0, 10**400], "y": [0, 1]},
    {"kind": "box", "x": [[0.0], 1.0], "y": [0.0, 1.0]},
    {"kind": "box", "x": [True, 1.0], "y": [0, 1]},
    {"kind": "lasso"},
    {"kind": "lasso", "polygon": 5},
    {"kind": "lasso", "polygon": [[0, 0], [1, 1]]},
    {"kind": "lasso", "polygon": [[0, 0], [1, 1], [2]]},
    {"kind": "lasso", "polygon": [0, 1, 2]},
    {"kind": "lasso", "polygon": [[0, 0], [1, "a"], [2, 2]]},
    {"kind": "lasso", "polygon": [[0, 0], [1, float("inf")], [2, 2]]},
    {"kind": "lasso", "polygon": [{"x": 0}, {"x": 1}, {"x": 2}]},
]


def test_crafted_scatter_messages_are_ignored_and_good_ones_read():
    from normvar_core.viz.selection import picked_point, scatter_region

    for msg in BAD_PICKS:
        assert picked_point(msg, 10) is None, msg
    assert picked_point({"index": 3, "x": 1, "y": -2.5}, 10) == (3, 1.0, -2.5)
    assert picked_point({"index": 3.0, "x": 1, "y": 2}, 10) == (3, 1.0, 2.0)
    assert picked_point({"index": 10, "x": 1, "y": 2}, 10) is None
    for msg in BAD_REGIONS:
        assert scatter_region(msg) is None, msg
    assert scatter_region({"kind": "clear"}) == ("clear", None)
    assert scatter_region({"kind": "box", "x": [2, -1], "y": [0.5, 0.25]}) == ("box", ((-1.0, 2.0), (0.25, 0.5)))
    square = [[0, 0], [1, 0], [1, 1], [0, 1]]
    assert scatter_region({"kind": "lasso", "polygon": square}) == (
        "lasso",
        [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]],
    )
    kind, poly = scatter_region({"kind": "lasso", "polygon": [[math.cos(t), math.sin(t)] for t in range(1000)]}, 100)
    assert kind == "lasso" and len(poly) == 100  # every 10th vertex


def test_crafted_plotly_selections_are_ignored():
    """The Trade-off and Token clouds selection events: points that are not dicts, texts that are not tokens,
    customdata that is not two integer ids."""
    from normvar_core.viz.selection import MAX_TEXT_CHARS, clicked_sample, event_points, point_texts

    def ev(points):
        return SimpleNamespace(selection=SimpleNamespace(points=points))

    for points in (None, "abc", 5, {"text": "a"}, [None, 3, "x", ["text"]]):
        assert event_points(ev(points)) == [] and point_texts(event_points(ev(points))) == []
    assert event_points(None) == [] and event_points(SimpleNamespace()) == []
    pts = event_points(
        ev(
            [
                {"text": "the"},
                {"text": 5},
                {"text": ["a"]},
                {"text": ""},
                {"text": "x" * 10_000},
                {"text": None},
                {"text": "the"},
                {"text": "sea"},
                7,
            ]
        )
    )
    assert point_texts(pts) == ["the", "sea"] and len("x" * 10_000) > MAX_TEXT_CHARS
    for p in (
        None,
        5,
        {},
        {"customdata": None},
        {"customdata": "abcd"},
        {"customdata": [1, 2]},
        {"customdata": [1, "c", "2014", 3]},
        {"customdata": [1, "c", float("nan"), 3]},
        {"customdata": [1, "c", 10**40, 3]},
        {"customdata": [1, "c", -4, 3]},
        {"customdata": [1, "c", 4.5, 3]},
    ):
        assert clicked_sample(p) is None, p
    assert clicked_sample({"customdata": [12, "ctx", 2014, 3]}) == (2014, 3)


def test_crafted_picks_on_the_occurrences_page(data, monkeypatch):
    """The Occurrences page under crafted click states: no traceback, nothing shown for them; a real click on
    point 0 shows that occurrence's token (read back from the run)."""
    from normvar_core.runs import occurrence_queries as O

    at = _app(data, monkeypatch, run="rep", layer="1")
    at.switch_page("views/occurrences.py").run()
    assert not at.exception
    pts = O.occurrence_points(_open(data, "rep"), 1)
    for pick in BAD_PICKS:
        at.session_state["occ_chart"] = {"picked": pick, "selection": BAD_REGIONS[len(str(pick)) % len(BAD_REGIONS)]}
        at.run()
        assert not at.exception, (pick, [e.value for e in at.exception])
        assert not any("· sentence" in t for t in _texts(at)), pick
    at.session_state["occ_chart"] = {"picked": {"index": 0, "x": float(pts["x"].iat[0]), "y": float(pts["y"].iat[0])}}
    at.run()
    assert not at.exception
    assert any(f"**`{pts['token'].iat[0]}`** · sentence" in t for t in _texts(at))
