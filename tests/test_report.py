"""Reports for the lab meeting, on the real MiniLM run of the dashboard tests: the .pptx opened with
python-pptx (a picture on every figure slide, the exact values in the notes), the PDF pages rendered
with pdftoppm and not blank, the HTML loaded in a real browser with the network blocked."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from dashboard_run import RUN, RUN2
from runfiles import query

from normvar_core.constants import STUDY_BAND
from normvar_core.report.slides import TAKEAWAY_MAX, build_slides, reproduce
from normvar_core.report.writers import write_report
from normvar_core.service import cli
from normvar_core.stats import analyses
from normvar_core.stats.findings import CLAIM_IDS
from normvar_core.viz.page_figures import FIGURES, OVERLAP, OVERLAP_K


@pytest.fixture(scope="module")
def slides(run):
    return build_slides([run])


def test_slides_carry_takeaways_computed_from_the_numbers(slides, run):
    titles = [s.title for s in slides]
    from normvar_core.report.slides import REGISTRY

    # a slide per builder and per figure drawn below the overlap in its tab; the declared curves' builder one per
    # curve the run's measures declare; the title slide first, then the findings
    assert len(slides) == len(REGISTRY) - 1 + len(OVERLAP.below) + len(run.curves)
    assert slides[0].lines and "Findings" in titles[1]
    assert "Fig. 2" in titles[2] and "Fig. 4" in titles[3]
    assert (
        "Razzhigaev et al. 2024 protocol" in titles[7] and titles[8] == "IsoScore per layer"
    )  # the declared figure's generic slide
    # the Geometry page's tabs come in the page's order (each figure drawn below another right after it)
    tabs = [g.section for f in FIGURES["geometry"] for g in (f, *f.below)]
    assert [t for t in titles if t in tabs] == [t for t in tabs if t in titles] and len(set(tabs) & set(titles)) >= 5
    # TwoNN's decimation: both estimates of every layer's curve, from the run's table, and the id_profile verdict
    i = titles.index("TwoNN decimation")
    assert "id_profile" in slides[i].takeaway
    dec = run.table("twonn_decimation")
    # the columns in words (viz.labels.readable), never their names
    cross = f"TwoNN ID (cross-context) {dec['twonn_id_cross'].min():.3f}–{dec['twonn_id_cross'].max():.3f}"
    assert cross in slides[i].takeaway and "twonn_id" not in slides[i].takeaway
    assert sorted(dec["size"].unique()) == [512, 1024, 2048, 4096] or dec["size"].max() < 4096
    tr = analyses.tradeoff(run.stats(), *STUDY_BAND)
    best = tr.loc[tr["r2"].idxmax()]
    assert f"slope {best['slope']:.2f}, R² {best['r2']:.2f}" in slides[2].takeaway
    low = tr.loc[tr["cv_q"].idxmin()]
    assert f"layer {int(low['layer'])} ({low['cv_q']:.3f})" in slides[3].takeaway
    assert reproduce(run) in slides[0].notes and "normvar compute" in reproduce(run)


def test_the_overlap_against_k_has_the_slide_after_the_overlap(slides, run, data_dir):
    """The Geometry tab "Neighbourhood overlap" draws the overlap against k under the overlap between layers; the
    deck gives it the next slide, whose lines are ``overlap_curve``'s next-layer rows as DuckDB reads them (each
    drawn layer, unmasked and masked, and chance k / n), whose takeaway quotes their ranges, and whose notes hold
    every next-layer value. A run without the neighbourhoods measure (RUN2) gets no such slide, alone or beside
    RUN."""
    from normvar_core.report.slides import figure_slides
    from normvar_core.runs.reader import open_run

    titles = [s.title for s in slides]
    i = titles.index(OVERLAP.section)
    assert titles[i + 1] == OVERLAP_K.section and titles.count(OVERLAP_K.section) == 1
    slide = slides[i + 1]
    want = query(
        run.path,
        "SELECT layer, to_layer, masked, k, overlap, chance FROM overlap_curve "
        "WHERE pair = 'next' ORDER BY masked, layer, k",
    )
    lines = {t.name: t for t in slide.figure.data}
    drawn = set()
    for (layer, to, masked), rows in want.groupby(["layer", "to_layer", "masked"]):
        name = f"layer {layer} → {to} ({'other sentences' if masked else 'all neighbours'})"
        if name in lines:
            drawn.add(layer)
            np.testing.assert_array_equal(np.asarray(lines[name].x), rows["k"])
            np.testing.assert_allclose(np.asarray(lines[name].y), rows["overlap"], rtol=1e-12)
    layers = sorted(want["layer"].unique())
    assert drawn == {layers[0], layers[-1]} | drawn and len(drawn) == min(4, len(layers))  # both ends, four layers
    chance = want[~want["masked"]].groupby("k")["chance"].mean()
    [line] = [t for t in slide.figure.data if "chance k / n" in t.name]
    np.testing.assert_allclose(np.asarray(line.y), chance.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(chance.to_numpy(), chance.index / (chance.index[0] / chance.iloc[0]), rtol=1e-9)
    # the takeaway: over the drawn layer pairs (named), the unmasked range at the smallest and largest k, chance there
    # and the least ratio to it at each of the two k
    own = want[~want["masked"] & want["layer"].isin(drawn)]
    lo, hi = own["k"].min(), own["k"].max()
    span = {k: f"{own[own['k'] == k]['overlap'].min():.3f}–{own[own['k'] == k]['overlap'].max():.3f}" for k in (lo, hi)}
    pairs = ", ".join(f"{a}→{b}" for a, b in own[["layer", "to_layer"]].drop_duplicates().to_numpy(int))
    assert (
        f"keeps {span[lo]} at k = {lo} and {span[hi]} at k = {hi} over the drawn layer pairs {pairs} ("
        in slide.takeaway
    )
    ratio = {k: (own[own["k"] == k]["overlap"] / own[own["k"] == k]["chance"]).min() for k in (lo, hi)}
    assert f"keeps {ratio[lo]:.3g}× chance at k = {lo} and {ratio[hi]:.3g}× at k = {hi}" in slide.takeaway
    assert f"{chance[lo]:.3g} at k = {lo}" in slide.takeaway and "overlap_curve" not in slide.takeaway
    assert len(slide.notes.splitlines()) == 2 + len(want)  # the run's name, the header, every row
    even = open_run(data_dir / "runs" / f"{RUN2}.duckdb")
    assert not even.has("overlap_curve") and figure_slides(OVERLAP, ("overlap_profile",), [even]) == []
    both = figure_slides(OVERLAP, ("overlap_profile",), [run, even])
    assert [s.title for s in both] == [OVERLAP.section, OVERLAP_K.section]
    assert [t.name for t in both[1].figure.data] == list(lines) and RUN2 not in both[1].takeaway  # RUN's alone


def _continued(sl) -> bool:
    """A PowerPoint slide that continues the one before it (its title ends "(continued)")."""
    return any(sh.has_text_frame and sh.text_frame.text.strip().endswith("(continued)") for sh in sl.shapes)


def test_pptx(slides, run, tmp_path):
    from pptx import Presentation
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    path = write_report(slides, tmp_path / "r.pptx", "pptx")
    prs = Presentation(path)
    # every slide is one slide: the findings table too, at the largest text size that fits it (every claim a row)
    own = [sl for sl in prs.slides if not _continued(sl)]
    assert len(own) == len(slides) == len(prs.slides)
    [grid] = [sh.table for sh in own[1].shapes if sh.has_table]
    assert len(grid.rows) == 1 + len(CLAIM_IDS)
    assert prs.slide_width * 9 == prs.slide_height * 16
    for s, sl in zip(slides, own):
        pics = [sh for sh in sl.shapes if sh.shape_type == MSO_SHAPE_TYPE.PICTURE]
        assert len(pics) == (1 if s.figure is not None else 0)
        # the figure takes at least 60 % of the slide's height; a long takeaway went to the notes
        assert all(p.height >= 0.6 * prs.slide_height for p in pics), (s.title, [p.height for p in pics])
        assert s.figure is None or len(s.takeaway.partition(" · claim ")[0]) <= TAKEAWAY_MAX
        assert sl.notes_slide.notes_text_frame.text == s.notes
        assert sl.shapes.title is not None and sl.shapes.title.text == s.title  # the outline lists the titles
    assert prs.core_properties.title == run.name
    notes = own[2].notes_slide.notes_text_frame.text
    tr = analyses.tradeoff(run.stats(), *STUDY_BAND)
    for slope in tr["slope"]:
        assert f"{slope:.6g}" in notes
    # the decomposition slide's notes carry App. I: Q(X) over all embeddings against ‖γ‖² + ‖β‖²
    dec = next(
        sl.notes_slide.notes_text_frame.text for sl in prs.slides if "App. I" in sl.notes_slide.notes_text_frame.text
    )
    rows = [line.split() for line in dec.split("App. I", 1)[1].splitlines()[2:] if line.strip()]
    shown = dict((int(r[0]), float(r[3])) for r in rows)  # layer -> q_over_pred
    want = run.layer_stats().set_index("layer")["q"] / run.table("norm_params").set_index("layer")["q_pred"]
    assert sorted(shown) == run.layers
    np.testing.assert_allclose([shown[layer] for layer in run.layers], want.loc[run.layers], rtol=1e-5)


def test_pdf_pages_are_not_blank(slides, tmp_path):
    from PIL import Image

    path = write_report(slides, tmp_path / "r.pdf", "pdf")
    info = subprocess.run(["pdfinfo", str(path)], check=True, capture_output=True, text=True).stdout
    assert f"Title:           {RUN}" in info.splitlines()  # the run's name, not "untitled"
    subprocess.run(["pdftoppm", "-png", "-r", "30", str(path), str(tmp_path / "p")], check=True)
    pages = sorted(tmp_path.glob("p-*.png"))
    # a page per slide, and one per "(continued)" page of a table longer than its page (the findings)
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], check=True, capture_output=True, text=True).stdout
    continued = sum(
        "(continued)" in " ".join(page.strip().splitlines()[:2]) for page in text.split("\f") if page.strip()
    )
    assert len(pages) == len(slides) + continued
    for p in pages:
        a = np.asarray(Image.open(p).convert("L"), dtype=np.float64)
        assert a.std() > 10 and (a < 128).mean() > 0.005, p


def test_cli_comparison_and_bad_destinations(tmp_path, capsys, data_dir):
    out = tmp_path / "cmp.html"
    assert cli.main(["report", RUN, RUN2, "--format", "html", "--out", str(out), "--data-dir", str(data_dir)]) == 0
    text = out.read_text()
    assert "relative depth" in text and "<script src=" not in text  # plotly.js is inlined
    assert cli.main(["report", RUN, "--out", str(tmp_path / "missing" / "x.pptx"), "--data-dir", str(data_dir)]) == 2
    assert cli.main(["report", "nope", "--out", str(tmp_path / "x.pptx"), "--data-dir", str(data_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(e.startswith("normvar: error:") for e in err)


@pytest.mark.browser
def test_html_renders_offline_in_a_real_browser(slides, tmp_path):
    from playwright.sync_api import sync_playwright

    path = write_report(slides, tmp_path / "r.html", "html")
    requests = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=shutil.which("chromium") or "/usr/bin/chromium",
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})

        def block(route):
            requests.append(route.request.url)
            return route.continue_() if route.request.url.startswith("file://") else route.abort()

        page.route("**/*", block)
        page.goto(path.as_uri())
        page.wait_for_function(
            "document.querySelectorAll('.js-plotly-plot').length >= 6 && "
            "[...document.querySelectorAll('.js-plotly-plot')].every(d => d._fullData)",
            timeout=60_000,
        )
        n = page.evaluate("document.querySelectorAll('.js-plotly-plot .main-svg').length")
        # the interval traces are shaded fills with no edge line (not extra coloured series)
        bands = page.evaluate(
            "[...document.querySelectorAll('.js-plotly-plot')].flatMap(d => d._fullData)"
            ".filter(t => (t.name || '').includes('interval'))"
            ".map(t => [t.name, t.fill, t.line ? t.line.width : 0, t.visible])"
        )
        # the report reflows to the window: at 1,400 px nothing runs past its right edge
        overflow = page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth,"
            " Math.max(...[...document.querySelectorAll('table, .js-plotly-plot')]"
            ".map(e => e.getBoundingClientRect().right))]"
        )
        browser.close()
    assert n >= 6
    assert bands and {b[1] for b in bands if "upper edge" not in b[0]} == {"tonexty"}, bands
    assert all(b[2] == 0 and b[3] is True for b in bands), bands
    assert overflow[0] <= overflow[1] and overflow[2] <= overflow[1], overflow
    assert [u for u in requests if not u.startswith("file://")] == []


def test_report_is_a_worker_job_from_the_dashboard(tmp_path, monkeypatch, data_dir, slides):
    """Runs page: 'Build report' queues a job; the worker writes reports/<job>.pptx (the slides of the
    run, as `normvar report` builds them); the page then offers it for download. The same report asked
    twice while queued is one job; an unknown run or format is refused before anything is queued."""
    from dashboard_run import APP
    from pptx import Presentation
    from streamlit.testing.v1 import AppTest

    from normvar_core.errors import NormvarError
    from normvar_core.service import jobs as J
    from normvar_core.service import worker as W

    data = tmp_path / "data"
    (data / "runs").mkdir(parents=True)
    shutil.copy(data_dir / "runs" / f"{RUN}.duckdb", data / "runs" / f"{RUN}.duckdb")
    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"run": RUN})
    at.run()
    at.switch_page("views/runs.py").run()
    at.button(key="w_report_run").click().run()
    assert not at.exception
    assert any("no worker is running" in c.value for c in at.caption)
    store = J.JobStore(data)
    [job] = store.list()
    assert job.task == "report" and store.submit_report([RUN], "pptx") == job.id
    with pytest.raises(NormvarError):
        store.submit_report(["no-such-run"], "pptx")
    with pytest.raises(NormvarError, match="format"):
        store.submit_report([RUN], "docx")

    W.Worker(data, poll_s=0.05).run(once=True, install_signals=False)
    done = store.get(job.id)
    assert done.state == "done" and done.run_path == str(data / "reports" / f"{job.id}.pptx"), done
    deck = Presentation(done.run_path)
    assert len([sl for sl in deck.slides if not _continued(sl)]) == len(slides)
    at.run()
    assert not at.exception
    [dl] = [d for d in at.get("download_button") if "Download the report" in d.proto.label]
    assert dl.proto.label == "Download the report (pptx)"


def test_the_overlap_against_k_takeaway_reads_the_drawn_layer_pairs_only():
    """Of seven layer pairs the figure draws four (both ends, evenly spaced); the takeaway's ranges and ratios to
    chance are those four pairs' (an undrawn pair's extreme values appear only in the notes), and the pairs are
    named."""
    import pandas as pd

    from normvar_core.report.figure_reads import overlap_k
    from normvar_core.viz.neighbourhood_figures import overlap_k_figure
    from normvar_core.viz.page_figures import OVERLAP_K

    ks, n = [1, 10, 100], 1000
    rows = [
        {
            "pair": "next",
            "layer": l,
            "to_layer": l + 1,
            "masked": m,
            "k": k,
            "overlap_std": 0.0,
            "chance": k / n,
            "overlap": (0.999 if l == 1 else 0.5 + 0.01 * l) - 0.1 * m,
        }
        for l in range(7)
        for m in (False, True)
        for k in ks
    ]
    t = pd.DataFrame(rows)
    fig = overlap_k_figure({"r": t})
    drawn = sorted({int(s.name.split()[1]) for s in fig.data if s.name.startswith("layer")})
    assert drawn == [0, 2, 4, 6]
    take, notes = overlap_k(OVERLAP_K, {"r": t})
    assert "over the drawn layer pairs 0→1, 2→3, 4→5, 6→7 (" in take
    assert "keeps 0.500–0.560 at k = 1 and 0.500–0.560 at k = 100" in take  # layer 1's 0.999 is not drawn
    assert f"keeps {0.5 / (1 / n):.3g}× chance at k = 1 and {0.5 / (100 / n):.3g}× at k = 100" in take
    assert "0.999" in notes and len(notes.splitlines()) == 2 + len(t)


def test_the_frequency_and_clouds_readings_follow_planted_trends():
    """On planted data: M falling with n_t, V rising, Q unrelated give "falls", "rises" and "no clear trend" with their
    ρ; V's rise against a drawn line that falls gives no trend. Six clouds, each its points at ± its planted spread
    around its centre, nearer the origin and wider the more frequent: the medians of the three rarer and three more
    frequent, the words ("shrinks", "grows") and the rarest and the most frequent type's own planted numbers."""
    import pandas as pd

    from normvar_core.report.drawn_reads import cloud_read, frequency_read

    rng = np.random.default_rng(0)
    n = np.round(10 ** rng.uniform(1, 4, 400))
    x = np.log10(n)
    alternate = 5.0 + np.argsort(np.argsort(n)) % 2  # 5, 6, 5, 6 … in the order of n_t: no trend
    points = pd.DataFrame({"n": n, "m": 50 - 10 * x + rng.normal(0, 1, n.size), "v": 5 + 3 * x, "q": alternate})
    regs = pd.DataFrame({"layer": 3, "quantity": ["M", "V", "Q"], "slope": [-0.1, 0.05, 0.0]})
    said, table = frequency_read(points, regs, 3)
    assert said.startswith("over the 400 drawn types, Spearman's ρ against n_t: M falls (ρ -")
    assert ", V rises (ρ +1.00), Q shows no clear trend (ρ " in said
    assert table.set_index("quantity").loc["V", "spearman_rho"] == pytest.approx(1.0)
    said, _ = frequency_read(points, regs.assign(slope=[-0.1, -0.05, 0.0]), 3)  # the drawn V line falls
    assert "V shows no clear trend (ρ +1.00)" in said

    # clouds: type k (n = 10 (k + 1)) has its centre at distance 6 - k on a diagonal, its four points ± (k + 1) / 10
    square = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]], dtype=float)
    coords = pd.concat(
        [
            pd.DataFrame(
                {"token": f"t{k}", "n": 10 * (k + 1), "token_id": k}
                | dict(zip(("pc1", "pc2"), ((6 - k) / np.sqrt(2) + (k + 1) / 10 * square).T))
            )
            for k in range(6)
        ]
    )
    said, shares = cloud_read(coords.sample(frac=1, random_state=1))  # in any order
    assert list(shares["token"]) == [f"t{k}" for k in range(6)]
    assert "over the 6 drawn clouds, the rarer 3 vs the more frequent 3" in said
    assert "distance from the origin (×), median 5 vs 2 (Spearman's ρ against n_t -1.00: shrinks with n_t)" in said
    assert "the spread, median 0.2 vs 0.5 (ρ +1.00: grows with n_t)" in said
    assert said.endswith("t0 (n=10): distance 6, spread 0.1; t5 (n=60): distance 1, spread 0.6")
