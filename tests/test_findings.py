"""The findings on a real MiniLM run (300 sentences of the shipped novels, the dashboard
tests' run) and on its Gaussian null, each verdict checked against an independent computation from
the run file read with DuckDB alone (numpy, np.polyfit, scipy's Spearman, explicit resampling loops,
closed forms); the CLI, the Findings page and the deck call the same function."""

from __future__ import annotations

import json

import numpy as np
import pytest
from brute import band
from dashboard_run import APP, RUN, figures_of, ok, open_page
from runfiles import query
from scipy.stats import spearmanr

from normvar_core.stats.findings import CLAIM_IDS, cell, findings

BAND = (10, 1e5)


def brute(path) -> dict:
    """Everything the claims need, straight from the file: per-type q, m, v, n; means; geometry; outliers."""
    ts = query(path, "SELECT layer, token_id, n, q, m, v FROM token_stats ORDER BY layer, token_id")
    layers = sorted(ts["layer"].unique())
    g = {c: np.stack([ts.loc[ts.layer == l, c].to_numpy(float) for l in layers]) for c in ("q", "m", "v")}
    n = ts.loc[ts.layer == layers[0], "n"].to_numpy()
    ids = ts.loc[ts.layer == layers[0], "token_id"].to_numpy()
    tables = set(query(path, "SELECT table_name FROM information_schema.tables")["table_name"])
    out = dict(layers=layers, n=n, ids=ids, **g, tables=tables)
    if "layer_geometry" in tables:
        out["geo"] = query(path, "SELECT * FROM layer_geometry ORDER BY layer")
    if "layer_outliers" in tables:
        out["out"] = query(path, "SELECT * FROM layer_outliers ORDER BY layer")
    out["meta"] = query(path, "SELECT * FROM run").iloc[0].to_dict()
    return out


def corpus_ratios(path, b) -> dict:
    """M/Q, V_B/Q, V_W/V per layer over the band's types, by ``brute.band`` over the stored means (eqs. 8–15)."""
    keep = (b["n"] >= BAND[0]) & (b["n"] <= BAND[1])
    out = {"m_over_q": [], "v_b_over_q": [], "v_w_over_v": []}
    for li, layer in enumerate(b["layers"]):
        tm = query(path, f"SELECT token_id, mean FROM token_means WHERE layer = {layer} ORDER BY token_id")
        r = band(b["n"][keep], b["q"][li, keep], b["v"][li, keep], np.stack(tm["mean"].to_numpy())[keep])
        out["m_over_q"].append(r["m"] / r["q"])
        out["v_b_over_q"].append(r["v_b"] / r["q"])
        out["v_w_over_v"].append(r["v_w"] / (r["v_w"] + r["v_b"]))
    return {k: np.array(v) for k, v in out.items()}


def boot_loop(q, m, v, B=1000, seed=123):
    """Explicit resampling of rows (a different generator from the library's): replicates of C.V., slope, R²."""
    rng = np.random.default_rng(seed)
    T = q.shape[1]
    cv, sl, r2 = [], [], []
    for _ in range(B):
        i = rng.integers(0, T, T)
        qq, mm, vv = q[:, i], m[:, i], v[:, i]
        cv.append(qq.std(1) / qq.mean(1))
        sl.append([np.polyfit(mm[l], vv[l], 1)[0] for l in range(q.shape[0])])
        r2.append([np.corrcoef(mm[l], vv[l])[0, 1] ** 2 for l in range(q.shape[0])])
    return np.array(cv), np.array(sl), np.array(r2)


def expected_trade(b, num_hidden_states):
    """The verdicts of cv_min_intermediate and tradeoff_slope by the rules, from an independent computation."""
    band = (b["n"] >= BAND[0]) & (b["n"] <= BAND[1])
    q, m, v = b["q"][:, band], b["m"][:, band], b["v"][:, band]
    cv = q.std(1) / q.mean(1)
    li = int(np.argmin(cv))
    layers = b["layers"]
    inner = np.array([0 < l < num_hidden_states - 1 for l in layers])
    rcv, rsl, rr2 = boot_loop(q, m, v)
    share = np.mean(rcv[:, inner].min(1) < 0.8 * np.minimum(rcv[:, 0], rcv[:, -1]))
    dip = bool(inner[li]) and share >= 0.95
    slope = np.polyfit(m[li], v[li], 1)[0]
    s_lo, s_hi = np.quantile(rsl[:, li], [0.025, 0.975])
    r_lo = np.quantile(rr2[:, li], 0.025)
    trade = dip and -1.2 <= s_lo and s_hi <= -0.8 and r_lo >= 0.8
    return dict(cv=cv, li=li, layer=int(layers[li]), share=share, dip=dip, slope=slope, trade=trade, s_int=(s_lo, s_hi))


