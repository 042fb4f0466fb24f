"""Every dashboard page under Streamlit's AppTest, on a real small run (MiniLM × 300 sentences of the
shipped novels): the plotly figure JSON each page sends is decoded and compared with the library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from dashboard_run import (
    APP,
    ROOT,
    RUN,
    RUN2,
    arr,
    cloud_traces,
    figure,
    figures_of,
    in_band,
    ok,
    open_page,
    open_section,
    trace,
)

from normvar_core.stats import analyses


# ============================================================================ Trade-off
def test_tradeoff_scatter_counts_and_slope(app, run):
    at = open_page(app, "tradeoff", layer="3")
    fig = figure(at, "layer 3")
    pts = trace(fig, "token types")
    band = in_band(run, 3)
    x, y = arr(pts["x"]), arr(pts["y"])
    assert len(x) == len(band) > 20  # one point per token type in the band
    np.testing.assert_allclose(np.sort(x), np.sort(band["m"].to_numpy()))
    np.testing.assert_allclose(np.sort(y), np.sort(band["v"].to_numpy()))
    lib = analyses.tradeoff(run.stats(), 10, 1e5).set_index("layer").loc[3]
    line = trace(fig, "regression")
    lx, ly = arr(line["x"]), arr(line["y"])
    assert (ly[1] - ly[0]) / (lx[1] - lx[0]) == pytest.approx(lib["slope"], rel=1e-9)
    assert f"slope = {lib['slope']:.3f}" in fig["layout"]["annotations"][0]["text"]
    assert f"R² = {lib['r2']:.3f}" in fig["layout"]["annotations"][0]["text"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["slope (V on M)"] == f"{lib['slope']:.3f}"
    assert metrics["token types in band"] == f"{len(band):,}"
    assert "%{text}" in pts["hovertemplate"] and "customdata[0]" in pts["hovertemplate"]  # token, n, Q, M, V
    np.testing.assert_array_equal(np.sort(np.asarray(pts["text"])), np.sort(band["token"].to_numpy(dtype=str)))
    assert at.query_params["layer"] == ["3"] or at.query_params["layer"] == "3"


def test_tradeoff_layer_and_band_sliders(app, run):
    at = open_page(app, "tradeoff")
    layer_w = at.select_slider(key="w_layer")
    assert layer_w.value == 3  # the middle of 0..6 by default
    layer_w.set_value(5).run()
    ok(at)
    x = arr(trace(figure(at, "layer 5"), "token types")["x"])
    np.testing.assert_allclose(np.sort(x), np.sort(in_band(run, 5)["m"].to_numpy()))
    at.slider(key="w_band").set_value((1.5, 4.0)).run()
    ok(at)
    fig = figure(at, "layer 5")
    assert len(arr(trace(fig, "token types")["x"])) == len(in_band(run, 5, 1.5, 4.0))
    lib = analyses.tradeoff(run.stats(), 10**1.5, 1e4).set_index("layer").loc[5]
    assert f"slope = {lib['slope']:.3f}" in fig["layout"]["annotations"][0]["text"]
    qp = dict(at.query_params)
    flat = {k: (v[-1] if isinstance(v, list) else v) for k, v in qp.items()}
    assert flat["layer"] == "5" and flat["band"] == "1.5,4" and flat["page"] == "tradeoff"


def test_tradeoff_highlights_tokens_and_lists_them(app, run):
    at = open_page(app, "tradeoff", layer="2")
    at.text_input(key="w_tokens").set_value("the, said, notatoken").run()
    ok(at)
    hl = trace(figure(at, "layer 2"), "highlighted")
    tab = run.token_table(2).set_index("token")
    assert list(hl["text"]) == ["the", "said"]
    np.testing.assert_allclose(arr(hl["x"]), tab.loc[["the", "said"], "m"].to_numpy())
    [shown] = [d.value for d in at.dataframe]  # the per-layer fits: sent when their expander opens
    assert shown["token"].tolist() == ["the", "said"]
    assert any("notatoken" in c.value for c in at.caption)
    at.session_state["tradeoff_fits"] = True
    at.run()
    ok(at)
    fits = next(d.value for d in at.dataframe if "slope" in d.value)
    np.testing.assert_allclose(fits["slope"], analyses.tradeoff(run.stats(), 10, 1e5)["slope"])


def test_query_params_restore_the_view(app, run):
    """A shared link: run, page, layer, band and highlighted tokens come back."""
    app.query_params.update(
        {"run": RUN, "page": "tradeoff", "layer": "4", "band": "1.2,3.5", "tokens": "the,she", "present": "1"}
    )
    at = app.run()
    ok(at)
    assert at.select_slider(key="w_layer").value == 4
    assert at.slider(key="w_band").value == (1.2, 3.5)
    assert at.text_input(key="w_tokens").value == "the,she"
    assert at.toggle(key="w_present").value is True
    fig = figure(at, "layer 4")
    assert len(arr(trace(fig, "token types")["x"])) == len(in_band(run, 4, 1.2, 3.5))
    assert list(trace(fig, "highlighted")["text"]) == ["the", "she"]
    assert fig["layout"]["font"]["size"] >= 18  # presentation theme
    assert at.selectbox(key="w_run").value == RUN


# ============================================================================ other pages
def test_layers_page_matches_tradeoff_table(app, run):
    at = open_page(app, "layers")
    [fig] = figures_of(at)
    assert not at.dataframe  # the table: sent when its expander opens
    lib = analyses.tradeoff(run.stats(), 10, 1e5)
    cv, slope, r2 = [t for t in fig["data"] if t.get("name") == RUN][:3]
    np.testing.assert_allclose(arr(cv["y"]), lib["cv_q"])
    np.testing.assert_allclose(arr(slope["y"]), lib["slope"])
    np.testing.assert_allclose(arr(r2["y"]), lib["r2"])
    at.multiselect(key="w_layers_runs").set_value([RUN, RUN2]).run()
    at.toggle(key="w_relative").set_value(True).run()
    ok(at)
    fig = figures_of(at)[0]
    other = [t for t in fig["data"] if t.get("name") == RUN2]
    assert len(other) == 3
    np.testing.assert_allclose(arr(other[0]["x"]), [0, 2 / 6, 4 / 6, 1])  # relative depth
    assert fig["layout"]["xaxis"]["title"]["text"] == "relative depth"
    at.session_state["layers_table"] = True
    at.run()
    ok(at)
    table = at.dataframe[0].value
    assert set(table["run"]) == {RUN, RUN2}
    np.testing.assert_allclose(table.loc[table["run"] == RUN, "slope"], lib["slope"])


def test_decomposition_bars_equal_library(app, run):
    at = open_page(app, "decomposition", band="1,4")
    lib = analyses.decomposition(run.stats(), 10, 1e4)
    assert len(figures_of(at)) == 1 and not at.dataframe  # the shares first; the others and the table when opened
    bars = figure(at, "shares of Q(X)")
    by_name = {t["name"]: t for t in bars["data"]}
    np.testing.assert_allclose(arr(by_name["M(X)/Q(X)"]["y"]), lib["m_over_q"])
    np.testing.assert_allclose(arr(by_name["V<sub>B</sub>(X)/Q(X)"]["y"]), lib["v_b_over_q"])
    np.testing.assert_allclose(arr(by_name["V<sub>W</sub>(X)/Q(X)"]["y"]), lib["v_w_over_q"])
    np.testing.assert_allclose(arr(by_name["V<sub>W</sub>(X)/V(X)"]["y"]), lib["v_w_over_v"])
    raw = figure(open_section(at, "decomposition", "Raw values"), "Raw values")
    assert len(figures_of(at)) == 1
    np.testing.assert_allclose(arr(trace(raw, "Q")["y"]), lib["q"])
    np.testing.assert_allclose(arr(trace(raw, "V<sub>B</sub>")["y"]), lib["v_b"])
    assert at.slider(key="w_band").value == (1.0, 4.0)
    ratios = figure(open_section(at, "decomposition", "Ratios"), "Ratios to Q(X)")
    np.testing.assert_allclose(arr(trace(ratios, "M/Q")["y"]), lib["m_over_q"])
    at.session_state["decomp_table"] = True  # the lazy "Table" expander, opened
    at.run()
    ok(at)
    from normvar_core.viz.table_words import words

    np.testing.assert_allclose(at.dataframe[0].value[words("q")], lib["q"])  # its columns headed in words


def test_decomposition_link_opens_its_section(app, run):
    """A shared link with ``?section=raw`` lands on the raw values' tab, drawn alone."""
    app.query_params.update({"run": RUN, "page": "decomposition", "section": "raw"})
    at = app.run()  # the app routes ?page= to the page, as a link does
    ok(at)
    [raw] = figures_of(at)
    assert "Raw values" in raw["layout"]["title"]["text"]
    assert at.session_state["w_section_decomposition"] == "Raw values (Fig. 19, 20)"
    lib = analyses.decomposition(run.stats(), 10, 1e5)
    np.testing.assert_allclose(arr(trace(raw, "Q")["y"]), lib["q"])
    assert at.query_params["section"] in ("raw", ["raw"])
    open_section(at, "decomposition", "App. I")  # App. I: its tables, no figure
    from normvar_core.stats.layernorm import layernorm_table

    want = layernorm_table(run.table("norm_params"), run.stats(), 10, 1e5)
    assert not figures_of(at) and at.query_params["section"] in ("layernorm", ["layernorm"])
    from normvar_core.viz.table_words import words

    np.testing.assert_allclose(at.dataframe[0].value[words("q_pred")], want["q_pred"])  # headed in words


