"""The occurrences accumulator (issue 34, the Occurrences page) against a numpy float64 brute force over the
very states the seeded Gaussian source produced: which occurrences are kept, their coordinates on the
layer's principal axes, the recorded angle to the exact axes; the run file's tables read back through
DuckDB; --occurrences bounded; the memory plan counting the bytes."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.constants import OCCURRENCE_AXES, OCCURRENCES_MAX
from normvar_core.errors import NormvarError
from normvar_core.pipeline.accumulators import GeometryAccumulator, OccurrencesAccumulator
from normvar_core.pipeline.accumulators.layerview import update_all
from normvar_core.pipeline.accumulators.occurrences import early_axes, prime, spread_order
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.plan import synthetic_plan
from normvar_core.pipeline.sources import GaussianSource

LAYERS = [0, 2]


def _setup(dim: int, occurrences: int = 1_000_000, n_sentences: int = 90):
    cfg = RunConfig(model="gaussian", samples_per_token=0, occurrences=occurrences, halves=False)
    plan = synthetic_plan(cfg, n_sentences=n_sentences, vocab_size=25, layers=LAYERS, batch_size=8)
    source = GaussianSource(dim=dim, layers=LAYERS, seed=5, offset=6.0, sigma=1.0, scales=[1.0, 2.5],
                            dtype=torch.float64)
    ctx = RunContext(cfg=cfg, layers=LAYERS, dim=dim, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    return plan, source, ctx


def _finished(plan, source, ctx, *, positions: int):
    ctx.occurrence_axes = early_axes(source, plan, positions=positions)
    accs = {"geometry": GeometryAccumulator.for_run(ctx), "occurrences": OccurrencesAccumulator.for_run(ctx)}
    for sb in source.batches(plan, 0, plan.n_batches):
        update_all(accs, sb)
    occ = accs["occurrences"]
    occ.take_results({"geometry": accs["geometry"].result()})
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
    from normvar_core.pipeline.execute.partials import build_accumulators, run_range
    from normvar_core.pipeline.publish import publish_run
    from normvar_core.runs import occurrences as O
    from normvar_core.runs.reader import open_run

    plan, source, ctx = _setup(dim=10, occurrences=150)
    prime(ctx, source)
    accs = build_accumulators(ctx)
    assert "occurrences" in accs
    run_range(source, plan, accs, 0, plan.n_batches)
    occ = accs["occurrences"]
    keys = set(zip(occ.plan.sentence.tolist(), occ.plan.offset.tolist()))
    assert occ.plan.size == 150 == len(keys) < plan.total_embeddings
    path = publish_run(tmp_path / "occ.duckdb", plan=plan, source=source, ctx=ctx, accs=accs, seconds=1.0, notes={})
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
    with pytest.raises(NormvarError, match="occurrences must be <="):
        RunConfig(occurrences=OCCURRENCES_MAX + 1).validate()
    with pytest.raises(NormvarError, match="occurrences must be >= 0"):
        RunConfig.from_dict({"occurrences": -1})
    from normvar_core.pipeline.memory import ModelShape, plan_memory

    plan, source, ctx = _setup(dim=12, occurrences=200)
    shape = ModelShape(name="toy", architecture="Toy", params=1000, lm_head_params=0, buffer_bytes=0, dim=12,
                       num_hidden_states=3, heads=1, ffn=12, vocab=25, max_length=32)
    mp = plan_memory(ctx, shape=shape, memory_bytes=1 << 40, device="cpu", dtype="float32")
    L, d, k = len(LAYERS), 12, OCCURRENCE_AXES
    assert mp.accumulators["occurrences"] == 4 * L * 200 * k + 200 + 8 * L * (d * k + d + k + k * k) + 8
    tight = plan_memory(ctx, shape=shape, memory_bytes=mp.total_bytes - 1000, device="cpu", dtype="float32")
    assert "occurrences" in tight.dropped and "--occurrences" in tight.reasons["occurrences"]


def test_cli_refuses_out_of_range_occurrences_in_one_line(tmp_path, capsys):
    from normvar_core.service import cli

    assert cli.main(["compute", "--occurrences", str(OCCURRENCES_MAX + 1), "--data-dir", str(tmp_path)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "occurrences must be <=" in err[0] and "--occurrences" in err[0]


@pytest.mark.parametrize("scale", [1e-4, 1.0, 3e4])
def test_the_deck_spec_carries_every_point(scale):
    """The page's deck.gl JSON: every point at its coordinates (7 significant digits at any scale, y negated:
    deck.gl's y grows downwards), its colour, the search layer with exactly the matches, the box's outline."""
    import json

    import pandas as pd

    from normvar_core.viz import occurrence_figures as OF

    rng = np.random.default_rng(1)
    n = 5000
    pts = pd.DataFrame({"x": (rng.normal(size=n) * scale).astype(np.float32),
                        "y": (rng.normal(size=n) * scale).astype(np.float32),
                        "token_id": rng.integers(0, 30, n), "position": rng.integers(0, 40, n),
                        "n": rng.integers(1, 1000, n), "m": rng.random(n), "v": rng.random(n) * (rng.random(n) > 0.1)})
    pts["token"] = "t" + pts["token_id"].astype(str)
    rgb, legend = OF.colours(pts, "token type")
    assert len(legend["items"]) == OF.TOP_TYPES and legend["other"] + sum(c for _, c, _ in legend["items"]) == n
    hit = (pts["token_id"] == 3).to_numpy()
    spec = json.loads(OF.deck_spec(pts["x"].to_numpy(), pts["y"].to_numpy(), rgb, highlight=hit,
                                   box=((0, scale), (-scale, 0))).to_json())
    layers = {layer["id"]: layer for layer in spec["layers"]}
    data = layers[OF.LAYER_ID]["data"]
    assert len(data) == n and len(layers["search"]["data"]) == int(hit.sum())
    top = float(np.abs(pts[["x", "y"]].to_numpy()).max())  # resolution: a millionth of the largest coordinate
    np.testing.assert_allclose([d["x"] for d in data], pts["x"], rtol=0, atol=top * 1e-6)
    np.testing.assert_allclose([-d["y"] for d in data], pts["y"], rtol=0, atol=top * 1e-6)
    assert [[d["r"], d["g"], d["b"]] for d in data[:50]] == rgb[:50].tolist()
    assert layers["box"]["data"][0]["path"][0] == [0, scale] and spec["views"][0]["@@type"] == "OrthographicView"
    for by in OF.COLOUR_BY:
        c, leg = OF.colours(pts, by)
        assert c.shape == (n, 3) and c.dtype == np.uint8
        if leg["kind"] == "ramp":
            assert np.isfinite([leg["lo"], leg["hi"]]).all() and leg["lo"] <= leg["hi"]
