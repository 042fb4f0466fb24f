"""The sign-in of a shared dashboard in a real browser (Playwright + Debian chromium) while another application
on 127.0.0.1 has left cookies that Python's ``SimpleCookie`` cannot parse (a JSON value, a space, a bare flag, a
non-ASCII value) in the same cookie jar: the ``?auth=`` link and the sign-in form each land on the dashboard,
never back on the sign-in page. The server: `normvar dashboard --host 0.0.0.0 --token-file F` over an empty data
directory, reached on 127.0.0.1 only."""

from __future__ import annotations

import os

import pytest
from browser_helpers import free_port
from dashboard_server import serve_until_ready, stop

from normvar_core.service import dashboard_access as access

pytestmark = [pytest.mark.browser, pytest.mark.subprocess]

TOKEN = "T-shared-jar-3"
FOREIGN = {"prefs": '{"theme":"dark","n":2}', "sid": "a b c", "nom": "café", "ga": "GA1.1.5"}
SIGNED_IN = '() => !!document.querySelector(\'[data-testid="stSidebarNav"], [data-testid="stNavigation"]\')'


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    d = tmp_path_factory.mktemp("d")
    secret = d / "token.txt"
    secret.write_text(TOKEN)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != access.TOKEN_ENV}
    proc, first = serve_until_ready(
        ["dashboard", "--host", "0.0.0.0", "--port", str(port), "--data-dir", str(d), "--token-file", str(secret)], env
    )
    assert first.startswith("normvar: dashboard at "), first
    yield f"http://127.0.0.1:{port}"
    stop(proc)


def _context(browser, base: str):
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    ctx.add_cookies(
        [{"name": k, "value": v, "url": base} for k, v in FOREIGN.items()]
        + [{"name": "flag", "value": "", "url": base}]
    )
    return ctx


def _lands_on_the_dashboard(page) -> None:
    page.wait_for_function(SIGNED_IN, timeout=120000)
    page.wait_for_timeout(1000)
    assert page.get_by_role("button", name="Sign in").count() == 0
    assert page.get_by_text("reload the page to sign in").count() == 0
    assert "auth=" not in page.url


def test_auth_link_and_form_sign_in_beside_foreign_cookies(shared, browser):
    ctx = _context(browser, shared)
    try:
        page = ctx.new_page()
        page.goto(f"{shared}/?auth={TOKEN}", timeout=120000)
        _lands_on_the_dashboard(page)
        names = [c["name"] for c in ctx.cookies()]
        assert [n for n in names if n.startswith("normvar_session")] == [f"normvar_session_{shared.rsplit(':', 1)[1]}"]
    finally:
        ctx.close()
    ctx = _context(browser, shared)
    try:
        page = ctx.new_page()
        page.goto(f"{shared}/", timeout=120000)
        page.get_by_label("Token").fill(TOKEN)
        page.get_by_role("button", name="Sign in").click()
        _lands_on_the_dashboard(page)
    finally:
        ctx.close()