def test_frequency_page(app, run):
    at = open_page(app, "frequency", layer="3")
    regs = analyses.frequency_regressions(run.stats(), 10, 1e5)
    assert len(figures_of(at)) == 1  # the first tab's figure only: the others when opened
    sc = figure(at, "layer 3 (Fig. 7")
    band = in_band(run, 3)
    q = arr(sc["data"][0]["y"])
    np.testing.assert_allclose(np.sort(q), np.sort(np.log10(1 + band["q"].to_numpy())))
    row = regs.loc[(regs.layer == 3) & (regs.quantity == "Q")].iloc[0]
    line = sc["data"][1]
    lx, ly = arr(line["x"]), arr(line["y"])
    assert (ly[-1] - ly[0]) / (lx[-1] - lx[0]) == pytest.approx(row["slope"], rel=1e-9)
    slopes = figure(open_section(at, "frequency", "Slopes"), "Slope on")
    for name in ("Q", "M", "V"):
        expect = regs.loc[regs.quantity == name].sort_values("layer")["slope"].to_numpy()
        np.testing.assert_allclose(arr(trace(slopes, name)["y"]), expect)
    assert at.query_params["section"] == "slopes"  # the open tab is in the link
    hist = figure(open_section(at, "frequency", "Histograms"), "Histograms at layer 3")
    lib = analyses.histograms(run.stats(), 3, bins=50, n_min=10, n_max=1e5)
    np.testing.assert_array_equal(arr(hist["data"][0]["y"]), lib.loc[lib.quantity == "Q", "count"])
    corpus = figure(open_section(at, "frequency", "corpus"), "The corpus")
    assert arr(corpus["data"][0]["y"]).sum() == 300  # sentences


