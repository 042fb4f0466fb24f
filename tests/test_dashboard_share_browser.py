"""A shared dashboard and the New-run form's refusals in a real browser (Playwright + Debian chromium), every
server started through the real CLI and every request sent to 127.0.0.1 only (the servers bound to 0.0.0.0
are never reached through the machine's other addresses).

- `normvar up --host 0.0.0.0 --token T`: without the token (and with a wrong one, and on a deep link) the page
  holds the sign-in field and no run name; with the right one (in the URL, or typed in the field) the runs,
  and the token leaves the URL; a Token-page link (`?token=the`, the token type) opened signed out lands on
  that Token page, type and run kept, after signing in;
- `normvar dashboard --read-only`: no New-run page, no upload field, no Cancel on a queued job;
- the New-run form: a PNG and PNG bytes named .txt are refused on Submit and on Check memory, naming the file,
  with no job queued; Enter in "Max sentences" does not submit; a text file then does (one job)."""

from __future__ import annotations

import os
import re
import shutil
import time
import urllib.error
from pathlib import Path

import pytest
from browser_helpers import ARTIFACTS, free_port, wait_url
from dashboard_run import RUN, RUN2
from dashboard_server import LOCAL, serve_until_ready, stop
from upload_files import STORY, png_bytes

from normvar_core.service import dashboard_access as access
from normvar_core.service.jobs import JobStore

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TOKEN = "T-lab-meeting-7"


@pytest.fixture(scope="module")
def data(data_dir) -> Path:
    return data_dir


def serve(tmp_path: Path, data: Path, command: str, *flags: str):
    """`normvar COMMAND FLAGS` over a copy of the run data on a free port; (process, 127.0.0.1 base URL, data)."""
    d = tmp_path / "data"
    shutil.copytree(data, d)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != access.TOKEN_ENV}
    proc, first = serve_until_ready([command, *flags, "--port", str(port), "--data-dir", str(d)], env)
    assert first.startswith("normvar: dashboard at "), first
    return proc, f"http://127.0.0.1:{port}", d


def page_text(page) -> str:
    return page.content() + page.evaluate("() => document.body.innerText")


def signed_out(page) -> None:
    page.get_by_role("button", name="Sign in").wait_for(timeout=60000)
    page.wait_for_timeout(1500)  # anything else the script might still send
    text = re.sub(r'name="next" value="[^"]*"', "", page_text(page))  # the page's own URL, kept for after sign-in
    assert RUN not in text and RUN2 not in text
    assert page.get_by_role("link", name="Trade-off").count() == 0  # no navigation either


def test_up_on_every_address_with_a_token(tmp_path, data, browser):
    proc, base, _ = serve(tmp_path, data, "up", "--host", "0.0.0.0", "--token", TOKEN)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for path in ("/", f"/tradeoff?run={RUN}", "/new-run", f"/?auth={TOKEN[:-1]}", f"/?auth={TOKEN}x"):
            page.goto(base + path)
            signed_out(page)
            assert "token=" not in page.url
            if "auth=" in path:
                page.get_by_text("That is not this dashboard's token.").wait_for(timeout=30000)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "share_sign_in.png"))

        page.goto(f"{base}/?auth={TOKEN}")  # the link `normvar up` prints
        page.locator(f"text={RUN} >> visible=true").first.wait_for(timeout=60000)  # the grid also holds a hidden copy
        assert "token" not in page.url and "auth" not in page.url
        page.get_by_role("link", name="Trade-off").click()  # another page: the session stays signed in
        page.wait_for_function("() => !!document.querySelector('.js-plotly-plot')", timeout=60000)
        wait_url(page, "/tradeoff", absent=("token",))
        page.close()
        for path in ("/_stcore/metrics", "/_stcore/host-config", "/_stcore/health"):  # the server's own routes
            try:
                with LOCAL.open(base + path, timeout=10) as r:
                    body = r.read().decode("utf-8", errors="replace")
            except urllib.error.HTTPError as err:
                body = err.read().decode("utf-8", errors="replace")
            assert RUN not in body and RUN2 not in body, path

        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(base + "/")
        signed_out(page)
        field = page.get_by_label("Token")
        field.fill(TOKEN)
        field.press("Enter")
        page.locator(f"text={RUN} >> visible=true").first.wait_for(timeout=60000)  # the grid also holds a hidden copy
        page.close()

        page = browser.new_page(viewport={"width": 1400, "height": 1000})  # a Token-page link, opened signed out
        page.goto(f"{base}/token?run={RUN}&token=the")
        signed_out(page)
        page.get_by_label("Token").fill(TOKEN)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_function(
            "() => [...document.querySelectorAll('input')].some("
            "i => i.getAttribute('aria-label') === 'Token' && i.value === 'the')",
            timeout=90000,
        )
        wait_url(page, "/token?", "token=the", f"run={RUN}")
        page.close()
    finally:
        stop(proc)


