"""Run overlays in a real browser (Playwright + Debian chromium, one
streamlit server for the module): shared links of every multi-run view come back the same in a fresh
browser, Outliers' colour scale and distinct rows, uploads named by their file, real runs before their
nulls, Geometry with the null of every overlaid run (log axes, power-of-ten ticks, titles apart — also
on the report's slides), presentation mode, Training's empty state, the Runs table, the dropped
sentences, Compare's shared ranges and one-click points. Screenshots land in browser_helpers.ARTIFACTS."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from browser_helpers import ARTIFACTS, wait_url
from dashboard_run import RUN
from run_overlays_data import UPLOAD_RUN, null_of

pytestmark = [pytest.mark.browser, pytest.mark.slow]
NULL_LABEL = "Gaussian null (isotropic)"


@pytest.fixture(scope="module")
def data(items_data) -> Path:
    """The server fixture's data dir."""
    return items_data


def _page(browser, h: int = 1100):
    """A page in a fresh context: no cookies, no storage, no session — a colleague opening the link."""
    ctx = browser.new_context(viewport={"width": 1400, "height": h})
    return ctx.new_page()


def _wait_fig(page, title: str, timeout: int = 120000) -> None:
    page.wait_for_function(
        "(t) => [...document.querySelectorAll('.js-plotly-plot')].some(g => g._fullLayout && g._fullData && "
        "g._fullData.length && String(g._fullLayout.title.text || '').includes(t))",
        arg=title,
        timeout=timeout,
    )


def _fig(page, title: str, expr: str):
    """Evaluate ``expr`` (a JS expression of ``g``, the plotly graph div) on the figure titled ~``title``."""
    return page.evaluate(
        "([t, e]) => { const g = [...document.querySelectorAll('.js-plotly-plot')].find(g => g._fullLayout && "
        "String(g._fullLayout.title.text || '').includes(t)); return (new Function('g', 'return ' + e))(g); }",
        [title, expr],
    )


def _names(page, title: str, axis: str = "x") -> list[str]:
    """The runs' and nulls' lines in one panel (the interval bands are filled areas, and the cross-context TwoNN a
    second line of its run, checked on the page's AppTest: left out)."""
    return _fig(
        page,
        title,
        f"g._fullData.filter(d => (d.xaxis || 'x') === '{axis}' && (!d.fill || d.fill === 'none') && "
        f"!(d.name || '').includes('interval') && !(d.name || '').includes('cross-context'))"
        f".map(d => d.name)",
    )


def _table(page, header: str) -> list[list[str]]:
    """The rows of the st.dataframe whose header holds ``header`` (its accessible DOM table)."""
    page.wait_for_function(
        "(h) => [...document.querySelectorAll('[data-testid=stDataFrame] table')].some(t => t.textContent.includes(h))",
        arg=header,
        timeout=60000,
    )
    return page.evaluate(
        "(h) => { const t = [...document.querySelectorAll('[data-testid=stDataFrame] table')].find(t => "
        "t.querySelector('tr').textContent.includes(h)); return [...t.querySelectorAll('tr')].map(r => "
        "[...r.children].map(c => c.textContent)); }",
        header,
    )


def _settled(page, ms: int = 1500) -> None:
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=60000)
    page.wait_for_timeout(ms)


