"""Offline for real: a tour of every page of the dashboard, each opened by its own URL in a fresh browser context
(three at a time), as `normvar dashboard` serves it. Every request the page makes (document, scripts, fonts,
favicon, websocket) is recorded: any host other than the dashboard's own, any answer >= 400 and any console error
fails the test."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from browser_helpers import start_streamlit, stop_streamlit
from dashboard_run import RUN

from normvar_core.viz.pages import DEFAULT_PAGE, PAGE_KEYS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# a page is drawn when Streamlit's run indicator is gone and the page's title is on screen
DRAWN = (
    "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
    " && !!document.querySelector('[data-testid=\"stMain\"] h1')"
)
AT_ONCE = 3  # pages loading at the same time, each in its own context: the tour waits on the server and the browser


def _open(browser, url: str):
    """A fresh context's page on its way to ``url`` (navigation committed) and what it has seen so far."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    seen = {"requests": [], "failed": [], "errors": []}
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("requestfailed", lambda r: seen["failed"].append(f"{r.url} ({r.failure})"))
    page.on("response", lambda r: seen["failed"].append(f"{r.url} ({r.status})") if r.status >= 400 else None)
    page.on("websocket", lambda ws: seen["requests"].append(ws.url))
    page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.goto(url, wait_until="commit")
    return ctx, page, seen


def _tour(browser, urls: dict[str, str]) -> dict[str, dict]:
    """Every page of ``urls`` ({key: URL}) opened in a fresh context, ``AT_ONCE`` at a time, each followed until it is
    drawn and 1.5 s more (late requests: the favicon, fonts, a figure's second pass): {key: what it requested}."""
    report, keys = {}, list(urls)
    for i in range(0, len(keys), AT_ONCE):
        opened = {key: _open(browser, urls[key]) for key in keys[i : i + AT_ONCE]}
        pages = [page for _, page, _ in opened.values()]
        for page in pages:
            page.wait_for_function(DRAWN, timeout=90000)
        pages[-1].wait_for_timeout(1500)  # after the last one drawn: every page of the batch had 1.5 s or more
        for key, (ctx, page, seen) in opened.items():
            seen["favicon"] = page.evaluate(
                "() => [...document.querySelectorAll('link[rel~=\"icon\"]')].map(l => l.href)"
            )
            ctx.close()
            report[key] = seen
    return report


@pytest.fixture(scope="module")
def served(tmp_path_factory, data_dir):
    proc, base, log = start_streamlit(data_dir, tmp_path_factory.getbasetemp() / "streamlit-tour.log")
    yield base
    stop_streamlit(proc, log)


def test_every_page_requests_only_the_dashboard(served, browser):
    base = served
    own = urlsplit(base).netloc
    report = _tour(browser, {key: f"{base}/{'' if key == DEFAULT_PAGE else key}?run={RUN}" for key in PAGE_KEYS})
    for key, seen in report.items():
        assert len(seen["requests"]) > 20, (key, seen["requests"])  # scripts, fonts and the websocket were seen
        assert any("/_stcore/stream" in u for u in seen["requests"]), key
        # a blob: URL is an object in the page's memory, named by its origin (the Occurrences component's module)
        foreign = [
            u for u in seen["requests"] if urlsplit(u.removeprefix("blob:")).netloc != own and not u.startswith("data:")
        ]
        assert not foreign, f"{key}: requests to other hosts: {foreign}"
        assert not seen["failed"], f"{key}: failed requests: {seen['failed']}"
        assert not seen["errors"], f"{key}: console errors: {seen['errors']}"
        assert seen["favicon"] and all(urlsplit(h).netloc == own for h in seen["favicon"]), (key, seen["favicon"])


def test_back_takes_one_press(served, browser):
    """Runs -> Trade-off -> Layers through the sidebar, then one Back: Trade-off again (one history entry per
    page; the view written into the query replaces the page's entry rather than adding one)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.goto(f"{served}/?run={RUN}")
    page.wait_for_function(DRAWN, timeout=90000)
    start = page.evaluate("() => history.length")
    for title, path in (("Trade-off", "/tradeoff"), ("Layers", "/layers")):
        page.get_by_role("link", name=title, exact=True).first.click()
        page.wait_for_function("(p) => location.pathname === p", arg=path, timeout=60000)
        page.wait_for_function(DRAWN, timeout=90000)
        page.wait_for_timeout(1500)  # the page's script has written its view into the query by now
    assert page.evaluate("() => history.length") == start + 2
    page.go_back()
    page.wait_for_function("() => location.pathname === '/tradeoff'", timeout=30000)
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=\"stMain\"] h1') || {}).textContent?.startsWith('Trade-off')",
        timeout=60000,
    )
    page.go_back()
    page.wait_for_function("() => location.pathname === '/'", timeout=30000)
    ctx.close()
