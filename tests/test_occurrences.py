"""The occurrences measure (issue 34, the Occurrences page) against a numpy float64 brute force over the
very states the seeded Gaussian source produced: which occurrences are kept, their coordinates on the
layer's principal axes, the recorded angle to the exact axes; the run file's tables read back through
DuckDB; --occurrences bounded; the memory plan counting the bytes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from real_state import held_bytes

from normvar_core.config import RunConfig
from normvar_core.constants import OCCURRENCE_AXES, OCCURRENCES_MAX
from normvar_core.errors import NormvarError
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures import GeometryMeasure, OccurrencesMeasure, prime
from normvar_core.pipeline.measures.layerview import update_all
from normvar_core.pipeline.measures.occurrences import early_axes, spread_order
from normvar_core.pipeline.run_plan import synthetic_plan
from normvar_core.pipeline.sources import GaussianSource

LAYERS = [0, 2]


def _setup(dim: int, occurrences: int = 1_000_000, n_sentences: int = 90):
    cfg = RunConfig(model="gaussian", samples_per_token=0, occurrences=occurrences, halves=False)
    plan = synthetic_plan(cfg, n_sentences=n_sentences, vocab_size=25, layers=LAYERS, batch_size=8)
    source = GaussianSource(
        dim=dim, layers=LAYERS, seed=5, offset=6.0, sigma=1.0, scales=[1.0, 2.5], dtype=torch.float64
    )
    ctx = RunContext(cfg=cfg, layers=LAYERS, dim=dim, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    return plan, source, ctx


def _finished(plan, source, ctx, *, positions: int):
    ctx.early[OccurrencesMeasure.name] = early_axes(source, plan, positions=positions)
    measures = {"geometry": GeometryMeasure.for_run(ctx), "occurrences": OccurrencesMeasure.for_run(ctx)}
    for sb in source.batches(plan, 0, plan.n_batches):
        update_all(measures, sb)
    occ = measures["occurrences"]
    occ.take_states({"geometry": measures["geometry"]})
    return occ, occ.result()


def _brute(source, plan):
    """Every state (L, N, d) float64 with its (sentence, position), and each layer's exact top-2 axes."""
    parts = list(source.batches(plan, 0, plan.n_batches))
    X = torch.cat([p.states for p in parts], 1).numpy().astype(np.float64)
    sent = torch.cat([torch.as_tensor(p.sentence_ids) for p in parts]).numpy()
    pos = torch.cat([torch.as_tensor(p.positions) for p in parts]).numpy()
    axes = []
    for Xl in X:
        w, V = np.linalg.eigh(np.cov(Xl, rowvar=False, bias=True))
        E = V[:, ::-1][:, :2]
        E = E * np.sign(E[np.argmax(np.abs(E), axis=0), [0, 1]])  # largest component positive
        axes.append(E)
    return X, sent, pos, axes


def _table_order(occ, sent, pos):
    """Index into the brute-force rows of each kept occurrence (the table's order)."""
    key = {(int(s), int(p)): i for i, (s, p) in enumerate(zip(sent, pos))}
    return np.array([key[(int(s), int(p))] for s, p in zip(occ.plan.sentence, occ.plan.offset)])


def test_spread_order_visits_every_batch_spread_out():
    assert list(spread_order(10)) == [0, 5, 2, 7, 1, 6, 3, 8, 4, 9]
    for n in (1, 2, 3, 7, 100):
        assert sorted(spread_order(n)) == list(range(n))


def test_exact_principal_coordinates_when_the_subspace_is_everything():
    """d = 6 < k = 8: the early subspace is all of R^d, so the coordinates are exactly (x - μ)·e1, (x - μ)·e2
    of the exact covariance (numpy eigh over every state), and the recorded angle is 0."""
    plan, source, ctx = _setup(dim=6)
    occ, res = _finished(plan, source, ctx, positions=40)
    X, sent, pos, axes = _brute(source, plan)
    rows = _table_order(occ, sent, pos)
    assert len(rows) == X.shape[1] == plan.total_embeddings  # every occurrence kept
    for li in range(len(LAYERS)):
        want = (X[li] - X[li].mean(0)) @ axes[li]
        np.testing.assert_allclose(res["xy"][li], want[rows], rtol=1e-5, atol=1e-5 * np.abs(want).max())
        assert res["rows"][li]["angle_x_deg"] == pytest.approx(0, abs=1e-4)
        assert res["rows"][li]["angle_y_deg"] == pytest.approx(0, abs=1e-4)
        assert res["rows"][li]["var_x"] == pytest.approx(np.var(want[:, 0]), rel=1e-9)


