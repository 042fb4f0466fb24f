"""The Occurrences page in a real browser (Playwright + Debian chromium) on the dashboard tests' MiniLM run
(300 sentences of the shipped novels, built once per session): the WebGL scatter receives every occurrence of the layer
and the caption's count equals the run's
embedding count there (n in layer_stats); a token search draws exactly that token's occurrences on top; a box
typed into the page, and one dragged with the mouse (shift+drag, after a wheel zoom), give the types a DuckDB
query with the same bounds gives; a lasso dragged with the mouse (alt+drag) gives the types matplotlib's
point-in-polygon gives on the run's points; nothing is requested from any host but the dashboard's own (the
component's module is a blob: URL of the page). Screenshot: occurrences.png in browser_helpers.ARTIFACTS."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import numpy as np
import pytest
from browser_helpers import ARGS, ARTIFACTS, CHROMIUM, serving
from dashboard_run import RUN
from matplotlib.path import Path as Polygon

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LAYER = 3


@pytest.fixture(scope="module")
def data(data_dir) -> Path:
    return data_dir


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


def _types(db, where: str) -> set[str]:
    """The token types of the occurrences ``where`` (a WHERE clause on occurrences o) selects."""
    sql = (
        "SELECT DISTINCT s.token FROM occurrences o JOIN token_stats s ON s.layer = o.layer "
        "AND s.token_id = o.token_id " + where.replace("layer =", "o.layer =")
    )
    return {r[0] for r in db.execute(sql).fetchall()}


def _where(select: str, box) -> str:
    (x0, x1), (y0, y1) = box
    return f"{select} WHERE layer = {LAYER} AND x >= {x0} AND x <= {x1} AND y >= {y0} AND y <= {y1}"


def _attr(page, name: str, until=lambda v: v is not None, timeout_s: float = 60):
    """The scatter host's ``data-NAME`` once ``until`` holds (polled: the component sets it after a rerun)."""
    host = page.locator(".nv-scatter")
    for _ in range(int(timeout_s * 4)):
        value = host.get_attribute(f"data-{name}")
        if until(value):
            return value
        page.wait_for_timeout(250)
    raise AssertionError(f"data-{name} stayed {value!r}")


def _pixel(view: dict, box: dict, x: float, y: float) -> tuple[float, float]:
    """Data (x, y) -> page pixel, by the view the component reports (centre, pixels per unit, size)."""
    return (
        box["x"] + view["W"] / 2 + (x - view["cx"]) * view["ppu"],
        box["y"] + view["H"] / 2 - (y - view["cy"]) * view["ppu"],
    )


def _zoom_to(page, at: tuple[float, float], ppu: float) -> tuple[dict, dict]:
    """Wheel-zoom (the real mouse) around the data point ``at`` until ``ppu`` pixels a unit; the view, the box."""
    box = page.locator(".nv-ink").bounding_box()
    for _ in range(40):
        view = json.loads(_attr(page, "view"))
        if view["ppu"] >= ppu:
            return view, box
        page.mouse.move(*_pixel(view, box, *at))
        page.mouse.wheel(0, -300)
        page.wait_for_timeout(300)
    raise AssertionError("the wheel did not zoom")


def _drag(page, key: str, pixels: list[tuple[float, float]], attr_before: str | None) -> dict:
    """Hold ``key`` and drag the mouse through ``pixels``; the selection the component sent to Python."""
    page.keyboard.down(key)
    page.mouse.move(*pixels[0])
    page.mouse.down()
    for px in pixels[1:]:
        page.mouse.move(*px)
    page.mouse.up()
    page.keyboard.up(key)
    return json.loads(_attr(page, "selection", until=lambda v: v is not None and v != attr_before))


def _shows(page, head: str, count: int, tokens: set[str]) -> bool:
    """The page's selection header says ``count`` occurrences of len(tokens) types (waited for) and the bar
    under it lists those types (its first 40 when there are more)."""
    page.get_by_text(re.compile(f"^{head}: {count:,} occurrences of {len(tokens):,} types")).wait_for(timeout=90000)
    page.wait_for_timeout(1000)
    listed = page.locator("[data-testid=stMarkdownContainer]:has-text('Selection:') code").all_inner_texts()
    return set(listed) == tokens if len(tokens) <= 40 else (len(listed) == 40 and set(listed) <= tokens)


