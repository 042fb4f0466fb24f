"""The Geometry and Outliers pages under AppTest, on the real MiniLM run of the dashboard tests: the
figures carry the run's own layer_geometry / dim_stats values; a run without geometry (written by
an older normvar) gets a message naming the fix instead of an error."""

from __future__ import annotations

import numpy as np
from dashboard_run import RUN, RUN2, arr, cloud_traces, figure, figures_of, open_page, open_section, trace


def test_geometry_page_shows_the_runs_values(app, run):
    at = open_page(app, "geometry")
    assert len(figures_of(at)) == 1 and not at.dataframe  # the profiles first, the spectrum when opened
    fig = figure(at, "Layer geometry")
    geo = run.table("layer_geometry").sort_values("layer")
    aniso = [t for t in fig["data"] if t.get("name") == RUN and t.get("xaxis") in (None, "x")][0]
    np.testing.assert_allclose(arr(aniso["y"]), geo["anisotropy"].to_numpy())
    ids = [t for t in fig["data"] if t.get("name") == RUN and t.get("xaxis") == "x2"][0]
    np.testing.assert_allclose(arr(ids["y"]), geo["twonn_id"].to_numpy())
    cross = [t for t in fig["data"] if t.get("name") == f"{RUN} (TwoNN, cross-context: dash-dot)"][0]
    assert cross["xaxis"] == "x2" and cross["line"]["dash"] == "dashdot" and cross["showlegend"]  # in the legend
    np.testing.assert_allclose(arr(cross["y"]), geo["twonn_id_cross"].to_numpy())
    dec = figure(open_section(at, "geometry", "TwoNN decimation"), "TwoNN decimation")
    table = run.table("twonn_decimation")
    last = int(table["layer"].max())
    for col, what in (("twonn_id", "Razzhigaev et al. 2024 protocol"), ("twonn_id_cross", "cross-context")):
        line = [t for t in dec["data"] if t.get("name") == f"layer {last} ({what})"][0]
        want = table[table["layer"] == last].sort_values("size")
        np.testing.assert_allclose(arr(line["x"]), want["size"].to_numpy())
        np.testing.assert_allclose(arr(line["y"]), want[col].to_numpy())
    spec = figure(open_section(at, "geometry", "Covariance spectrum"), "Covariance spectrum")
    assert at.select_slider(key="w_layer").value == 3  # the spectrum's layer slider sits in its tab
    lam = run.table("layer_spectrum").query("layer == 3").sort_values("k")["eigenvalue"].to_numpy()
    assert len(arr(spec["data"][0]["y"])) == lam.size == run.dim


