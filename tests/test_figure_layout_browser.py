"""Figure layout in chromium (plotly.js draws the figure at a page's width; no server): the Layers legend clears
the x-axis titles, and High-dim's "Gaussian: 1" label sits at its line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import plotly
import pytest

from normvar_core.viz.highdim_figures import PROFILE_PANELS, highdim_profiles
from normvar_core.viz.tradeoff_figures import layers_figure

pytestmark = pytest.mark.browser

JS = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()


def draw(browser, fig, width: int = 1200):
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_content(
        f"<html><body style='margin:0'><div id='f' style='width:{width}px'></div><script>{JS}</script>"
        f"<script>const j = {fig.to_json()}; Plotly.newPlot('f', j.data, j.layout);</script></body></html>"
    )
    page.wait_for_function(
        "() => { const g = document.getElementById('f'); return !!(g._fullData && g._fullData.length); }"
    )
    return page


def boxes(page, selector: str) -> list[dict]:
    return page.evaluate(
        "(s) => [...document.querySelectorAll(s)].map(e => { const r = e.getBoundingClientRect(); "
        "return {l: r.left, r: r.right, t: r.top, b: r.bottom}; })",
        selector,
    )


def overlap(a: dict, b: dict) -> bool:
    return a["l"] < b["r"] and b["l"] < a["r"] and a["t"] < b["b"] and b["t"] < a["b"]


def _curves(k: int) -> pd.DataFrame:
    layers = np.arange(13)
    return pd.DataFrame(
        {
            "layer": layers,
            "cv_q": 0.2 + 0.01 * k + 0.01 * layers,
            "slope": -1 + 0.02 * layers,
            "r2": 0.5 + 0.03 * layers,
        }
    )


def test_layers_legend_clears_the_axis_titles(browser):
    names = [f"a-longer-run-name-{k}-minilm-novels300" for k in range(5)]
    fig = layers_figure(
        {n: _curves(k) for k, n in enumerate(names)},
        null_curves={"Gaussian null (isotropic)": _curves(9)},
        title="Fig. 4",
    )
    page = draw(browser, fig)
    legend = boxes(page, ".legend .bg")
    titles = boxes(page, ".g-xtitle text, .g-x2title text, .g-x3title text")
    assert len(legend) == 1 and len(titles) == 3
    assert not [t for t in titles if overlap(legend[0], t)]
    assert legend[0]["b"] <= page.evaluate("() => document.querySelector('.main-svg').getBoundingClientRect().bottom")
    page.close()


def test_highdim_gaussian_label_sits_at_its_line(browser):
    layers = np.arange(7)
    run = pd.DataFrame(
        {"layer": layers, **{key: 0.5 + 0.1 * layers for key, _ in PROFILE_PANELS}, "m_over_q": 0.3 + 0.05 * layers}
    )
    run["n_m_over_v"] = 10.0 ** (1 + layers / 2)  # the log panel: far above 1
    fig = highdim_profiles(run, {}, dim=384, label="run")
    page = draw(browser, fig)
    where = page.evaluate("""() => { const g = document.getElementById('f'), L = g._fullLayout;
        const a = [...document.querySelectorAll('.annotation')].find(e => e.textContent.includes('Gaussian: 1'));
        const r = a.getBoundingClientRect(), ya = L.yaxis3, top = g.getBoundingClientRect().top;
        return {line: top + ya._offset + ya.l2p(0), top: r.top, bottom: r.bottom}; }""")
    assert min(abs(where["top"] - where["line"]), abs(where["bottom"] - where["line"])) < 6, where
    page.close()


def _types(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    m = rng.uniform(0.5, 2.0, n)
    return pd.DataFrame(
        {
            "token": [f"t{i}" for i in range(n)],
            "n": rng.integers(10, 1000, n),
            "m": m,
            "v": 3.0 - m + rng.normal(0, 0.1, n),
            "q": 3.0 + rng.normal(0, 0.1, n),
        }
    )


@pytest.mark.parametrize("which", ["tradeoff", "frequency"])
def test_the_null_cloud_has_one_legend_entry_clear_of_the_axes(browser, which):
    from normvar_core.viz.frequency_figures import frequency_scatter
    from normvar_core.viz.tradeoff_figures import tradeoff_scatter

    pts, null = _types(300, 0), _types(300, 1)
    fig = (
        tradeoff_scatter(pts, null_points=null, null_label="Gaussian null (isotropic)")
        if which == "tradeoff"
        else frequency_scatter(pts, null_points=null, null_label="Gaussian null (isotropic)")
    )
    page = draw(browser, fig)
    items = page.evaluate("() => [...document.querySelectorAll('.legend .traces')].map(e => e.textContent)")
    assert items == ["Gaussian null (isotropic)"]
    legend = boxes(page, ".legend .bg")[0]
    titles = boxes(page, "[class*=xtitle] text")
    assert titles and not [t for t in titles if overlap(legend, t)]
    page.close()
