"""The Occurrences page (issue 34) in a real browser (Playwright + Debian chromium) on a 1,500-sentence MiniLM
run: the deck the page sends holds every occurrence of the layer and its caption's count equals the run's
embedding count there (n in layer_stats); a token search draws exactly that token's occurrences on top; a box
typed into the page gives the types a DuckDB query with the same bounds gives; nothing is requested from any
host but the dashboard's own. Screenshot: test-artifacts/occurrences.png."""
from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from test_dashboard_browser import ARGS, CHROMIUM, serving

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
RUN = "minilm-occ1500"
LAYER = 3


@pytest.fixture(scope="module")
def data(tmp_path_factory, minilm_path) -> Path:  # noqa: ARG001 - the model must be installed
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.execute.local import compute_run

    root = tmp_path_factory.mktemp("occ-data")
    compute_run(RunConfig(model="minilm", max_sentences=1500, name=RUN), root)
    return root


@pytest.fixture(scope="module")
def db(data):
    con = duckdb.connect(str(data / "runs" / f"{RUN}.duckdb"), read_only=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory, data):
    yield from serving(data, tmp_path_factory.getbasetemp() / "streamlit-occ.log")


def _small_box(db) -> tuple[tuple[float, float], tuple[float, float]]:
    """A box around the median point holding a few occurrences of at most 30 types (bounds at 4 decimals)."""
    cx, cy = db.execute(f"SELECT median(x), median(y) FROM occurrences WHERE layer = {LAYER}").fetchone()
    for half in (0.5, 0.3, 0.2, 0.1, 0.05, 0.02):
        box = ((round(cx - half, 4), round(cx + half, 4)), (round(cy - half, 4), round(cy + half, 4)))
        count, types = db.execute(_where("SELECT count(*), count(DISTINCT token_id) FROM occurrences", box)).fetchone()
        if 3 <= count and types <= 30:
            return box
    raise AssertionError("no small box found")


def _where(select: str, box) -> str:
    (x0, x1), (y0, y1) = box
    return f"{select} WHERE layer = {LAYER} AND x >= {x0} AND x <= {x1} AND y >= {y0} AND y <= {y1}"


def _deck_points(frames: list[bytes], layer_id: str) -> int | None:
    """Points in the data of deck layer ``layer_id`` in the last websocket frame that carries it."""
    for raw in reversed(frames):
        at = raw.find(f'"id":"{layer_id}","data":['.encode())
        if at >= 0:
            end = raw.find(b'}],"', at)
            return raw[at:end].count(b'{"x":')
    return None


def test_every_occurrence_drawn_and_a_box_is_a_duckdb_query(server, db):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    n_layer = db.execute(f"SELECT n FROM layer_stats WHERE layer = {LAYER}").fetchone()[0]
    requests, frames = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1300})
        page.on("request", lambda r: requests.append(r.url))
        page.on("websocket", lambda ws: ws.on("framereceived", lambda f: frames.append(
            f if isinstance(f, bytes) else f.encode())))
        page.goto(f"{server}/?page=occurrences&run={RUN}&layer={LAYER}")
        page.wait_for_selector("[data-testid=stDeckGlJsonChart] canvas", timeout=180000)
        caption = page.get_by_text(re.compile(r"^[\d,]+ occurrences")).first.inner_text(timeout=60000)
        shown = int(caption.split()[0].replace(",", ""))
        assert shown == n_layer == _deck_points(frames, "occurrences")
        assert db.execute(f"SELECT count(*) FROM occurrences WHERE layer = {LAYER}").fetchone()[0] == n_layer

        # a token search: exactly its occurrences drawn on top
        page.get_by_label("Search a token", exact=True).fill("the")
        page.get_by_label("Search a token", exact=True).press("Enter")
        page.wait_for_function("() => document.body.innerText.includes('occurrences')", timeout=60000)
        page.wait_for_timeout(1500)
        want = db.execute(f"SELECT count(*) FROM occurrences o JOIN token_stats s ON s.layer = o.layer AND "
                      f"s.token_id = o.token_id WHERE o.layer = {LAYER} AND s.token = 'the'").fetchone()[0]
        assert want > 0
        page.wait_for_function("() => true")
        assert _deck_points(frames, "search") == want

        # a box typed into the page = a DuckDB query with the same bounds
        box = _small_box(db)
        for label, value in zip(("x from", "x to", "y from", "y to"), (*box[0], *box[1])):
            field = page.get_by_label(label, exact=True)
            field.fill(str(value))
            field.press("Enter")
            page.wait_for_timeout(800)
        page.get_by_text(re.compile(r"^Box: ")).wait_for(timeout=60000)
        page.wait_for_timeout(1500)
        head = page.get_by_text(re.compile(r"^Box: ")).inner_text()
        count, types = db.execute(_where("SELECT count(*), count(DISTINCT token_id) FROM occurrences", box)).fetchone()
        assert head.startswith(f"Box: {count:,} occurrences of {types:,} types"), head
        listed = page.locator("[data-testid=stMarkdownContainer]:has-text('Selection:') code").all_inner_texts()
        expected = {r[0] for r in db.execute(_where("SELECT DISTINCT s.token FROM occurrences o JOIN token_stats s ON "
                                                "s.layer = o.layer AND s.token_id = o.token_id", box)
                                         .replace("WHERE layer", "WHERE o.layer")).fetchall()}
        assert set(listed) == expected and len(listed) == types
        page.locator("[data-testid=stDeckGlJsonChart]").screenshot(path=str(ARTIFACTS / "occurrences.png"))
        browser.close()

    others = [u for u in requests if not u.startswith(server)]
    assert not others, others[:5]
