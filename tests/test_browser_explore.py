"""Exploration in a real browser (Playwright + Debian chromium, one Streamlit server and one worker for the
module): the clouds' tokens in the URL restored by a fresh browser, per-token colours, legend and
labels above the points without overlaps (also on the deck's slide), t-SNE beside PCA, box selection
on the trade-off and the clouds handed to the other pages, nearest types, the tokenizer-normalised
lookup with suggestions, and "your own sentence" through the worker — with torch never loaded in the
dashboard's process. Screenshots land in browser_helpers.ARTIFACTS (explore_*.png)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import brute
import numpy as np
import pytest
from browser_helpers import ARGS, ARTIFACTS, CHROMIUM, start_streamlit, stop_streamlit
from dashboard_run import RUN

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def data(data_dir) -> Path:
    return data_dir


@pytest.fixture(scope="module")
def run(data):
    from normvar_core.runs.reader import open_run

    return open_run(data / "runs" / f"{RUN}.duckdb")


@pytest.fixture(scope="module")
def server(tmp_path_factory, data):
    """The dashboard and a worker on the data directory (the worker runs "your own sentence")."""
    base_tmp = tmp_path_factory.getbasetemp()
    wlog = open(base_tmp / "worker-explore.log", "w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "normvar_core.service.cli", "worker", "--data-dir", str(data)],
        cwd=ROOT,
        env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
        stdout=wlog,
        stderr=subprocess.STDOUT,
    )
    try:
        proc, base, log = start_streamlit(data, base_tmp / "streamlit-explore.log")
    except BaseException:
        worker.kill()
        raise
    yield {"url": base, "pid": proc.pid}
    worker.terminate()
    try:
        worker.wait(timeout=15)
    except subprocess.TimeoutExpired:
        worker.kill()
    wlog.close()
    stop_streamlit(proc, log)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


# ------------------------------------------------------------------------------------------ helpers
FIND = """(part) => [...document.querySelectorAll('.js-plotly-plot')].find(
    g => g._fullLayout && String(g._fullLayout.title.text || '').includes(part))"""


def wait_plot(page, part: str, timeout=120000):
    page.wait_for_function(
        f"(part) => {{ const g = ({FIND})(part); return !!(g && g._fullData && g._fullData.length); }}",
        arg=part,
        timeout=timeout,
    )
    page.wait_for_timeout(800)


def plot_eval(page, part: str, body: str, arg=None):
    """Evaluate ``body`` (a JS function of (g, arg)) on the plot whose title holds ``part``."""
    return page.evaluate(f"([part, arg]) => {{ const g = ({FIND})(part); return ({body})(g, arg); }}", [part, arg])


TRACES = (
    "(g) => g._fullData.filter(d => d.name !== 'origin')"
    ".map(d => ({name: d.name, color: d.marker.color, n: d.x.length}))"
)
LABEL_BOXES = """(g) => [...g.querySelectorAll('.annotation')].filter(a => a.querySelector('.annotation-text-g'))
    .map(a => { const r = a.querySelector('.annotation-text-g').getBoundingClientRect(), o = g.getBoundingClientRect();
                return {l: r.left - o.left, t: r.top - o.top, r: r.right - o.left, b: r.bottom - o.top,
                        text: a.textContent}; })"""
COLOURS = "(g) => g._fullData.filter(d => d.name !== 'origin' && d.marker).map(d => d.marker.color)"


def assert_labels_clear(page, boxes, n, colours):
    """No two label boxes overlap, and no label is hidden under the points: inside each label (border
    excluded) no pixel has a marker's colour — points under a label show through its white box at 12%."""
    import io

    from PIL import Image

    assert len(boxes) == n
    rgb = np.array([[int(c[k : k + 2], 16) for k in (1, 3, 5)] for c in colours if str(c).startswith("#")], float)
    for i, a in enumerate(boxes):
        for b in boxes[:i]:
            assert a["r"] <= b["l"] or b["r"] <= a["l"] or a["b"] <= b["t"] or b["b"] <= a["t"], (a["text"], b["text"])
    for a in boxes:
        page.evaluate(
            "(t) => [...document.querySelectorAll('.annotation')].find(x => x.textContent === t)"
            ".scrollIntoView({block: 'center'})",
            a["text"],
        )
        r = page.evaluate(
            "(t) => { const x = [...document.querySelectorAll('.annotation')].find(x => x.textContent === t)"
            ".querySelector('.annotation-text-g').getBoundingClientRect();"
            " return [x.left, x.top, x.width, x.height]; }",
            a["text"],
        )
        img = np.asarray(
            Image.open(
                io.BytesIO(
                    page.screenshot(
                        clip={"x": r[0] + 4, "y": r[1] + 4, "width": max(r[2] - 8, 1), "height": max(r[3] - 8, 1)}
                    )
                )
            ).convert("RGB"),
            float,
        )
        px = img.reshape(-1, 3)
        d = np.linalg.norm(px[:, None, :] - rgb[None], axis=2).min(axis=1)
        assert (d < 30).sum() == 0, f"label {a['text']!r} is covered by points"