def test_a_link_opens_its_section_and_other_pages_drop_it(app):
    app.query_params.update({"run": RUN, "page": "frequency", "layer": "3", "section": "histograms"})
    at = app.run()  # a shared link: ?page=frequency&section=histograms
    ok(at)
    [fig] = figures_of(at)  # only the linked tab is computed and sent
    assert "Histograms at layer 3" in fig["layout"]["title"]["text"]
    assert at.session_state["w_section_frequency"].startswith("Histograms")
    at.switch_page("views/layers.py").run()
    ok(at)
    assert "section" not in at.query_params  # a page without sections keeps none in its link


def test_another_pages_open_tab_does_not_open_the_same_slug_here(app):
    app.query_params.update({"run": RUN, "page": "compare", "section": "ratios"})
    at = app.run()  # Compare on its "ratios" tab ...
    ok(at)
    assert "Fig. 5/6 ratios" in figures_of(at)[0]["layout"]["title"]["text"]
    at.switch_page("views/decomposition.py").run()  # ... then Decomposition, which has a "ratios" tab too
    ok(at)
    [fig] = figures_of(at)  # opens on its own first tab
    assert "shares of Q(X)" in fig["layout"]["title"]["text"] and "section" not in at.query_params


def test_clouds_page_default_is_app_a_selection(app, run):
    at = open_page(app, "clouds", layer="3")
    names = run.tokens()["token"].tolist()
    sampled = set(run.sampled_tokens()["token_id"].astype(int))
    expect = [int(t) for t in analyses.select_tokens(run.stats(), names) if int(t) in sampled]
    chosen = at.multiselect(key="w_cloud_tokens").value
    assert chosen == expect and len(chosen) >= 5
    assert len(figures_of(at)) == 1 and not at.dataframe  # the cloud only: Fig. 8 and Table 2 when opened
    fig = figure(at, "sampled embeddings")
    per_token = cloud_traces(fig)  # one trace (colour) per token
    n_samples = len(run.samples(3, chosen))
    assert sum(len(arr(d["x"])) for d in per_token) == n_samples
    label = dict(zip(run.sampled_tokens()["token_id"].astype(int), run.sampled_tokens()["token"].astype(str)))
    assert [d["name"] for d in per_token] == [label[t] for t in chosen]
    origin = trace(fig, "origin")
    assert list(origin["x"]) == [0] and list(origin["y"]) == [0]
    # Fig. 8 and Table 2: the selected tokens among all types, with the run's n, Q, M, V at the layer
    open_section(at, "clouds", "Fig. 8")
    assert at.query_params["section"] in (["fig8"], "fig8")
    table = at.dataframe[0].value
    assert sorted(table["token_id"]) == sorted(chosen)
    want = run.token_table(3).set_index("token_id").loc[chosen]
    np.testing.assert_allclose(
        table.set_index("token_id").loc[chosen, ["n", "q", "m", "v"]].to_numpy(float),
        want[["n", "q", "m", "v"]].to_numpy(float),
    )
    hl = trace(figure(at, "The selected tokens among all types (Fig. 8)"), "highlighted")
    assert sorted(hl["text"]) == sorted(label[t] for t in chosen)
    np.testing.assert_allclose(sorted(arr(hl["x"])), sorted(want["m"]))
    # the user picks other sampled tokens (the picker is above the tabs: both follow it)
    at.multiselect(key="w_cloud_tokens").set_value(chosen[:2]).run()
    ok(at)
    assert sorted(at.dataframe[0].value["token_id"]) == sorted(chosen[:2])
    open_section(at, "clouds", "Cloud")
    assert "section" not in at.query_params  # the first tab: no section in the link
    assert sum(len(arr(d["x"])) for d in cloud_traces(figure(at, "sampled embeddings"))) == len(
        run.samples(3, chosen[:2])
    )
    want = ",".join(str(t) for t in chosen[:2])
    assert at.query_params["cloud"] in ([want], want)  # the URL keeps the pick