def test_rotation_into_the_early_subspace_and_its_angle():
    """d = 40 > k = 8, early axes from the first 2 batches of the spread order: B = top-k eigenvectors of
    those states' covariance; the coordinates are (x - μ)·u with u ∝ BBᵀe (u2 orthogonalised), and the
    recorded angle is arccos ‖Bᵀe‖ — all recomputed here in numpy."""
    plan, source, ctx = _setup(dim=40)
    first = list(spread_order(plan.n_batches))[:2]
    n_first = sum(int(plan.batches[b].attention_mask.sum()) for b in first)
    occ, res = _finished(plan, source, ctx, positions=n_first)
    X, sent, pos, axes = _brute(source, plan)
    starts = np.cumsum([0] + [int(b.attention_mask.sum()) for b in plan.batches])
    early = np.concatenate([np.arange(starts[b], starts[b + 1]) for b in first])
    rows = _table_order(occ, sent, pos)
    for li in range(len(LAYERS)):
        Z = X[li][early]
        w, V = np.linalg.eigh(np.cov(Z, rowvar=False, bias=True))
        B = V[:, ::-1][:, :OCCURRENCE_AXES]
        c = B.T @ axes[li]
        angles = np.degrees(np.arccos(np.minimum(1, np.linalg.norm(c, axis=0))))
        assert [res["rows"][li]["angle_x_deg"], res["rows"][li]["angle_y_deg"]] == pytest.approx(angles, abs=1e-6)
        u1 = B @ c[:, 0]
        u1 /= np.linalg.norm(u1)
        u2 = B @ c[:, 1]
        u2 -= (u1 @ u2) * u1
        u2 /= np.linalg.norm(u2)
        want = (X[li] - X[li].mean(0)) @ np.stack([u1, u2], 1)
        np.testing.assert_allclose(res["xy"][li], want[rows], rtol=1e-5, atol=1e-5 * np.abs(want).max())
        assert 0 < angles.max() < 60  # a real rotation, not a degenerate one
    assert res["rows"][0]["n_early"] == n_first and res["rows"][0]["early_batches"] == 2


def test_a_cap_keeps_a_seeded_uniform_sample_and_the_file_reads_back(tmp_path):
    """--occurrences below the run's positions: exactly that many, distinct, the same whatever the split; the
    published tables hold them (DuckDB), one row per layer of axes, and the sentences they point at."""
    from normvar_core.pipeline.execute.partials import build_measures, run_range
    from normvar_core.pipeline.execute.publish import publish_run
    from normvar_core.runs import occurrence_queries as O
    from normvar_core.runs.reader import open_run

    plan, source, ctx = _setup(dim=10, occurrences=150)
    prime(ctx, source)
    measures = build_measures(ctx)
    assert "occurrences" in measures
    run_range(source, plan, measures, 0, plan.n_batches)
    occ = measures["occurrences"]
    keys = set(zip(occ.plan.sentence.tolist(), occ.plan.offset.tolist()))
    assert occ.plan.size == 150 == len(keys) < plan.total_embeddings
    path = publish_run(
        tmp_path / "occ.duckdb", plan=plan, source=source, ctx=ctx, measures=measures, seconds=1.0, notes={}
    )
    run = open_run(path)
    assert run.has("occurrences")
    pts = O.occurrence_points(run, 2)
    assert len(pts) == O.occurrence_count(run, 2) == 150
    assert set(zip(pts["sentence_id"], pts["position"])) == keys
    assert (pts["token"] == [plan.tokens[int(t)] for t in pts["token_id"]]).all()
    ax = O.occurrence_axes(run)
    assert list(ax["layer"]) == LAYERS and (ax["angle_x_deg"] >= 0).all()
    box = ((float(pts["x"].quantile(0.2)), float(pts["x"].quantile(0.8))), (-1e9, float(pts["y"].median())))
    pred = O.box_predicate(2, *box)
    types = O.selected_types(run, pred)
    inside = pts[O.in_box(pts, *box)]
    assert int(types["count"].sum()) == len(inside) > 0
    assert dict(zip(types["token_id"], types["count"])) == inside["token_id"].value_counts().to_dict()
    assert set(run.sentences().keys()) >= set(pts["sentence_id"])