def box_select(page, part: str, box_px) -> list[str]:
    """Drag a real box selection (the modebar's Box Select) over ``box_px`` = (x0, y0, x1, y1) in the plot
    area's pixels; returns the tokens of the points inside it, computed from the figure's data."""
    plot_eval(page, part, "(g) => g.querySelector('.modebar-btn[data-title=\"Box Select\"]').click()")
    origin = plot_eval(
        page,
        part,
        """(g) => { const r = g.getBoundingClientRect(), L = g._fullLayout;
        return [r.left + L.xaxis._offset, r.top + L.yaxis._offset]; }""",
    )
    x0, y0, x1, y1 = box_px
    page.mouse.move(origin[0] + x0, origin[1] + y0)
    page.mouse.down()
    page.mouse.move(origin[0] + (x0 + x1) / 2, origin[1] + (y0 + y1) / 2, steps=6)
    page.mouse.move(origin[0] + x1, origin[1] + y1, steps=6)
    page.mouse.up()
    return plot_eval(
        page,
        part,
        """(g, b) => { const L = g._fullLayout, out = [];
        for (const d of g._fullData) { if (!d.text || d.mode === 'text' || d.name === 'origin') continue;
          for (let i = 0; i < d.x.length; i++) { const px = L.xaxis.l2p(d.x[i]), py = L.yaxis.l2p(d.y[i]);
            if (px >= b[0] && px <= b[2] && py >= b[1] && py <= b[3]) out.push(String(d.text[i])); } }
        return [...new Set(out)]; }""",
        list(box_px),
    )


def shot(page, part: str, name: str) -> None:
    page.evaluate(f"(part) => ({FIND})(part).scrollIntoView()", part)
    page.locator(".js-plotly-plot").filter(has=page.locator(f"text={part}")).first.screenshot(
        path=str(ARTIFACTS / f"explore_{name}.png")
    )