def test_token_link_with_a_section_opens_that_tab(app, run):
    """?section=contexts opens the Token page's Contexts tab directly: its sentences, and no figure sent (the
    Q/M/V figure is the first tab's); the Nearest types tab lists the cosine neighbours of μ(X_t)."""
    from normvar_core.stats.neighbours import nearest_types

    app.query_params.update({"run": RUN, "token": "her", "layer": "3", "section": "contexts"})
    at = app.switch_page("views/token.py").run()  # the link /token?...&section=contexts, opened
    ok(at)
    assert at.session_state["w_section_token"] == "Contexts" and figures_of(at) == []
    assert "Most typical" in " ".join(m.value for m in at.markdown)
    assert "<mark><b>her</b></mark>" in " ".join(h.body for h in at.html)
    assert at.query_params["section"] in (["contexts"], "contexts")
    open_section(at, "token", "Nearest types")
    st_ = run.stats()
    tid = int(run.tokens().set_index("token")["token_id"]["her"])
    want = nearest_types(
        st_.mean[st_.layer(3)],
        st_.token_ids,
        st_.mean[st_.layer(3), int(np.searchsorted(st_.token_ids, tid))],
        10,
        exclude=tid,
    )
    assert at.dataframe[0].value["cosine"].tolist() == pytest.approx(want["cosine"].tolist())
    hl = trace(figure(at, "her and its 10 nearest types at layer 3"), "highlighted")
    assert len(figures_of(at)) == 1 and len(hl["text"]) == 11 and hl["text"][0] == "her"