# ---------------------------------------------------------------------------- Geometry overlays
def test_geometry_overlay_chosen_in_the_ui_round_trips_with_the_null_of_every_run(server, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    page = _page(browser, 1300)
    page.goto(f"{server}/?page=geometry&run={RUN}&null={null_of(RUN)}")
    _wait_fig(page, "Layer geometry")
    # add the uploaded run through the multiselect and turn relative depth off, as a user would
    box = page.locator("[data-testid=stMultiSelect]").first
    box.locator("input").click()
    page.keyboard.type(UPLOAD_RUN)
    page.get_by_role("option", name=UPLOAD_RUN, exact=True).click()
    page.keyboard.press("Escape")
    page.wait_for_function(f"() => location.search.includes('overlay={UPLOAD_RUN}')", timeout=60000)
    page.get_by_text("Relative depth").first.click()
    page.wait_for_function("() => location.search.includes('rel=0')", timeout=60000)
    _settled(page)
    want = [RUN, UPLOAD_RUN, f"{RUN} · {NULL_LABEL}", f"{UPLOAD_RUN} · {NULL_LABEL}"]
    names = _names(page, "Layer geometry", "x2")  # the intrinsic-dimension panel
    assert sorted(names) == sorted(want)
    # log axes for ID and PR, subplot titles clear of axis titles
    layout = _fig(
        page,
        "Layer geometry",
        "[g._fullLayout.yaxis2.type, g._fullLayout.yaxis3.type, g._fullLayout.xaxis3.title.text]",
    )
    assert layout == ["log", "log", "layer"]
    pairs, seen = _overlaps(page, "Layer geometry")
    assert pairs == [] and seen > 0
    page.locator("[data-testid=stMainBlockContainer]").screenshot(path=str(ARTIFACTS / "geometry_null_overlay.png"))

    page.get_by_role("tab", name="Covariance spectrum").click()  # the spectrum: its own tab
    _wait_fig(page, "Covariance spectrum")
    page.wait_for_function("() => location.search.includes('section=spectrum')", timeout=60000)
    _settled(page)
    spectra = _names(page, "Covariance spectrum")
    assert sorted(n.rsplit(" · layer", 1)[0] for n in spectra) == sorted(want)  # a spectrum for every run
    # powers of ten (no 1µ, 1n)
    ticks = _fig(
        page, "Covariance spectrum", "[...g.querySelectorAll('.ytick text, .xtick text')].map(t => t.textContent)"
    )
    assert ticks and not any(ch in t for t in ticks for ch in "µmnpfk")
    pairs, seen = _overlaps(page, "Covariance spectrum")
    assert pairs == [] and seen > 0
    link = page.url

    # a colleague opens the link in a fresh browser: the spectrum's tab, the same runs, nulls and spectra
    other = _page(browser, 1300)
    other.goto(link)
    _wait_fig(other, "Covariance spectrum")
    _settled(other)
    assert _names(other, "Covariance spectrum") == spectra
    other.get_by_role("tab", name="Layer geometry").click()
    _wait_fig(other, "Layer geometry")
    _settled(other)
    seen = _wait_names(other, "Layer geometry", "x2", names)
    assert seen == names
    assert _fig(other, "Layer geometry", "g._fullLayout.xaxis3.title.text") == "layer"
    q = parse_qs(urlparse(other.url).query)
    assert q["overlay"] == [UPLOAD_RUN] and q["rel"] == ["0"] and q["null"] == [null_of(RUN)]
    page.context.close()
    other.context.close()


def _wait_names(page, title: str, axis: str, want: list[str], timeout_s: float = 120) -> list[str] | None:
    """The panel's line names once they equal ``want`` (the tab's rerun may still be drawing), or the last
    names seen after ``timeout_s`` — so a failure shows what was drawn, not only that a wait timed out."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = _fig(
            page,
            title,
            f"g && g._fullData ? g._fullData.filter(d => (d.xaxis || 'x') === '{axis}' && "
            f"(!d.fill || d.fill === 'none') && !(d.name || '').includes('interval') && "
            f"!(d.name || '').includes('cross-context')).map(d => d.name) : null",
        )
        if seen == want or time.monotonic() > deadline:
            return seen
        page.wait_for_timeout(500)


def _overlaps(page, title: str) -> list:
    """Pairs of (subplot title, axis title) whose boxes intersect in the rendered figure."""
    return _fig(
        page,
        title,
        """(() => {
        const box = e => e.getBoundingClientRect();
        const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
        const subs = [...g.querySelectorAll('.annotation-text')],
              axes = [...g.querySelectorAll('text[class$="title"]:not(.gtitle)')];
        const out = [];
        for (const s of subs) for (const a of axes) if (hit(box(s), box(a))) out.push([s.textContent, a.textContent]);
        return [out, subs.length * axes.length]; })()""",
    )


def test_layers_and_compare_links_come_back_the_same(server, browser):
    page = _page(browser)
    page.goto(f"{server}/?page=layers&run={RUN}&overlay={UPLOAD_RUN}&rel=1")
    _wait_fig(page, "")
    page.wait_for_function(
        "(n) => document.querySelector('.js-plotly-plot')._fullData.some(d => d.name === n)",
        arg=UPLOAD_RUN,
        timeout=60000,
    )
    names = page.evaluate(
        "() => document.querySelector('.js-plotly-plot')._fullData.filter(d => d.showlegend !== false).map(d => d.name)"
    )
    runs = [n for n in names if "interval" not in n]  # each interval band has its own legend entry
    assert runs[:2] == [RUN, UPLOAD_RUN]
    assert (
        page.evaluate("() => document.querySelector('.js-plotly-plot')._fullLayout.xaxis.title.text")
        == "relative depth"
    )
    _settled(page)
    wait_url(page, "overlay=" + UPLOAD_RUN, "rel=1")
    page.context.close()

    page = _page(browser, 1600)
    page.goto(f"{server}/?page=compare&run={RUN}&run2={UPLOAD_RUN}&depth=0.35")
    _wait_fig(page, "Fig. 4 on a relative-depth axis")
    page.get_by_role("tab", name="Trade-off at the matched depth").click()  # the scatters: drawn when opened
    _wait_fig(page, f"{UPLOAD_RUN} · layer 2")
    _wait_fig(page, f"{RUN} · layer 2")
    _settled(page)
    link = page.url
    assert parse_qs(urlparse(link).query)["section"] == ["scatters"]
    other = _page(browser, 1600)
    other.goto(link)  # the link opens that tab
    _wait_fig(other, f"{UPLOAD_RUN} · layer 2")
    _wait_fig(other, f"{RUN} · layer 2")
    page.context.close()
    other.context.close()


# ---------------------------------------------------------------------------- Outliers
def test_outliers_colour_scale_and_distinct_rows(server, browser, data):
    import numpy as np

    from normvar_core.runs.reader import open_run

    page = _page(browser, 1400)
    page.goto(f"{server}/?page=outliers&run={UPLOAD_RUN}&layer=0")
    _wait_fig(page, "Outlier dimensions")
    zmin, zmax = _fig(page, "Outlier dimensions", "[g._fullData[0].zmin, g._fullData[0].zmax]")
    ds = open_run(data / "runs" / f"{UPLOAD_RUN}.duckdb").table("dim_stats")
    piv = ds.pivot(index="layer", columns="dim", values="max_abs").to_numpy()
    z = np.log10(piv / np.median(piv, axis=1, keepdims=True))
    assert zmax == pytest.approx(z.max()) and zmin >= np.percentile(z, 1) - 1e-9
    page.get_by_role("tab", name="Largest activations").click()
    rows = _table(page, "sentence_id")
    head, body = rows[0], rows[1:]
    keys = [(r[head.index("token")], r[head.index("position")], r[head.index("dim")]) for r in body]
    assert len(keys) >= 5 and len(set(keys)) == len(keys)  # no repeated (token, position, dim)
    page.locator("[data-testid=stMainBlockContainer]").screenshot(path=str(ARTIFACTS / "outliers.png"))
    page.context.close()


# ---------------------------------------------------------------------------- Runs page
def test_runs_page_names_uploads_orders_nulls_counts_hidden_states_and_shows_dropped(server, browser):
    page = _page(browser, 1400)
    page.goto(f"{server}/?page=runs&run={UPLOAD_RUN}&present=1")
    rows = _table(page, "hidden states")
    head, body = rows[0], rows[1:]
    by_name = {r[head.index("name")]: r for r in body}
    assert by_name[UPLOAD_RUN][head.index("corpus")] == "my-corpus"  # the file's name, not its hash
    order = [r[head.index("name")] for r in body]
    for run in (RUN, UPLOAD_RUN):
        assert order.index(null_of(run)) == order.index(run) + 1  # each null right under its run
    assert {r[head.index("hidden states")] for r in body} == {"7"}
    # the header agrees; presentation mode: large numbers, labels not cut with "…"
    metric = page.locator("[data-testid=stMetric]").filter(has_text="hidden states")
    assert "7 × 384 d" in metric.text_content()
    size = page.evaluate(
        "() => parseFloat(getComputedStyle(document.querySelector('[data-testid=stMetricValue] p')).fontSize)"
    )
    assert size >= 40
    cut = page.evaluate(
        "() => [...document.querySelectorAll('[data-testid=stMetricLabel] p, "
        "[data-testid=stMetricValue] p')].filter(e => e.scrollWidth > e.clientWidth + 1)"
        ".map(e => e.textContent)"
    )
    assert cut == []
    # the sentences dropped by the 64-word limit
    page.get_by_text("3 sentences dropped by the 64-word limit").click()
    dropped = _table(page, "sentence")
    assert [r[-1].split("]")[0] for r in dropped[1:]] == ["[64 words", "[67 words", "[70 words"]
    page.locator("[data-testid=stMainBlockContainer]").screenshot(path=str(ARTIFACTS / "runs.png"))
    page.context.close()


# ---------------------------------------------------------------------------- Compare
def test_compare_lists_real_runs_first_and_shares_ranges(server, browser):
    page = _page(browser, 1700)
    page.goto(f"{server}/?page=compare&run={RUN}&run2={UPLOAD_RUN}&depth=0.5")
    page.get_by_role("tab", name="Trade-off at the matched depth").click()
    _wait_fig(page, f"{UPLOAD_RUN} · layer 3")
    _wait_fig(page, f"{RUN} · layer 3")
    ranges = [
        _fig(
            page,
            f"{n} · layer 3",
            "[g._fullLayout.xaxis.range, g._fullLayout.yaxis.range, "
            "g._fullData[0].marker.cmin, g._fullData[0].marker.cmax]",
        )
        for n in (RUN, UPLOAD_RUN)
    ]
    assert ranges[0] == ranges[1]
    page.locator("[data-testid=stMainBlockContainer]").screenshot(path=str(ARTIFACTS / "compare.png"))
    page.locator("[data-testid=stSelectbox]").filter(has_text="Compare with").click()
    options = page.get_by_role("option").all_text_contents()
    assert RUN not in options  # the run itself is not offered against itself
    assert options.index(null_of(UPLOAD_RUN)) == options.index(UPLOAD_RUN) + 1
    assert options.index(UPLOAD_RUN) < options.index(null_of(RUN))  # a real run before another's null
    page.context.close()


# ---------------------------------------------------------------------------- Training: empty state
def test_training_empty_state_opens_sweep_mode(server, browser):
    page = _page(browser)
    page.goto(f"{server}/?page=training&run={RUN}")
    page.get_by_role("button", name="Set up a sweep on New run").click()
    page.get_by_text("Checkpoints folder").wait_for(timeout=60000)
    assert page.get_by_role("radio", name="A training sweep: one run per checkpoint").is_checked()
    page.context.close()


def test_one_click_on_a_point_opens_its_token(server, browser):
    page = _page(browser)
    page.goto(f"{server}/?page=tradeoff&run={RUN}&layer=3")
    _wait_fig(page, "layer 3")
    _settled(page)
    pos = page.evaluate("""() => {
        const g = document.querySelector('.js-plotly-plot'), d = g._fullData.find(t => t.name === 'token types'),
              L = g._fullLayout;
        let k = 0; for (let i = 0; i < d.x.length; i++) if (d.customdata[i][0] > d.customdata[k][0]) k = i;
        const r = g.getBoundingClientRect();
        return {x: r.left + L.xaxis._offset + L.xaxis.l2p(d.x[k]), y: r.top + L.yaxis._offset + L.yaxis.l2p(d.y[k]),
                token: String(d.text[k])};
    }""")
    page.mouse.move(pos["x"] - 20, pos["y"] - 20)
    page.mouse.move(pos["x"], pos["y"], steps=5)
    page.wait_for_timeout(300)
    page.mouse.click(pos["x"], pos["y"])
    _wait_fig(page, f"{pos['token']}: Q, M, V across layers", timeout=60000)  # the Token page's first tab
    page.wait_for_function("() => location.search.includes('token=')", timeout=30000)
    assert parse_qs(urlparse(page.url).query)["token"] == [pos["token"]]
    page.context.close()


# ---------------------------------------------------------------------------- subplot titles on the slides
def test_slide_figures_keep_subplot_titles_clear_of_axis_titles(browser, data, tmp_path):
    """The report's HTML (the slides' own figures at slide size, plotly.js inlined) in the browser."""
    from normvar_core.report.slides import geometry_slide, layers_slide
    from normvar_core.report.writers import write_report
    from normvar_core.runs.reader import open_run

    runs = [open_run(data / "runs" / f"{n}.duckdb") for n in (RUN, UPLOAD_RUN)]
    out = write_report([geometry_slide(runs), layers_slide(runs)], tmp_path / "deck.html", "html")
    page = _page(browser, 1000)
    page.goto(out.as_uri())
    page.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot').length === 2 && "
        "[...document.querySelectorAll('.js-plotly-plot')].every(g => g._fullLayout)"
    )
    n = page.evaluate("""() => {
        const box = e => e.getBoundingClientRect();
        const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
        let out = [], seen = 0;
        for (const g of document.querySelectorAll('.js-plotly-plot')) {
            const subs = [...g.querySelectorAll('.annotation-text')],
                  axes = [...g.querySelectorAll('text[class$="title"]:not(.gtitle)')];
            seen += subs.length * axes.length;
            for (const s of subs) for (const a of axes)
                if (hit(box(s), box(a))) out.push(s.textContent + ' / ' + a.textContent);
        }
        return [out, seen]; }""")
    assert n[0] == [] and n[1] > 0
    page.context.close()