# ------------------------------------------------------------------------------------------ token clouds
def test_clouds_tokens_in_the_url_colours_legend_and_labels(server, browser, run):
    sampled = run.sampled_tokens()
    ids = sampled.sort_values("count", ascending=False)["token_id"].astype(int).tolist()[:7]
    name = dict(zip(sampled["token_id"].astype(int), sampled["token"].astype(str)))
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.goto(f"{server['url']}/clouds?run={RUN}&layer=3&cloud={','.join(map(str, ids))}")
    wait_plot(page, "sampled embeddings")
    traces = plot_eval(page, "sampled embeddings", TRACES)
    assert [t["name"] for t in traces] == [name[i] for i in ids]
    assert len({t["color"] for t in traces}) == len(ids)  # one colour per token
    assert page.locator(".legend .traces").count() == len(ids)  # a per-token legend
    assert_labels_clear(
        page,
        plot_eval(page, "sampled embeddings", LABEL_BOXES),
        len(ids),
        plot_eval(page, "sampled embeddings", COLOURS),
    )

    # pick one more token in the browser: the URL records it and a fresh browser restores it
    extra = next(
        t
        for t in sampled.sort_values("count", ascending=False)["token_id"].astype(int)
        if t not in ids and name[t].isalpha() and len(name[t]) >= 4
    )
    ms = page.locator('[data-testid="stMultiSelect"]').first
    ms.locator("input").fill(name[extra])
    page.wait_for_timeout(600)
    page.keyboard.press("Enter")
    page.wait_for_function(
        "(n) => { const g = [...document.querySelectorAll('.js-plotly-plot')].find(g => "
        "String(g._fullLayout.title.text||'').includes('sampled embeddings'));"
        " return g && g._fullData.filter(d => d.name !== 'origin').length === n; }",
        arg=len(ids) + 1,
        timeout=60000,
    )
    page.wait_for_function("(id) => location.search.includes(String(id))", arg=extra, timeout=30000)
    url = page.url
    want = [t["name"] for t in plot_eval(page, "sampled embeddings", TRACES)]
    assert name[extra] in want
    shot(page, "sampled embeddings", "clouds_pca")

    fresh = browser.new_context(viewport={"width": 1500, "height": 1100})
    p2 = fresh.new_page()
    p2.goto(url)
    wait_plot(p2, "sampled embeddings")
    assert [t["name"] for t in plot_eval(p2, "sampled embeddings", TRACES)] == want
    fresh.close()

    # a box on the clouds: the selected tokens are listed and go to the Trade-off's highlights
    area = plot_eval(page, "sampled embeddings", "(g) => [g._fullLayout.xaxis._length, g._fullLayout.yaxis._length]")
    inside = box_select(page, "sampled embeddings", (area[0] * 0.05, area[1] * 0.05, area[0] * 0.6, area[1] * 0.6))
    assert inside, "the box holds no point"
    page.get_by_text(f"Selection: {len(inside)} token type").wait_for(timeout=60000)
    page.get_by_role("button", name="Highlight on Trade-off").click()
    page.wait_for_function("() => location.pathname.includes('tradeoff')", timeout=60000)
    wait_plot(page, "token types with")
    hl = plot_eval(page, "token types with", "(g) => g._fullData.filter(d => d.name === 'highlighted')[0].text")
    assert sorted(hl) == sorted(t for t in inside if "," not in t)  # ?tokens= is comma-separated
    page.close()


def test_clouds_slide_labels_clear_in_a_browser(browser, run):
    """The deck's clouds slide, drawn by plotly.js in chromium at the slide's size."""
    import plotly

    from normvar_core.report.slides import clouds_slide

    slide = clouds_slide([run])
    fig = slide.figure
    js = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()
    page = browser.new_page(viewport={"width": 1700, "height": 1000})
    page.set_content(
        f"<html><body style='margin:0'><div id='f'></div><script>{js}</script><script>"
        f"Plotly.newPlot('f', {fig.to_json()}.data, {fig.to_json()}.layout);</script></body></html>"
    )
    page.wait_for_function(
        "() => { const g = document.getElementById('f'); return !!(g._fullData && g._fullData.length); }"
    )
    page.wait_for_timeout(500)
    boxes = page.evaluate(f"() => ({LABEL_BOXES})(document.getElementById('f'))")
    assert_labels_clear(
        page,
        boxes,
        len([d for d in fig.data if d.name != "origin"]),
        page.evaluate(f"() => ({COLOURS})(document.getElementById('f'))"),
    )
    page.close()