def test_occurrences_search_says_how_many_occurrences_matched(app, run):
    import duckdb

    at = open_page(app, "occurrences", layer="3")
    at.text_input(key="w_occ_search").set_value("the").run()
    ok(at)
    with duckdb.connect(str(run.path), read_only=True) as con:  # the run file itself, counted in SQL
        tid = int(run.tokens().set_index("token")["token_id"]["the"])
        n = con.execute("select count(*) from occurrences where layer = 3 and token_id = ?", [tid]).fetchone()[0]
    assert n > 1 and any(f"`the`: {n:,} occurrences at layer 3" in c.value for c in at.caption)
    with duckdb.connect(str(run.path), read_only=True) as con:  # the box's reference: the points' extent
        x0, x1, y0, y1 = con.execute(
            "select min(x), max(x), min(y), max(y) from occurrences where layer = 3"
        ).fetchone()
    assert any(f"span x {x0:.4f} to {x1:.4f} and y {y0:.4f} to {y1:.4f}" in c.value for c in at.caption)


def test_occurrences_box_hands_its_contexts_to_the_token_tab(app, run):
    """A box on Occurrences, then "Open … in Token": the Token page opens on its Contexts tab, where the type's
    uses inside the box are listed (a DuckDB query the test repeats)."""
    from normvar_core.runs import occurrence_queries as O

    at = open_page(app, "occurrences", layer="3")
    for k, val in zip(("w_occ_x0", "w_occ_x1", "w_occ_y0", "w_occ_y1"), (-1e9, 1e9, -1e9, 1e9)):
        at.number_input(key=k).set_value(val)
    at.run()
    ok(at)
    picker = at.selectbox(key="occ_sel_token_pick")  # every type in the box, the first one picked
    assert len(picker.options) > 1
    picker.set_value(picker.options[1]).run()
    token = picker.value
    at.button(key="occ_sel_to_token").click().run()
    ok(at)
    assert at.session_state["w_section_token"] == "Contexts" and at.text_input(key="w_token").value == token
    predicate = O.box_predicate(3, (-1e9, 1e9), (-1e9, 1e9))
    tid = int(run.tokens().set_index("token")["token_id"][token])
    want = O.selected_contexts(run, predicate, token_id=tid, limit=50)
    got = at.dataframe[-1].value  # the box expander's table
    assert len(got) == len(want) > 0
    assert got[["sentence_id", "position"]].values.tolist() == want[["sentence_id", "position"]].values.tolist()


def test_compare_page_matches_relative_depth(app, run):
    at = open_page(app, "compare", run2=RUN2, depth="0.5")
    assert len(figures_of(at)) == 1  # Fig. 4 first; the ratios and the scatters when opened
    fig4 = figure(at, "Fig. 4 on a relative-depth axis")
    lib = analyses.tradeoff(run.stats(), 10, 1e5).sort_values("layer")
    _, slope, _ = [t for t in fig4["data"] if t.get("mode") == "lines+markers" and t.get("name") == RUN]
    np.testing.assert_allclose(arr(slope["y"]), lib["slope"])
    np.testing.assert_allclose(arr(slope["x"]), lib["layer"] / 6)
    dec = figure(open_section(at, "compare", "Fig. 5/6"), "Fig. 5/6")
    assert len(figures_of(at)) == 1
    lib = analyses.decomposition(run.stats(), 10, 1e5)
    first = [t for t in dec["data"] if t.get("name") == RUN][0]
    np.testing.assert_allclose(arr(first["y"]), lib["m_over_q"])
    np.testing.assert_allclose(arr(first["x"]), lib["layer"] / 6)
    open_section(at, "compare", "matched depth")
    assert at.query_params["section"] in (["scatters"], "scatters")
    a = figure(at, f"{RUN} · layer 3")
    b = figure(at, f"{RUN2} · layer 2")  # stored layers 0,2,4,6: 2 is the closest to depth 0.5
    assert len(arr(trace(a, "token types")["x"])) == len(in_band(run, 3))
    assert len(arr(trace(b, "token types")["x"])) == len(in_band(run, 2))
    assert a["layout"]["xaxis"]["range"] == b["layout"]["xaxis"]["range"]  # side by side, shared axes
    at.slider(key="w_depth").set_value(1.0).run()  # the depth is above the tabs
    ok(at)
    assert figure(at, f"{RUN} · layer 6") and figure(at, f"{RUN2} · layer 6")