def test_occurrences_option_is_bounded_and_counted_by_the_memory_plan():
    with pytest.raises(NormvarError, match="--occurrences 20000001 is not a whole number from 0 to 20,000,000"):
        RunConfig(occurrences=OCCURRENCES_MAX + 1).validate()
    with pytest.raises(NormvarError, match="--occurrences -1 is not a whole number from 0 "):
        RunConfig.from_dict({"occurrences": -1})
    from normvar_core.pipeline.memory.plan import plan_memory
    from normvar_core.pipeline.model_shape import ModelShape

    plan, source, ctx = _setup(dim=12, occurrences=200)
    shape = ModelShape(
        name="toy",
        architecture="Toy",
        params=1000,
        lm_head_params=0,
        buffer_bytes=0,
        dim=12,
        num_hidden_states=3,
        heads=1,
        ffn=12,
        vocab=25,
        max_length=32,
    )
    occ, _ = _finished(plan, source, ctx, positions=64)  # a real pass: the state the plan counts
    mp = plan_memory(ctx, shape=shape, memory_bytes=1 << 40, device="cpu", dtype="float32")
    assert mp.measures["occurrences"] == held_bytes(occ) > 0
    tight = plan_memory(ctx, shape=shape, memory_bytes=mp.total_bytes - 1000, device="cpu", dtype="float32")
    assert "occurrences" in tight.dropped and "--occurrences" in tight.reasons["occurrences"]