@pytest.fixture(scope="module")
def minilm(data_dir):
    from normvar_core.runs.reader import open_run

    path = data_dir / "runs" / f"{RUN}.duckdb"
    r = open_run(path)
    return r, {f.id: f for f in findings(r)}, brute(path)


def test_each_claim_on_minilm_matches_an_independent_computation(minilm):
    r, f, b = minilm
    assert list(f) == list(CLAIM_IDS)
    # identity: per type from the stored columns, and Q(X) against the geometry's own Σ‖x‖²
    resid = np.abs(b["q"] - b["m"] - b["v"]) / b["q"]
    assert f["identity"].verdict == "holds" and f["identity"].value == pytest.approx(resid.max(), abs=1e-18)
    ls = query(r.path, "SELECT layer, q FROM layer_stats ORDER BY layer")
    e_sq = b["geo"]["norm_mean"] ** 2 * (1 + b["geo"]["norm_cv"] ** 2)
    assert np.max(np.abs(ls["q"] - e_sq) / e_sq) < 1e-9

    # cv_min_intermediate and tradeoff_slope
    e = expected_trade(b, r.num_hidden_states)
    assert f["cv_min_intermediate"].layer == e["layer"]
    assert f["cv_min_intermediate"].value == pytest.approx(e["cv"][e["li"]], rel=1e-9)
    assert abs(f["cv_min_intermediate"].details["bootstrap_share_dip"] - e["share"]) < 0.03
    assert f["cv_min_intermediate"].verdict == ("holds" if e["dip"] else "fails")
    t = f["tradeoff_slope"]
    assert t.layer == e["layer"] and t.value == pytest.approx(e["slope"], rel=1e-9)
    assert t.interval == pytest.approx(list(e["s_int"]), rel=0.1)  # another generator: close, not equal
    assert r.meta["norm_placement"] == "post" and t.verdict == ("holds" if e["trade"] else "fails")

    # vw_share_grows, m_grows_vb_shrinks: brute force from the stored float32 means
    cr = corpus_ratios(r.path, b)
    depth = np.array(b["layers"], float)
    d_vw = cr["v_w_over_v"][-1] - cr["v_w_over_v"][0]
    assert f["vw_share_grows"].value == pytest.approx(d_vw, rel=1e-4, abs=1e-6)
    rho = spearmanr(depth, cr["v_w_over_v"]).statistic
    assert f["vw_share_grows"].verdict == ("holds" if d_vw > 0 and rho >= 0.5 else "fails")
    lo, hi = f["vw_share_grows"].interval  # split halves are in the run: an interval around the value
    assert lo <= f["vw_share_grows"].value <= hi
    d_m = cr["m_over_q"][-1] - cr["m_over_q"][0]
    d_b = cr["v_b_over_q"][-1] - cr["v_b_over_q"][0]
    rho_m, rho_b = spearmanr(depth, cr["m_over_q"]).statistic, spearmanr(depth, cr["v_b_over_q"]).statistic
    want = d_m > 0 and rho_m >= 0.5 and d_b < 0 and rho_b <= -0.5
    assert f["m_grows_vb_shrinks"].value == pytest.approx(d_m, rel=1e-4, abs=1e-6)
    assert f["m_grows_vb_shrinks"].verdict == ("holds" if want else "fails")

    # null_vs_run: the isotropic null's C.V. of Q over types has the closed form sqrt(mean 2/(d n_t))
    band = (b["n"] >= BAND[0]) & (b["n"] <= BAND[1])
    cv_null = np.sqrt(np.mean(2.0 / (r.dim * b["n"][band])))
    nv = f["null_vs_run"]
    assert nv.details["cv_null"] == pytest.approx(cv_null, rel=0.2)
    assert nv.layer == e["layer"] and nv.details["cv_run"] == pytest.approx(e["cv"][e["li"]], rel=1e-9)
    ratio = e["cv"][e["li"]] / cv_null
    assert nv.verdict == ("fails" if ratio > 1.5 or ratio < 1 / 1.5 else nv.verdict)

    # anisotropy_profile (an encoder): flat iff (max − min) / mean ≤ 0.5 of the stored exact anisotropy,
    # which the split halves' pooled covariance reproduces from their own stream
    a = b["geo"]["anisotropy"].to_numpy()
    assert f["anisotropy_profile"].value == pytest.approx((a.max() - a.min()) / a.mean(), rel=1e-12)
    iv = f["anisotropy_profile"].interval  # the split halves' interval: straddling 0.5, the verdict cannot tell
    assert f["anisotropy_profile"].verdict == (
        "cannot tell" if iv and iv[0] < 0.5 < iv[1] else "holds" if (a.max() - a.min()) / a.mean() <= 0.5 else "fails"
    )
    halves = query(r.path, "SELECT layer, anisotropy FROM halves_layer WHERE half = 'all' ORDER BY layer")
    np.testing.assert_allclose(halves["anisotropy"], a, rtol=1e-9)

    # id_profile: interior peak of the stored TwoNN curve, the protocol's and the cross-context one; where they
    # disagree and some layer's same-sentence share is above 5 %, cannot tell. On these 300 sentences the
    # protocol's estimate peaks inside (layer 4) while the cross-context one rises to the last layer, where 44 %
    # of the tokens have their nearest neighbour in their own sentence: cannot tell, both estimates named.
    def rule(d):
        k = int(np.argmax(d))
        return k, "holds" if 0 < k < len(d) - 1 and d[k] > max(d[0], d[-1]) else "fails"

    geo = b["geo"]
    (k, seed), (kc, cross) = rule(geo["twonn_id"].to_numpy()), rule(geo["twonn_id_cross"].to_numpy())
    share = geo["same_sentence_nn"].to_numpy()
    assert f["id_profile"].layer == b["layers"][k]
    assert f["id_profile"].verdict == ("cannot tell" if share.max() > 0.05 and seed != cross else seed)
    assert (seed, cross) == ("holds", "fails") and share.max() > 0.3 and f["id_profile"].verdict == "cannot tell"
    got = cell(f["id_profile"])
    assert got.startswith(f"cannot tell: {geo['twonn_id'].iloc[k]:.3g} [")
    assert got.endswith(f" · cross-context {geo['twonn_id_cross'].iloc[kc]:.3g} @{b['layers'][kc]}")
    assert (
        f"{share.max():.0%} of the sampled tokens at layer {b['layers'][int(np.argmax(share))]}" in f["id_profile"].why
    )

    # position0_share: MiniLM has no massive activations
    assert b["out"]["max_over_median"].max() < 100 and f["position0_share"].verdict == "untestable"