def test_read_only_dashboard(tmp_path, data, browser):
    from normvar_core.config import RunConfig

    d = tmp_path / "ro"
    shutil.copytree(data, d)
    job = JobStore(d).submit(RunConfig(model="minilm", max_sentences=5, name="waiting-run"))
    port = free_port()
    proc, _ = serve_until_ready(
        ["dashboard", "--read-only", "--port", str(port), "--data-dir", str(d)],
        {k: v for k, v in os.environ.items() if k != access.TOKEN_ENV},
    )
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"http://127.0.0.1:{port}/")
        page.get_by_text("waiting-run").first.wait_for(timeout=60000)  # the queued job is listed ...
        page.get_by_role("link", name="Trade-off").wait_for()
        assert page.get_by_role("button", name="Cancel").count() == 0  # ... without its Cancel
        assert page.get_by_role("link", name="New run").count() == 0
        assert page.get_by_role("button", name="Build report").count() == 0
        page.goto(f"http://127.0.0.1:{port}/new-run")
        page.get_by_role("link", name="Trade-off").wait_for(timeout=60000)
        page.wait_for_timeout(1500)
        assert page.locator("input[type=file]").count() == 0 and page.get_by_text("Submit run").count() == 0
        assert JobStore(d).get(job).state == "queued"
        page.close()
    finally:
        stop(proc)


def _upload(page, name: str, data: bytes) -> None:
    page.locator("input[type=file]").set_input_files(
        {"name": name, "mimeType": "application/octet-stream", "buffer": data}
    )
    page.get_by_text(name).first.wait_for(timeout=30000)


def _alert(page) -> str:
    page.locator("[data-testid='stAlertContentError']").first.wait_for(timeout=60000)
    return page.locator("[data-testid='stAlertContentError']").first.inner_text()


def test_new_run_form_in_a_browser(tmp_path, data, browser):
    proc, base, d = serve(tmp_path, data, "dashboard")
    before = {j.id for j in JobStore(d).list()}  # the shared run data may hold other tests' jobs

    def new_jobs() -> list:
        return [j for j in JobStore(d).list() if j.id not in before]

    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        page.goto(base + "/new-run")
        page.get_by_role("button", name="Submit run").wait_for(timeout=60000)
        _upload(page, "holiday.png", png_bytes())
        page.get_by_role("button", name="Submit run").click()
        err = _alert(page)
        assert "“holiday.png” is not a corpus file the form reads" in err and "--" not in err
        assert new_jobs() == []

        page.get_by_role("button", name="Remove holiday.png").click()
        _upload(page, "holiday.txt", png_bytes())
        page.get_by_role("button", name="Check memory").click()
        page.wait_for_function(
            "() => [...document.querySelectorAll(\"[data-testid='stAlertContentError']\")]"
            ".some(e => e.innerText.includes('holiday.txt'))",
            timeout=60000,
        )
        err = _alert(page)
        assert "“holiday.txt” looks binary" in err
        assert not re.search(r"[0-9a-f]{64}", err) and "--" not in err  # not its stored sha256 name
        page.get_by_role("button", name="Submit run").click()
        page.wait_for_timeout(2000)
        assert new_jobs() == []
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "new_run_refused.png"))

        page.get_by_role("button", name="Remove holiday.txt").click()
        _upload(page, "story.txt", STORY)
        box = page.get_by_role("spinbutton", name="Max sentences")
        box.fill("3")
        box.press("Enter")
        page.wait_for_timeout(3000)
        assert new_jobs() == []  # Enter did not submit
        page.get_by_role("button", name="Submit run").click()
        deadline = time.monotonic() + 60
        while not new_jobs() and time.monotonic() < deadline:
            time.sleep(0.3)
        (job,) = new_jobs()
        assert job.name == "minilm__story" and job.config["max_sentences"] == 3
        page.close()
    finally:
        stop(proc)