def test_cli_refuses_out_of_range_occurrences_in_one_line(tmp_path, capsys):
    from normvar_core.service import cli

    assert cli.main(["compute", "--occurrences", str(OCCURRENCES_MAX + 1), "--data-dir", str(tmp_path)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "is not a whole number from 0 to 20,000,000" in err[0] and "--occurrences" in err[0]


@pytest.mark.parametrize("scale", [1e-4, 1.0, 3e4])
def test_the_scatter_payload_carries_every_point(scale):
    """The component's bytes: every point at its float32 coordinates, its colour, exactly the searched points
    on top, the selection's polygon and the frame, read back by the layout the JavaScript reads."""
    import pandas as pd

    from normvar_core.viz import occurrence_figures as OF

    rng = np.random.default_rng(1)
    n = 5001  # odd: the rgb block needs padding
    pts = pd.DataFrame(
        {
            "x": (rng.normal(size=n) * scale).astype(np.float32),
            "y": (rng.normal(size=n) * scale).astype(np.float32),
            "token_id": rng.integers(0, 30, n),
            "position": rng.integers(0, 40, n),
            "n": rng.integers(1, 1000, n),
            "m": rng.random(n),
            "v": rng.random(n) * (rng.random(n) > 0.1),
        }
    )
    pts["token"] = "t" + pts["token_id"].astype(str)
    rgb, legend = OF.colours(pts, "token type")
    assert len(legend["items"]) == OF.TOP_TYPES and legend["other"] + sum(c for _, c, _ in legend["items"]) == n
    hit = (pts["token_id"] == 3).to_numpy()
    x, y = pts["x"].to_numpy(), pts["y"].to_numpy()
    block = OF.points_block(x, y, rgb)
    raw = OF.scatter_payload(x, y, block, highlight=hit, shape=[[0, 0], [scale, 0], [0, scale]])
    assert raw == OF.scatter_payload(x, y, rgb=rgb, highlight=hit, shape=[[0, 0], [scale, 0], [0, scale]])
    back = OF.read_payload(raw)
    assert back["head"]["n"] == n and back["head"]["h"] == int(hit.sum()) == len(back["highlight"])
    np.testing.assert_array_equal(back["xy"], np.c_[x, y])
    np.testing.assert_array_equal(back["highlight"], np.c_[x[hit], y[hit]])
    np.testing.assert_array_equal(back["rgb"], rgb)
    assert back["head"]["shape"][1] == [scale, 0] and raw[:4] == OF.MAGIC
    assert len(raw) - len(block[0]) - 8 * int(hit.sum()) < 400  # 11 bytes a point (+ padding), a small header
    x0, x1, y0, y1 = back["head"]["frame"]
    assert x0 == pytest.approx(np.percentile(x, 0.5)) and y1 == pytest.approx(np.percentile(y, 99.5))
    assert OF.points_block(x, y, rgb)[1] == block[1] != OF.points_block(x, y, rgb[::-1])[1]
    for by in OF.COLOUR_BY:
        c, leg = OF.colours(pts, by)
        assert c.shape == (n, 3) and c.dtype == np.uint8
        if leg["kind"] == "ramp":
            assert np.isfinite([leg["lo"], leg["hi"]]).all() and leg["lo"] <= leg["hi"]


def test_the_payload_header_is_strict_json_for_damaged_and_degenerate_points():
    """A damaged run's NaN or inf coordinate, one point, or every point at one place: the header stays JSON that
    the browser's JSON.parse reads (no NaN / Infinity), its frame the finite points' range, never of zero span."""
    import json

    from normvar_core.viz import occurrence_figures as OF

    rgb = np.zeros((6, 3), np.uint8)
    x = np.array([0, 1, np.nan, 2, np.inf, 3], np.float32)
    y = np.array([0, 1, 1, -np.inf, 2, 3], np.float32)
    raw = OF.scatter_payload(x, y, rgb=rgb)
    (size,) = np.frombuffer(raw[4:8], "<u4")
    head = json.loads(raw[8 : 8 + int(size)], parse_constant=lambda c: pytest.fail(f"{c} in the header"))
    finite = np.isfinite(x) & np.isfinite(y)
    assert head["frame"] == pytest.approx(
        [*np.percentile(x[finite], [0.5, 99.5]), *np.percentile(y[finite], [0.5, 99.5])]
    )
    assert OF.frame(np.array([2.0]), np.array([5.0])) == [1.5, 2.5, 4.5, 5.5]  # one point: a span of 1
    assert OF.frame(np.array([np.nan]), np.array([1.0])) == [-1.0, 1.0, -1.0, 1.0]


def _polygons(rng):
    """A convex polygon (a random hexagon, its vertices in angle order), a concave star and a concave comb."""
    t = np.sort(rng.uniform(0, 2 * np.pi, 6))
    convex = np.c_[np.cos(t), np.sin(t)] * 1.3
    s = np.linspace(0, 2 * np.pi, 14, endpoint=False)
    r = np.where(np.arange(14) % 2 == 0, 1.6, 0.5)
    star = np.c_[r * np.cos(s), r * np.sin(s)] + rng.normal(0, 0.05, (14, 2))
    comb = np.array([[-1.5, -1], [1.5, -1], [1.5, 1], [1, 1], [0.5, -0.4], [0, 1], [-0.5, -0.4], [-1, 1], [-1.5, 1]])
    return {"convex": convex, "star": star, "comb": comb}


def test_the_polygon_predicate_selects_what_matplotlib_selects():
    """A lasso's DuckDB predicate (even-odd ray casting over the edges, in SQL) selects the same rows of a FLOAT
    table as matplotlib.path's point-in-polygon on the same points, for convex and concave polygons; another
    layer's rows never."""
    import duckdb
    import pandas as pd
    from matplotlib.path import Path

    from normvar_core.runs import occurrence_queries as O

    rng = np.random.default_rng(7)
    n = 40_000
    xy = rng.uniform(-2, 2, (n, 2)).astype(np.float32)
    on_layer = np.arange(n) % 5 != 0
    frame = pd.DataFrame({"i": np.arange(n), "layer": np.where(on_layer, 2, 3), "x": xy[:, 0], "y": xy[:, 1]})  # noqa: F841  -- DuckDB reads it by name
    con = duckdb.connect()
    con.execute("CREATE TABLE occurrences AS SELECT i, layer, x::FLOAT AS x, y::FLOAT AS y FROM frame")
    for name, poly in _polygons(rng).items():
        got = np.array(
            sorted(
                r[0] for r in con.execute(f"SELECT i FROM occurrences WHERE {O.polygon_predicate(2, poly)}").fetchall()
            ),
            int,
        )
        want = np.flatnonzero(Path(poly).contains_points(xy.astype(np.float64)) & on_layer)
        assert 200 < len(want) < n and np.array_equal(got, want), name


def test_points_on_shared_edges_fall_in_exactly_one_polygon():
    """Two polygons that tile a square (split along a zigzag) and grid points, many exactly on the edges and
    vertices: each point of the square's half-open interior is selected by exactly one of the two predicates
    (the half-open rule), none outside; a polygon of fewer than 3 vertices is refused with the fix."""
    import duckdb

    from normvar_core.errors import NormvarError
    from normvar_core.runs import occurrence_queries as O

    zig = [[0, 0], [1, 2], [2, 0], [3, 2], [4, 0]]  # from (0, 0) to (4, 0) through the square [0, 4]²
    lower = [*zig, [4, -4], [0, -4]]
    upper = [*zig, [4, 4], [0, 4]]
    gx, gy = np.meshgrid(np.arange(-1, 5.5, 0.5), np.arange(-5, 5.5, 0.5))
    pts = np.c_[gx.ravel(), gy.ravel()]
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE occurrences AS SELECT * FROM (SELECT unnest(?) AS x, unnest(?) AS y, 1 AS layer)",
        [pts[:, 0].tolist(), pts[:, 1].tolist()],
    )
    count = {}
    for poly in (lower, upper):
        for x, y in con.execute(f"SELECT x, y FROM occurrences WHERE {O.polygon_predicate(1, poly)}").fetchall():
            count[(x, y)] = count.get((x, y), 0) + 1
    inside = {(float(x), float(y)) for x, y in pts if 0 <= x < 4 and -4 <= y < 4}
    assert set(count) == inside and set(count.values()) == {1}
    with pytest.raises(NormvarError, match="at least 3 vertices"):
        O.polygon_predicate(1, [[0, 0], [1, 1]])
