"""The Gaussian null in a real browser: a shared link with ?null= draws the grey cloud behind the
Trade-off scatter (the null run's own band types), and the High-dimensional geometry page renders the
run next to its null. Screenshots land in browser_helpers.ARTIFACTS."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from browser_helpers import ARTIFACTS, PLOT_READY, wait_url
from dashboard_run import RUN

pytestmark = pytest.mark.browser
NULL = f"{RUN}__null-isotropic-s0"


@pytest.fixture(scope="module")
def data(tmp_path_factory, data_dir, dashboard_null) -> Path:
    """The dashboard's runs and their isotropic null (``dashboard_null``: write_null_run's, drawn once)."""
    root = tmp_path_factory.mktemp("null-browser")
    shutil.copytree(data_dir / "runs", root / "runs")
    shutil.copy(dashboard_null, root / "runs" / f"{NULL}.duckdb")
    return root


def test_null_overlay_from_a_shared_link(server, browser, data):
    from normvar_core.runs.reader import open_run

    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.goto(f"{server}/?page=tradeoff&run={RUN}&layer=3&null={NULL}")
    page.wait_for_function(PLOT_READY, timeout=90000)
    page.wait_for_function(
        "() => document.querySelector('.js-plotly-plot')._fullData.some(d => d.name === 'Gaussian null (isotropic)')",
        timeout=60000,
    )
    n = page.evaluate(
        "() => document.querySelector('.js-plotly-plot')._fullData"
        ".find(d => d.name === 'Gaussian null (isotropic)').x.length"
    )
    t = open_run(data / "runs" / f"{NULL}.duckdb").token_table(3)
    assert n == int(((t.n >= 10) & (t.n <= 1e5)).sum())
    wait_url(page, f"null={NULL}")
    page.locator(".js-plotly-plot").first.screenshot(path=str(ARTIFACTS / "tradeoff_null_cloud.png"))

    page.goto(f"{server}/highdim?run={RUN}")
    page.wait_for_function(PLOT_READY, timeout=90000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot')].some(g => g._fullData && "
        "g._fullData.some(d => d.name === 'Gaussian null (isotropic)'))",
        timeout=60000,
    )
    page.screenshot(path=str(ARTIFACTS / "highdim.png"), full_page=True)
    page.get_by_role("tab", name="Random-pair cosines").click()  # the null's cosines: the next tab
    page.wait_for_function("() => location.search.includes('section=cosines')", timeout=60000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot')].some(g => g._fullData && "
        "String(g._fullLayout.title.text || '').includes('random pairs') && "
        "g._fullData.some(d => d.name === 'Gaussian null (isotropic)'))",
        timeout=60000,
    )
    page.close()