def test_the_gaussian_null_fails_the_tradeoff_claims(minilm, tmp_path):
    from runfiles import write_run

    from normvar_core.runs.reader import open_run
    from normvar_core.stats.null import null_stats

    r, _, _ = minilm
    # the moments of `normvar null RUN` (its geometry's TwoNN is left out: minutes on a shared CPU)
    null = null_stats("isotropic", r.stats(), r.layer_stats(), seed=0)
    meta = {k: v for k, v in r.meta.items() if k != "name"}
    meta.update(source=f"null:isotropic:{RUN}", accumulators=["moments"])
    hist = r.sentence_length_hist()
    path = write_run(
        tmp_path / "null.duckdb",
        meta=meta,
        stats=null,
        tokens=r.tokens()["token"].tolist(),
        sentence_lengths=np.repeat(hist["words"], hist["count"]),
        samples=None,
    )
    nr = open_run(path)
    f = {x.id: x for x in findings(nr)}
    b = brute(path)
    e = expected_trade(b, nr.num_hidden_states)
    cv = e["cv"]
    assert (cv.max() - cv.min()) / cv.mean() < 0.3  # flat: no intermediate dip to find
    assert not e["dip"] and not e["trade"]
    assert f["cv_min_intermediate"].verdict == "fails" and f["tradeoff_slope"].verdict == "fails"
    assert f["null_vs_run"].verdict == "untestable" and f["position0_share"].verdict == "untestable"
    assert f["identity"].verdict == "holds"