def test_runs_page_lists_runs_and_metadata(app, run):
    at = open_page(app, "runs")
    table = at.dataframe[0].value
    assert set(table["name"]) == {RUN, RUN2}
    row = table.set_index("name").loc[RUN]
    assert row["|T|"] == run.meta["n_types"] and row["|X| per layer"] == run.meta["n_embeddings"]
    assert any(j.value.get("name") == RUN for j in at.json if isinstance(j.value, dict)) or any(
        RUN in str(j.value) for j in at.json
    )
    from normvar_core.viz.table_words import words

    assert not any("v_w" in d.value.columns for d in at.dataframe)  # headed in words, not the run file's names
    ls = [d.value for d in at.dataframe if words("v_w") in d.value.columns][0]
    np.testing.assert_allclose(ls[words("q")], run.layer_stats()["q"])


def test_new_run_rejects_oversize_upload(app, monkeypatch, data_dir):
    monkeypatch.setenv("NORMVAR_MAX_UPLOAD_MB", "0.0001")  # ~100 bytes
    at = open_page(app, "new_run")
    at.file_uploader(key="w_upload").set_value(("big.txt", b"A sentence.\n" * 100, "text/plain"))
    at.button(key="w_submit").click().run()
    assert at.error and "over the" in at.error[0].value and "MB limit" in at.error[0].value
    assert not list((data_dir / "corpora").glob("*")) or all(
        p.stat().st_size < 1000 for p in (data_dir / "corpora").glob("*")
    )


# ============================================================================ end to end
@pytest.mark.subprocess
def test_upload_worker_publish_visible(tmp_path, monkeypatch, minilm_path):
    """Upload a corpus on New run -> the job queue -> a real worker process -> a published run that
    the Trade-off page draws."""
    from streamlit.testing.v1 import AppTest

    from normvar_core.service.jobs import JobStore

    monkeypatch.setenv("NORMVAR_DATA", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("views/new_run.py").run()
    ok(at)
    text = (
        "\n".join(
            f"The {w} was quiet in the morning and the house was still."
            for w in ("garden", "street", "river", "room", "town", "field", "sea", "sky")
        )
        * 3
    )
    at.file_uploader(key="w_upload").set_value(("../../etc/My Corpus!.txt", text.encode(), "text/plain"))
    at.button(key="w_submit").click().run()
    ok(at)
    jobs = JobStore(tmp_path).list()
    assert len(jobs) == 1 and jobs[0].state == "queued"
    job = jobs[0]
    assert job.name == "minilm__My-Corpus"  # the uploaded name is sanitized, never a path
    corpus = Path(job.config["corpus"])
    assert corpus.parent == tmp_path / "corpora" and corpus.read_bytes() == text.encode()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "normvar_core.service.cli", "worker", "--once", "--data-dir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert JobStore(tmp_path).get(job.id).state == "done"
    at.run()  # the watcher shows it published
    ok(at)
    assert any("Published" in s.value for s in at.success)
    at.query_params.update({"run": job.name})
    at.switch_page("views/tradeoff.py").run()
    ok(at)
    assert at.selectbox(key="w_run").value == job.name
    fig = figures_of(at)[0]
    assert job.name in fig["layout"]["title"]["text"]


# ============================================================================ the process
def test_every_page_draws_without_loading_torch(data_dir):
    """A fresh interpreter runs the app and every page of the registry on the real run: no page fails,
    and the dashboard's process ends with neither torch nor transformers loaded (the New-run page reads
    the installed aliases and plans memory in a child process; the Token page reads the tokenizer's files)."""
    code = f"""
import json, sys
from streamlit.testing.v1 import AppTest
from normvar_core.viz.pages import PAGES
at = AppTest.from_file({APP!r}, default_timeout=120)
at.query_params.update({{"run": {RUN!r}}})
at.run()
failed = {{}}
for page in PAGES:
    at.switch_page("views/" + page.file).run()
    problems = [e.value for e in at.exception] + [e.value for e in at.error]
    if problems:
        failed[page.key] = [str(p)[:300] for p in problems]
print(json.dumps({{"failed": failed, "loaded": sorted(m for m in ("torch", "transformers") if m in sys.modules)}}))
"""
    env = dict(os.environ, NORMVAR_DATA=str(data_dir), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"failed": {}, "loaded": []}, result