# ------------------------------------------------------------------------------------------ t-SNE
def test_tsne_beside_pca_is_the_seeded_map(server, browser, run):
    from normvar_core.viz.clouds import tsne_map

    sampled = run.sampled_tokens()
    ids = sampled.sort_values("count", ascending=False)["token_id"].astype(int).tolist()[:5]
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.goto(f"{server['url']}/clouds?run={RUN}&layer=2&cloud={','.join(map(str, ids))}")
    wait_plot(page, "PCA")
    page.get_by_text("t-SNE", exact=True).click()
    wait_plot(page, "t-SNE", timeout=240000)
    page.wait_for_function("() => location.search.includes('map=tsne')", timeout=60000)  # written at the script's end
    got = plot_eval(
        page,
        "t-SNE",
        "(g) => g._fullData.filter(d => d.name !== 'origin')"
        ".map(d => ({cd: d.customdata.map(c => [c[2], c[3]]), x: Array.from(d.x), y: Array.from(d.y)}))",
    )
    tm = tsne_map(run.samples(2)).set_index(["token_id", "i"])
    for tr in got:
        key = [(int(a), int(b)) for a, b in tr["cd"]]
        np.testing.assert_allclose(tr["x"], tm.loc[key, "tsne1"].to_numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(tr["y"], tm.loc[key, "tsne2"].to_numpy(), rtol=1e-6, atol=1e-6)
    assert_labels_clear(page, plot_eval(page, "t-SNE", LABEL_BOXES), len(ids), plot_eval(page, "t-SNE", COLOURS))
    shot(page, "t-SNE", "clouds_tsne")
    page.close()


# ------------------------------------------------------------------------------------------ linked selection
def test_box_select_on_the_tradeoff_goes_to_the_clouds(server, browser, run):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.goto(f"{server['url']}/tradeoff?run={RUN}&layer=3")
    wait_plot(page, "token types with")
    # a box around the most frequent types (they have stored samples)
    c = plot_eval(
        page,
        "token types with",
        """(g) => { const d = g._fullData[0], L = g._fullLayout; let k = 0;
        for (let i = 0; i < d.x.length; i++) if (d.customdata[i][0] > d.customdata[k][0]) k = i;
        return [L.xaxis.l2p(d.x[k]), L.yaxis.l2p(d.y[k])]; }""",
    )
    inside = box_select(page, "token types with", (c[0] - 60, c[1] - 60, c[0] + 60, c[1] + 60))
    assert len(inside) >= 2
    page.get_by_text(f"Selection: {len(inside)} token types").wait_for(timeout=60000)
    shot(page, "token types with", "tradeoff_box_select")
    sampled = set(run.sampled_tokens()["token"].astype(str))
    n_cloud = sum(t in sampled for t in inside)
    # the button says how many of the selection the clouds can draw, and the clouds page says why
    label = "Show in Token clouds" if n_cloud == len(inside) else f"Show {n_cloud} of {len(inside)} in Token clouds"
    page.get_by_role("button", name=label, exact=True).click()
    page.wait_for_function(
        "() => location.pathname.includes('clouds') && location.search.includes('cloud=')", timeout=60000
    )
    wait_plot(page, "sampled embeddings")
    if n_cloud < len(inside):
        page.get_by_text(f"Showing {n_cloud} of the {len(inside)} selected token types").wait_for(timeout=30000)
    names = [t["name"] for t in plot_eval(page, "sampled embeddings", TRACES)]
    assert sorted(names) == sorted(t for t in inside if t in sampled)
    page.close()


def test_a_large_selection_says_what_it_hands_on_and_stays_until_cleared(server, browser, run):
    """A box over the whole trade-off: the highlight button says it keeps 50 of the N types; the selection is still
    listed after a visit to another page (the sidebar, same session) and goes only with "Clear selection"."""
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.goto(f"{server['url']}/tradeoff?run={RUN}&layer=3")
    wait_plot(page, "token types with")
    area = plot_eval(page, "token types with", "(g) => [g._fullLayout.xaxis._length, g._fullLayout.yaxis._length]")
    inside = box_select(page, "token types with", (1, 1, area[0] - 1, area[1] - 1))
    assert len(inside) > 50
    listed = page.get_by_text(f"Selection: {len(inside)} token types")
    listed.wait_for(timeout=60000)
    page.get_by_role("button", name=f"Highlight the first 50 of {len(inside)} on Trade-off", exact=True).click()
    page.wait_for_function("() => (new URLSearchParams(location.search).get('tokens') || '').length > 0", timeout=60000)
    wait_plot(page, "token types with")
    page.wait_for_function(
        f"() => !!({FIND})('token types with')?._fullData?.some(d => d.name === 'highlighted')", timeout=60000
    )
    hl = plot_eval(page, "token types with", "(g) => g._fullData.filter(d => d.name === 'highlighted')[0].text")
    assert set(hl) <= set(inside) and 50 - sum("," in t for t in inside) <= len(hl) <= 50  # ?tokens= is comma-separated
    nav = page.get_by_test_id("stSidebarNav")
    nav.get_by_role("link", name="Layers").click()
    page.wait_for_function("() => location.pathname.endsWith('/layers')", timeout=60000)
    nav.get_by_role("link", name="Trade-off").click()
    page.wait_for_function("() => location.pathname.endsWith('/tradeoff')", timeout=60000)
    listed.wait_for(timeout=60000)  # the chart's own selection is gone; the list is not
    page.get_by_role("button", name="Clear selection").click()
    # the selection's hint (the page's caption above says "Drag a box or lasso" too)
    page.get_by_text("Click a point, or drag a box or lasso").wait_for(timeout=60000)
    listed.wait_for(state="detached", timeout=60000)
    page.close()


# ------------------------------------------------------------------------------------------ nearest types
def _nearest_tokens(run, layer, q, k, exclude=None) -> list[str]:
    """The tokens of ``brute.nearest`` over the run's means at ``layer``."""
    st = run.stats()
    ids, _ = brute.nearest(st.mean[st.layer(layer)], st.token_ids, q, k, exclude=exclude)
    token = run.tokens().set_index("token_id")["token"]
    return [str(token[i]) for i in ids]


def test_nearest_types_on_token_and_clouds(server, browser, run):
    page = browser.new_page(viewport={"width": 1500, "height": 1300})
    page.goto(f"{server['url']}/?page=token&run={RUN}&token=her&layer=3")
    page.get_by_role("tab", name="Nearest types").click(timeout=90000)
    wait_plot(page, "nearest types at layer 3")
    st = run.stats()
    tid = int(run.tokens().set_index("token")["token_id"]["her"])
    col = int(np.searchsorted(st.token_ids, tid))
    want = _nearest_tokens(run, 3, st.mean[st.layer(3), col], 10, exclude=tid)
    hl = plot_eval(page, "nearest types at layer 3", "(g) => g._fullData.filter(d => d.name === 'highlighted')[0].text")
    assert list(hl) == ["her"] + want
    shot(page, "nearest types at layer 3", "token_neighbours")

    # one click on an isolated sampled embedding in the clouds: its nearest types, highlighted
    sampled = run.sampled_tokens()
    ids = sampled.sort_values("count", ascending=False)["token_id"].astype(int).tolist()[:4]
    page.goto(f"{server['url']}/clouds?run={RUN}&layer=3&cloud={','.join(map(str, ids))}")
    wait_plot(page, "sampled embeddings")
    pt = plot_eval(
        page,
        "sampled embeddings",
        """(g) => { const L = g._fullLayout, pts = [];
        g._fullData.forEach(d => { if (d.name === 'origin') return; for (let i = 0; i < d.x.length; i++)
            pts.push({x: L.xaxis.l2p(d.x[i]), y: L.yaxis.l2p(d.y[i]),
                      tid: d.customdata[i][2], i: d.customdata[i][3]}); });
        let best = null, bd = -1;
        for (const p of pts) {
            if (p.x < 20 || p.y < 20 || p.x > L.xaxis._length - 20 || p.y > L.yaxis._length - 20) continue;
            let m = 1e9; for (const q of pts) if (q !== p) m = Math.min(m, Math.hypot(p.x - q.x, p.y - q.y));
            if (m > bd) { bd = m; best = p; } }
        const r = g.getBoundingClientRect();
        return {x: r.left + L.xaxis._offset + best.x, y: r.top + L.yaxis._offset + best.y,
                tid: best.tid, i: best.i, gap: bd}; }""",
    )
    assert pt["gap"] > 4
    page.mouse.move(pt["x"] - 15, pt["y"] - 15)
    page.mouse.move(pt["x"], pt["y"], steps=4)
    page.wait_for_timeout(400)
    page.mouse.click(pt["x"], pt["y"])
    page.get_by_text("types nearest by cosine to this sampled embedding").first.wait_for(timeout=60000)  # the table
    page.get_by_role("tab", name="Among all types (Fig. 8, Table 2)").click()  # Fig. 8: the same types
    wait_plot(page, "Nearest types among all types")
    smp = run.samples(3, [int(pt["tid"])])
    vec = smp.loc[smp["i"] == int(pt["i"]), "vector"].iloc[0]
    hl = plot_eval(
        page, "Nearest types among all types", "(g) => g._fullData.filter(d => d.name === 'highlighted')[0].text"
    )
    assert list(hl) == _nearest_tokens(run, 3, vec, 10)
    page.close()


# ------------------------------------------------------------------------------------------ lookup
def test_lookup_normalises_and_suggests(server, browser, run):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.goto(f"{server['url']}/?page=token&run={RUN}&token=Her")
    page.get_by_text("is the run's type 'her'").wait_for(timeout=90000)
    page.goto(f"{server['url']}/?page=token&run={RUN}&token=Fatherr")
    page.get_by_text("normalised by the tokenizer: 'fatherr'").wait_for(timeout=90000)
    page.get_by_text("Nearest types by prefix and edit distance").wait_for()
    page.screenshot(
        path=str(ARTIFACTS / "explore_token_lookup.png"), clip={"x": 0, "y": 0, "width": 1500, "height": 520}
    )
    first = page.get_by_role("button", name="father (n=")
    first.click()
    page.wait_for_function("() => location.search.includes('token=father')", timeout=60000)
    wait_plot(page, "father: Q, M, V across layers")
    page.close()


# ------------------------------------------------------------------------------------------ your own sentence
def test_your_own_sentence_through_the_worker_without_torch_in_the_dashboard(server, browser, run, data):
    page = browser.new_page(viewport={"width": 1500, "height": 1400})
    page.goto(f"{server['url']}/?page=token&run={RUN}&token=her&layer=3")
    wait_plot(page, "her: Q, M, V across layers")
    page.get_by_role("tab", name="Your own sentence").click()
    page.get_by_role("textbox", name="Sentence").fill("She said that her father was there.")
    page.get_by_role("button", name="Run the model").click()
    wait_plot(page, "percentile of the type's sampled uses", timeout=300000)
    newest = max((data / "reports").glob("*.sentence.json"), key=lambda p: p.stat().st_mtime)
    doc = json.loads(newest.read_text())
    assert doc["text"] == "She said that her father was there." and doc["run"] == RUN
    z = plot_eval(page, "percentile of the type's sampled uses", "(g) => g._fullData[0].z.map(r => Array.from(r))")
    rows = {(r["position"], r["layer"]): r["percentile"] for r in doc["rows"]}
    positions = sorted({r["position"] for r in doc["rows"]})
    for a, p in enumerate(positions):
        for b, layer in enumerate(doc["layers"]):
            want = rows[(p, layer)]
            if want is None:
                assert z[a][b] is None or z[a][b] != z[a][b]  # blank (NaN): no sampled use
            else:
                assert abs(z[a][b] - want) < 1e-9
    wait_plot(page, "of your sentence on the trade-off at layer 3")
    star = plot_eval(
        page,
        "of your sentence on the trade-off",
        "(g) => { const d = g._fullData.find(d => d.name === 'your occurrence'); return [d.x[0], d.y[0], d.text[0]]; }",
    )
    row = next(r for r in doc["rows"] if r["layer"] == 3 and r["token"] == star[2] and r["m"] is not None)
    assert star[0] == pytest.approx(row["m"]) and star[1] == pytest.approx(row["dist_sq"])
    shot(page, "percentile of the type's sampled uses", "own_sentence_heatmap")
    shot(page, "of your sentence on the trade-off", "own_sentence_tradeoff")
    page.close()
    maps = Path(f"/proc/{server['pid']}/maps").read_text()
    assert "libtorch" not in maps and "/torch/" not in maps, "the dashboard process loaded torch"