def test_cli_json_and_table(minilm, capsys, tmp_path):
    from normvar_core.service.cli import main

    r, f, _ = minilm
    assert main(["findings", str(r.path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [o["id"] for o in out] == list(CLAIM_IDS)
    for o in out:
        assert {"id", "claim", "seed", "verdict", "value", "interval", "layer", "why", "run"} <= set(o)
        assert o["verdict"] in ("holds", "fails", "cannot tell", "untestable")
        assert o["interval"] is None or (len(o["interval"]) == 2 and o["interval"][0] <= o["interval"][1])
        assert o["verdict"] == f[o["id"]].verdict
    assert main(["findings", str(r.path), str(r.path)]) == 0
    text = capsys.readouterr().out
    assert "cv_min_intermediate" in text and text.count(f["identity"].verdict + ":") >= 2
    # the TwoNN profile's row: both estimates, and the reason below
    assert cell(f["id_profile"]) in text and "the two TwoNN estimates disagree" in text
    assert main(["findings", str(tmp_path / "nope.duckdb")]) == 2
    assert main(["findings", str(r.path), "--resamples", "10"]) == 2
    err = capsys.readouterr().err
    assert err.count("normvar: error:") == 2


def test_findings_page_and_bands(app, minilm):
    r, f, _ = minilm
    at = open_page(app, "findings")
    table = at.dataframe[0].value
    assert list(table["id"]) == list(CLAIM_IDS)
    assert [c.split(":")[0] for c in table[RUN]] == [f[i].verdict for i in CLAIM_IDS]
    assert cell(f["id_profile"]) in list(table[RUN]) and "cross-context" in cell(f["id_profile"])
    assert any("the two TwoNN estimates disagree" in m.value for m in at.markdown)
    said = [w.value for w in open_page(app, "geometry").warning if "claim id_profile" in w.value]
    assert said and cell(f["id_profile"]) in said[0] and "the two TwoNN estimates disagree" in said[0]
    at.switch_page("views/layers.py").run()
    ok(at)
    fig = figures_of(at)[0]
    fills = [t for t in fig["data"] if t.get("fill") == "tonexty" and str(t.get("name", "")).startswith(RUN)]
    assert len(fills) == 3  # C.V., slope, R²: one band each
    from normvar_core.stats.intervals import run_intervals

    assert r.has("intervals")
    iv = run_intervals(r)  # the run file's table
    lo = iv[iv.quantity == "cv_q"].sort_values("layer")["low"].to_numpy()
    from dashboard_run import arr

    np.testing.assert_allclose(arr(fills[0]["y"]), lo)


def test_compare_states_the_same_twonn_verdict(minilm, tmp_path, monkeypatch):
    """Compare's Layer geometry tab, the run against a copy of itself: each run's TwoNN profile with the Findings
    page's cell and reason (the same rule)."""
    import shutil

    from streamlit.testing.v1 import AppTest

    r, f, _ = minilm
    (tmp_path / "runs").mkdir()
    for name in (RUN, "copy"):
        shutil.copy(r.path, tmp_path / "runs" / f"{name}.duckdb")
    monkeypatch.setenv("NORMVAR_DATA", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"run": RUN, "page": "compare", "run2": "copy", "section": "geometry"})
    at.run()
    ok(at)
    said = [w.value for w in at.warning if "claim id_profile" in w.value]
    assert len(said) == 2 and all(cell(f["id_profile"]) in w and "the two TwoNN estimates disagree" in w for w in said)


def test_deck_states_findings_after_its_title_with_verdicts(minilm):
    from normvar_core.report.slides import build_slides

    r, f, _ = minilm
    slides = build_slides([r])
    assert slides[1].title.startswith("Findings")  # after the title slide
    rows = slides[1].table.rows  # the findings as a table of text: claim, then the run's verdict cell
    assert [row[1].split(":")[0] for row in rows] == [f[i].verdict for i in CLAIM_IDS]
    take = {s.title: s.takeaway for s in slides}
    layers = next(t for k, t in take.items() if "Fig. 4" in k)
    assert f"claim cv_min_intermediate — {f['cv_min_intermediate'].verdict}" in layers
    geo = next(t for k, t in take.items() if "geometry" in k)
    assert f"claim anisotropy_profile — {f['anisotropy_profile'].verdict}" in geo
    assert (
        f"claim id_profile — {cell(f['id_profile'])}" in geo
        and cell(f["id_profile"]) in rows[CLAIM_IDS.index("id_profile")][1]
    )
    assert "the two TwoNN estimates disagree" in slides[1].notes
