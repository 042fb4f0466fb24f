"""The dashboard in a real browser: `streamlit run views/_server.py` (app.py) as a subprocess, Debian's chromium driven
by
Playwright (tests/browser_helpers.py). Screenshots land in browser_helpers.ARTIFACTS."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser_helpers import ARTIFACTS, PLOT_READY, wait_url
from dashboard_run import RUN

from normvar_core.viz.theme import SVG_MAX_POINTS

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def data(data_dir) -> Path:
    return data_dir


@pytest.fixture(scope="module")
def run(data):
    from normvar_core.runs.reader import open_run

    return open_run(data / "runs" / f"{RUN}.duckdb")


def _title(page) -> str:
    return page.evaluate("() => document.querySelector('.js-plotly-plot')._fullLayout.title.text || ''")


def _wait_title(page, part: str, timeout=30000) -> None:
    page.wait_for_function(
        "(part) => { const g = document.querySelector('.js-plotly-plot');"
        " return !!(g && g._fullLayout && (g._fullLayout.title.text || '').includes(part)); }",
        arg=part,
        timeout=timeout,
    )


def test_tradeoff_in_a_browser(server, browser, run):
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/tradeoff?run={RUN}")
    page.wait_for_function(PLOT_READY, timeout=60000)
    _wait_title(page, "layer 3")
    t3 = run.token_table(3)
    n3 = int(((t3.n >= 10) & (t3.n <= 1e5)).sum())
    assert page.evaluate("() => document.querySelector('.js-plotly-plot')._fullData[0].x.length") == n3
    # SVG up to SVG_MAX_POINTS types, WebGL above (theme.point_trace)
    assert page.evaluate("() => document.querySelector('.js-plotly-plot')._fullData[0].type") == (
        "scatter" if n3 <= SVG_MAX_POINTS else "scattergl"
    )
    # Streamlit's loading placeholders hold still on the served page (their pulse redrew the page every frame)
    assert (
        page.evaluate("""() => { const d = document.createElement('div'); d.dataset.testid = 'stSkeleton';
        document.body.appendChild(d); const a = getComputedStyle(d).animationName; d.remove(); return a; }""")
        == "none"
    )

    # move the layer slider with the keyboard: 3 -> 4
    thumb = page.get_by_role("slider").first
    thumb.focus()
    page.keyboard.press("ArrowRight")
    _wait_title(page, "layer 4")
    t4 = run.token_table(4)
    n4 = int(((t4.n >= 10) & (t4.n <= 1e5)).sum())
    page.wait_for_function("(n) => document.querySelector('.js-plotly-plot')._fullData[0].x.length === n", arg=n4)
    wait_url(page, "layer=4")

    # hover the most frequent token's point and read the tooltip
    page.wait_for_timeout(500)
    pos = page.evaluate("""() => {
        const g = document.querySelector('.js-plotly-plot'), d = g._fullData[0], L = g._fullLayout;
        let k = 0; for (let i = 0; i < d.x.length; i++) if (d.customdata[i][0] > d.customdata[k][0]) k = i;
        const r = g.getBoundingClientRect();
        return {x: r.left + L.xaxis._offset + L.xaxis.l2p(d.x[k]), y: r.top + L.yaxis._offset + L.yaxis.l2p(d.y[k]),
                token: String(d.text[k])};
    }""")
    page.mouse.move(pos["x"] - 30, pos["y"] - 30)
    page.mouse.move(pos["x"], pos["y"], steps=5)
    page.wait_for_selector(".hoverlayer .hovertext", timeout=15000)
    tip = page.locator(".hoverlayer .hovertext").first.text_content()
    assert pos["token"] in tip and "n =" in tip and "Q =" in tip and "M =" in tip and "V =" in tip
    page.locator(".js-plotly-plot").first.screenshot(path=str(ARTIFACTS / "tradeoff_hover.png"))
    page.close()


def test_shared_link_restores_the_view(server, browser, run):
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/?page=tradeoff&run={RUN}&layer=2&band=1.5,4&tokens=the,said&present=1")
    page.wait_for_function(PLOT_READY, timeout=60000)
    _wait_title(page, "layer 2")
    t = run.token_table(2)
    n = int(((t.n >= 10**1.5) & (t.n <= 1e4)).sum())
    assert page.evaluate("() => document.querySelector('.js-plotly-plot')._fullData[0].x.length") == n
    labels = page.evaluate(
        "() => document.querySelector('.js-plotly-plot')._fullData.filter(d => d.name === 'highlighted')[0].text"
    )
    assert list(labels) == ["the", "said"]
    assert page.evaluate("() => document.querySelector('.js-plotly-plot')._fullLayout.font.size") >= 18
    wait_url(page, "/tradeoff")
    page.get_by_text("Highlighted tokens").wait_for()
    page.locator(".js-plotly-plot").first.screenshot(path=str(ARTIFACTS / "tradeoff_shared_link.png"))
    page.close()


def test_token_view_from_a_url_and_the_clouds_hover(server, browser, run):
    """?page=token&token=her renders the token's contexts in its Contexts tab; on Token clouds hovering a point shows
    its
    sentence with the token in bold; the developer chrome ("Deploy") is hidden."""
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    page.goto(f"{server}/?page=token&run={RUN}&token=her")
    page.get_by_role("tab", name="Contexts").click(timeout=90000)  # the sentences: drawn when opened
    page.get_by_text("Most typical").wait_for(timeout=90000)
    page.get_by_text("Most atypical").wait_for(timeout=30000)
    # the sentences render after the headings: wait for both columns' marks, not just the first heading
    page.wait_for_function("() => document.querySelectorAll('mark b').length >= 2", timeout=30000)
    marks = page.locator("mark b").all_text_contents()
    assert marks and all(m.lower() == "her" for m in marks)
    assert page.get_by_text("Deploy").count() == 0
    page.screenshot(path=str(ARTIFACTS / "token_view.png"))

    page.goto(f"{server}/clouds?run={RUN}")
    page.wait_for_function(PLOT_READY, timeout=90000)
    page.wait_for_function(
        "() => String(document.querySelector('.js-plotly-plot')._fullLayout.title.text || '')"
        ".includes('sampled embeddings')",
        timeout=90000,
    )
    page.wait_for_timeout(1500)
    pos = page.evaluate("""() => {
        const g = document.querySelector('.js-plotly-plot'), L = g._fullLayout;
        const d = g._fullData.find(d => d.customdata && d.customdata.some(c => String(c[1]).includes('<b>')));
        let k = 0; while (k < d.x.length && !String(d.customdata[k][1]).includes('<b>')) k++;
        const r = g.getBoundingClientRect();
        return {x: r.left + L.xaxis._offset + L.xaxis.l2p(d.x[k]), y: r.top + L.yaxis._offset + L.yaxis.l2p(d.y[k]),
                ctx: String(d.customdata[k][1])};
    }""")
    page.mouse.move(pos["x"] - 20, pos["y"] - 20)
    page.mouse.move(pos["x"], pos["y"], steps=5)
    page.wait_for_selector(".hoverlayer .hovertext", timeout=30000)
    tip = page.locator(".hoverlayer .hovertext").first.text_content()
    plain = pos["ctx"].replace("<b>", "").replace("</b>", "")
    assert plain.split("…")[-1].strip()[:20] in tip
    page.locator(".js-plotly-plot").first.screenshot(path=str(ARTIFACTS / "clouds_hover.png"))
    page.close()


def test_sidebar_and_the_last_run_this_browser_used(server, browser):
    """Compare and New run are listed in the sidebar (no "View N more"); a tab opened without ?run= shows the run
    this browser used last, not the newest; the page names its run."""
    from dashboard_run import RUN2

    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.goto(f"{server}/layers?run={RUN2}")
    nav = page.get_by_test_id("stSidebarNav")
    for title in ("Compare", "New run"):
        nav.get_by_role("link", name=title).wait_for(state="visible", timeout=60000)
    assert page.get_by_text("View ", exact=False).filter(has_text="more").count() == 0
    page.get_by_test_id("stCaptionContainer").filter(has_text=f"Run {RUN2}").first.wait_for(timeout=60000)
    page.wait_for_function("(n) => document.cookie.includes('normvar_run=' + n)", arg=RUN2, timeout=30000)
    again = ctx.new_page()  # a new tab, same browser: no ?run=
    again.goto(f"{server}/layers")
    again.wait_for_function("(n) => new URLSearchParams(location.search).get('run') === n", arg=RUN2, timeout=60000)
    again.get_by_test_id("stCaptionContainer").filter(has_text=f"Run {RUN2}").first.wait_for(timeout=60000)
    fresh = browser.new_context().new_page()  # another browser: the newest run
    fresh.goto(f"{server}/layers")
    fresh.wait_for_function("(n) => new URLSearchParams(location.search).get('run') === n", arg=RUN, timeout=60000)
    ctx.close()
    fresh.context.close()


def _tabs_in_view(page) -> list[str]:
    """The labels of the page's tab strip, asserting that every tab lies inside the strip's visible box and that the
    strip does not scroll (nothing past its edge, so no scroll arrow hides a tab)."""
    strip = page.evaluate(
        """() => { const s = document.querySelector('[role=tablist]'), b = s.getBoundingClientRect();
        return {l: b.left, r: b.right, scroll: s.scrollWidth, client: s.clientWidth,
                tabs: [...s.querySelectorAll('[role=tab]')].map(t => { const r = t.getBoundingClientRect();
                    return {text: t.textContent.trim(), l: r.left, r: r.right, w: r.width}; })}; }"""
    )
    assert strip["scroll"] <= strip["client"], strip
    for t in strip["tabs"]:
        assert t["w"] > 0 and strip["l"] - 0.5 <= t["l"] and t["r"] <= strip["r"] + 0.5, (t, strip)
    return [t["text"] for t in strip["tabs"]]


def test_every_geometry_tab_is_in_view_at_1280_px(server, browser):
    """At a 1280-px-wide window (the sidebar open), every tab of Geometry lies inside the tab strip's visible box
    and the strip does not scroll (no arrow hides a tab): the page's figures under their labels, then More curves.
    That tab shows the name of every curve the run's measures declare in view (the layer linearity's four among
    them); picking one draws it and puts it in the link, and the link opens it in a fresh browser."""
    from normvar_core.pipeline.measures.layer_linearity import LayerLinearityMeasure
    from normvar_core.viz.page_figures import FIGURES
    from views._sections import MORE

    ARTIFACTS.mkdir(exist_ok=True)
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    page.goto(f"{server}/?page=geometry&run={RUN}")
    page.wait_for_function(PLOT_READY, timeout=120000)
    want = [f.label for f in FIGURES["geometry"]] + [MORE]
    page.wait_for_function("(n) => document.querySelectorAll('[role=tab]').length === n", arg=len(want), timeout=60000)
    assert _tabs_in_view(page) == want
    page.get_by_role("tab", name=MORE).click()
    main = page.get_by_test_id("stMainBlockContainer").bounding_box()
    assert main is not None
    titles = [c.title for c in LayerLinearityMeasure.curves]
    for title in titles:
        label = page.get_by_test_id("stRadio").get_by_text(title, exact=True)
        label.wait_for(state="visible", timeout=60000)
        box = label.bounding_box()
        assert box and main["x"] <= box["x"] and box["x"] + box["width"] <= main["x"] + main["width"], (title, box)
    page.get_by_test_id("stRadio").get_by_text(titles[1], exact=True).click()
    wait_url(page, "section=layer_linearity-linearity_xfit", timeout=60000)
    page.wait_for_function(
        "(t) => [...document.querySelectorAll('.js-plotly-plot')].some(g => g._fullLayout && "
        "String(g._fullLayout.title.text || '').startsWith(t))",
        arg=titles[1],
        timeout=60000,
    )
    fresh = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    fresh.goto(page.url)
    fresh.get_by_role("tab", name=MORE, selected=True).wait_for(timeout=120000)
    fresh.get_by_role("radio", name=titles[1], checked=True).wait_for(state="attached", timeout=60000)
    page.locator("[data-testid=stMainBlockContainer]").screenshot(path=str(ARTIFACTS / "geometry_more_curves.png"))
    ctx.close()
    fresh.context.close()


def test_every_compare_tab_is_in_view_at_1280_px(server, browser):
    """Compare at a 1280-px-wide window: its four tabs and More curves all inside the tab strip, none scrolled out;
    the link's ?section=overlap opens More curves on the neighbourhood overlap."""
    from dashboard_run import RUN2

    from views._sections import MORE

    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(f"{server}/?page=compare&run={RUN}&run2={RUN2}&section=overlap")
    page.get_by_role("tab", name=MORE, selected=True).wait_for(timeout=120000)
    page.get_by_role("radio", name="Neighbourhood overlap", checked=True).wait_for(state="attached", timeout=60000)
    labels = _tabs_in_view(page)
    assert labels[-1] == MORE and "Layer geometry" in labels and len(labels) == 5, labels
    page.context.close()