def test_outliers_page(app, run):
    at = open_page(app, "outliers")
    assert len(figures_of(at)) == 1 and not at.dataframe  # the heatmap first, the rest when opened
    heat = figure(at, "Outlier dimensions")
    z = np.asarray(heat["data"][0]["z"] if not isinstance(heat["data"][0]["z"], dict) else arr(heat["data"][0]["z"]))
    assert z.shape == (len(run.layers), run.dim)
    shares = open_section(at, "outliers", "Shares")
    [fig] = figures_of(shares)
    want_pos0 = run.table("layer_outliers").sort_values("layer")["q_share_pos0"].to_numpy()
    np.testing.assert_allclose(arr(trace(fig, "position 0")["y"]), want_pos0)
    top = open_section(at, "outliers", "Largest").dataframe[0].value
    mid = run.layers[len(run.layers) // 2]  # noqa: F841  -- read by the query's @mid
    want = run.table("top_activations").query("layer == @mid")
    assert len(top) == len(want) > 0 and top["sentence"].str.len().min() > 0
    np.testing.assert_allclose(np.sort(top["value"].to_numpy()), np.sort(want["value"].to_numpy()))


def test_run_without_geometry_gets_a_message(app):
    app.query_params.update({"run": RUN2})
    app.run()
    app.switch_page("views/geometry.py").run()
    assert not app.exception
    assert any("no layer geometry" in i.value for i in app.info)


def test_frequency_page_shows_self_similarity(app, run):
    at = open_section(open_page(app, "frequency", layer="2"), "frequency", "Self-similarity")
    fig = figure(at, "Self-similarity")
    ss = run.table("token_selfsim").query("layer == 2").dropna(subset=["self_similarity"])
    np.testing.assert_allclose(np.sort(arr(fig["data"][0]["y"])), np.sort(ss["self_similarity"].to_numpy()))


def test_token_view_renders_from_a_url(app, run):
    """?page=token&token=her: n_t, Q/M/V across layers equal the run's; its Contexts tab: contexts ordered by
    distance."""
    from normvar_core.stats.contexts import contexts

    at = open_page(app, "token", token="her")
    qmv = figure(at, "Q, M, V across layers")
    table = run.token_table(3)
    tid = int(table.loc[table["token"] == "her", "token_id"].iloc[0])
    st_ = run.stats()
    col = int(np.searchsorted(st_.token_ids, tid))
    np.testing.assert_allclose(arr(qmv["data"][1]["y"]), st_.m[:, col])  # M(X_t) per layer
    assert len(at.get("plotly_chart")) == 1 and not [
        h for h in at.html if "normvar_run" not in h.body
    ]  # the first tab only (and the last-run cookie)
    at.session_state["w_section_token"] = "Contexts"  # the tab, as a click sets it
    at.run()
    assert not at.exception and not at.get("plotly_chart")
    md = " ".join(m.value for m in at.markdown)
    assert "Most typical" in md and "<mark><b>her</b></mark>" in " ".join(h.body for h in at.html)
    layer = run.layers[len(run.layers) // 2]
    smp = run.samples(layer, [tid])
    want = contexts(smp, st_.mean[st_.layer(layer), col], run.sentences(smp["sentence_id"].tolist()))
    first = next(h.body for h in at.html if "‖x − μ‖" in h.body)
    assert f"{want['distance'].iloc[0]:.3f}" in first
    assert at.query_params["token"] == ["her"] or at.query_params["token"] == "her"


def test_clouds_hover_shows_the_sentence(app, run):
    at = open_page(app, "clouds")
    fig = figure(at, "sampled embeddings")
    per_token = cloud_traces(fig)  # one trace per token
    assert all("customdata[1]" in d["hovertemplate"] for d in per_token)
    ctx = [c[1] for d in per_token for c in d["customdata"]]
    toks = [t for d in per_token for t in d["text"]]
    words = [c for c, t in zip(ctx, toks) if not (t.startswith("[") and t.endswith("]"))]
    assert words and all("<b>" in c for c in words)  # the token highlighted in its sentence
    assert all(c for c in ctx)  # specials: their sentence, no highlight
    sents = set(run.sentences().values())
    plain = ctx[0].replace("<b>", "").replace("</b>", "").replace("… ", "").replace(" …", "")
    assert any(plain in s for s in sents)


def _data_with(tmp_path, data_dir, sibling: bool):
    """A copy of the dashboard's run; with ``sibling``, a second file of the same options but
    exclude_position0 = true (its anisotropy halved, to tell the two apart)."""
    import json
    import shutil

    import duckdb

    runs = tmp_path / "data" / "runs"
    runs.mkdir(parents=True)
    shutil.copy(data_dir / "runs" / f"{RUN}.duckdb", runs / f"{RUN}.duckdb")
    if sibling:
        shutil.copy(data_dir / "runs" / f"{RUN}.duckdb", runs / "sib.duckdb")
        con = duckdb.connect(str(runs / "sib.duckdb"))
        opts = json.loads(con.execute("SELECT options FROM run").fetchone()[0])
        opts.update(name="sib", exclude_position0=True)
        con.execute("UPDATE run SET options = ?, name = 'sib'", [json.dumps(opts)])
        con.execute("UPDATE layer_geometry SET anisotropy = anisotropy / 2")
        con.execute("CHECKPOINT")
        con.close()
    return tmp_path / "data"


def test_outliers_page_puts_the_geometry_without_position0_next_to_it(tmp_path, data_dir, monkeypatch, run):
    from dashboard_run import APP
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("NORMVAR_DATA", str(_data_with(tmp_path, data_dir, sibling=True)))
    at = open_page(AppTest.from_file(APP, default_timeout=90), "outliers")
    fig = figure(open_section(at, "outliers", "position 0"), "with and without position 0")
    geo = run.table("layer_geometry").sort_values("layer")["anisotropy"].to_numpy()
    np.testing.assert_allclose(arr(trace(fig, f"{RUN} (all positions)")["y"]), geo)
    np.testing.assert_allclose(arr(trace(fig, "sib (position 0 excluded)")["y"]), geo / 2)


def test_outliers_page_queues_the_run_without_position0(tmp_path, data_dir, monkeypatch, run):
    from dashboard_run import APP
    from streamlit.testing.v1 import AppTest

    from normvar_core.service.jobs import JobStore

    data = _data_with(tmp_path, data_dir, sibling=False)
    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = open_section(open_page(AppTest.from_file(APP, default_timeout=90), "outliers"), "outliers", "position 0")
    assert any("position 0" in i.value for i in at.info)
    at.button(key="w_pos0_submit").click().run()
    assert not at.exception and any("Queued job" in s.value for s in at.success)
    [job] = JobStore(data).list()
    want = {**run.meta["options"], "exclude_position0": True, "name": f"{RUN}-nopos0"}
    assert {k: v for k, v in job.config.items() if k != "corpus"} == {k: v for k, v in want.items() if k != "corpus"}