def test_every_occurrence_drawn_and_a_box_is_a_duckdb_query(server, db):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    n_layer = db.execute(f"SELECT n FROM layer_stats WHERE layer = {LAYER}").fetchone()[0]
    requests, frames = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1300})
        page.on("request", lambda r: requests.append(r.url))
        page.on(
            "websocket",
            lambda ws: ws.on("framereceived", lambda f: frames.append(f if isinstance(f, bytes) else f.encode())),
        )
        page.goto(f"{server}/?page=occurrences&run={RUN}&layer={LAYER}")
        page.wait_for_selector(".nv-scatter[data-frames]", timeout=180000)
        caption = page.get_by_text(re.compile(r"^[\d,]+ occurrences")).first.inner_text(timeout=60000)
        shown = int(caption.split()[0].replace(",", ""))
        assert shown == n_layer == int(_attr(page, "points")) and int(_attr(page, "bytes")) >= 11 * n_layer
        assert db.execute(f"SELECT count(*) FROM occurrences WHERE layer = {LAYER}").fetchone()[0] == n_layer

        # a token search: exactly its occurrences drawn on top
        page.get_by_label("Search a token", exact=True).fill("the")
        page.get_by_label("Search a token", exact=True).press("Enter")
        want = db.execute(
            f"SELECT count(*) FROM occurrences o JOIN token_stats s ON s.layer = o.layer AND "
            f"s.token_id = o.token_id WHERE o.layer = {LAYER} AND s.token = 'the'"
        ).fetchone()[0]
        assert want > 0 and int(_attr(page, "highlight", until=lambda v: v not in (None, "0"))) == want

        # a box typed into the page = a DuckDB query with the same bounds
        box = _small_box(db)
        for label, value in zip(("x from", "x to", "y from", "y to"), (*box[0], *box[1])):
            field = page.get_by_label(label, exact=True)
            field.fill(str(value))
            field.press("Enter")
            page.wait_for_timeout(800)
        count = db.execute(_where("SELECT count(*) FROM occurrences", box)).fetchone()[0]
        assert _shows(page, "Box", count, _types(db, _where("", box)))
        page.locator(".nv-scatter").screenshot(path=str(ARTIFACTS / "occurrences.png"))  # the whole layer, a box

        # a box dragged with the mouse (shift) after zooming with the wheel around the small box's centre
        centre = (sum(box[0]) / 2, sum(box[1]) / 2)
        view, rect = _zoom_to(page, centre, 120 / (box[0][1] - box[0][0]))
        (px, py), half = _pixel(view, rect, *centre), 60
        sel = _drag(
            page,
            "Shift",
            [(px - half, py - half)] + [(px + half * t / 4, py + 0.7 * half * t / 4) for t in range(-3, 5)],
            None,
        )
        assert sel["kind"] == "box"
        tol = 1.5 / view["ppu"]  # the corners the mouse went to, in data units, within a pixel and a half
        u = half / view["ppu"]
        assert abs(sel["x"][0] - (centre[0] - u)) < tol and abs(sel["x"][1] - (centre[0] + u)) < tol
        assert abs(sel["y"][0] - (centre[1] - 0.7 * u)) < tol and abs(sel["y"][1] - (centre[1] + u)) < tol
        dragged = ((sel["x"][0], sel["x"][1]), (sel["y"][0], sel["y"][1]))
        count = db.execute(_where("SELECT count(*) FROM occurrences", dragged)).fetchone()[0]
        assert count > 0 and _shows(page, "Box", count, _types(db, _where("", dragged)))

        # a lasso dragged with the mouse (alt): a concave arrowhead, vertices 30 px and more apart
        shape = [(-200, -170), (0, 60), (200, -170), (0, 200)]
        lasso = _drag(page, "Alt", [(px + dx, py + dy) for dx, dy in shape], json.dumps(sel))
        poly = np.asarray(lasso["polygon"], np.float64)
        assert lasso["kind"] == "lasso" and len(poly) == len(shape)
        pts = db.execute(
            f"SELECT x, y, s.token FROM occurrences o JOIN token_stats s ON s.layer = o.layer AND "
            f"s.token_id = o.token_id WHERE o.layer = {LAYER}"
        ).fetchnumpy()
        inside = Polygon(poly).contains_points(np.c_[pts["x"], pts["y"]].astype(np.float64))
        assert inside.sum() > 0 and _shows(page, "Lasso", int(inside.sum()), set(pts["token"][inside].tolist()))

        # a click on the point nearest the centre (no other place within 3 px): its token, sentence, position
        view = json.loads(_attr(page, "view"))
        sid, pos, x, y, tok = db.execute(
            f"SELECT o.sentence_id, o.position, o.x, o.y, s.token FROM occurrences o JOIN token_stats s ON "
            f"s.layer = o.layer AND s.token_id = o.token_id WHERE o.layer = {LAYER} "
            f"ORDER BY (o.x - {centre[0]}) ^ 2 + (o.y - {centre[1]}) ^ 2, o.sentence_id, o.position LIMIT 1"
        ).fetchone()
        near = db.execute(
            f"SELECT count(*) FROM occurrences WHERE layer = {LAYER} AND (x <> {x} OR y <> {y}) AND "
            f"sqrt((x - {x}) ^ 2 + (y - {y}) ^ 2) < {3 / view['ppu']}"
        ).fetchone()[0]
        assert near == 0
        page.mouse.click(*_pixel(view, rect, x, y))
        details = page.get_by_text(re.compile(rf"sentence {sid}, position {pos} ·"))
        details.wait_for(timeout=60000)
        assert details.inner_text().startswith(tok)

        # after all these reruns, one wheel notch still zooms once (each rerun calls the component's function
        # again; its listeners must not pile up): ppu grows by exp(0.0015 * 300), not a power of it
        view = json.loads(_attr(page, "view"))
        page.mouse.move(*_pixel(view, rect, view["cx"], view["cy"]))
        page.mouse.wheel(0, -300)
        zoomed = json.loads(_attr(page, "view", until=lambda v: v and json.loads(v)["ppu"] != view["ppu"]))
        page.wait_for_timeout(500)
        zoomed = json.loads(_attr(page, "view"))
        assert zoomed["ppu"] / view["ppu"] == pytest.approx(np.exp(0.45), rel=1e-6)
        browser.close()

    others = [u for u in requests if not u.startswith(server) and not u.startswith(f"blob:{server}/")]
    assert not others, others[:5]
