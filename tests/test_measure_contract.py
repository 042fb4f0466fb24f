"""One contract, checked on every registered measure (as scikit-learn checks every estimator):
state_dict holds numpy arrays only and round-trips through np.savez without pickle; it holds exactly
the registered state (``state_spec``: keys, shapes, dtypes); two halves merged equal one stream, also
when the merge may read no incoming array of 3+ dimensions whole (one layer block at a time, as the
Ray driver merges); the tables it writes are the ones it declares; the bytes it declares before
anything is built (``planned_state``: every key, shape and dtype; ``planned_bytes``, the memory plan's figure,
summed from it) are the arrays its state holds after the whole pass (an upper bound where ``planned_exact`` is
False)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch
from every_measure import every_measure_on
from example_measures import EXAMPLE_MEASURES  # the manual's walk-through measures, under the same contract

from examples.norm_measure import NormMeasure
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.measures import MEASURES, Measure, prime
from normvar_core.pipeline.measures.state import DictReader
from normvar_core.pipeline.run_plan import synthetic_plan
from normvar_core.pipeline.sources import GaussianSource

LAYERS = [0, 2]
DIM = 10


@pytest.fixture(scope="module")
def setup():
    cfg = every_measure_on(model="gaussian", samples_per_token=4)  # the opt-in measures too
    plan = synthetic_plan(cfg, n_sentences=70, vocab_size=30, layers=LAYERS, batch_size=9)
    source = GaussianSource(dim=DIM, layers=LAYERS, seed=3, offset=50.0, scales=[1.0, 3.0], dtype=torch.float64)
    ctx = RunContext(cfg=cfg, layers=LAYERS, dim=DIM, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    prime(ctx, source)  # the measures' early passes (the occurrences' axes), as every process of a run runs them
    return plan, source, ctx


def _fed(cls, ctx, source, plan, a, b):
    measure = cls.for_run(ctx)
    for sb in source.batches(plan, a, b):
        measure.update(sb)
    return measure


class LayerBlockReader(DictReader):
    """A reader that refuses to hand out an array of 3+ dimensions whole (the Ray driver's pieces)."""

    def get(self, key):
        a = super().get(key)
        assert a.ndim < 3, f"the merge read {self.prefix + key} {a.shape} whole instead of layer by layer"
        return a

    def blocks(self, key):
        yield from DictReader.get(self, key)

    def sub(self, prefix):
        return LayerBlockReader(self.arrays, self.prefix + prefix)


def _assert_same_result(x_res, y_res):
    for x, y in zip(_flat(x_res), _flat(y_res)):
        if np.issubdtype(np.asarray(x).dtype, np.floating):
            np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12)
        else:
            np.testing.assert_array_equal(x, y)


def _flat(x):
    """Any result -> a list of numpy arrays, for exact comparison."""
    if isinstance(x, dict):
        return [a for k in sorted(x) for a in _flat(x[k])]
    if hasattr(x, "__dataclass_fields__"):
        return [a for k in sorted(x.__dataclass_fields__) if not k.startswith("_") for a in _flat(getattr(x, k))]
    if hasattr(x, "to_numpy"):
        return [x.to_numpy()]
    if isinstance(x, (list, tuple)):
        return [a for v in x for a in _flat(v)]
    return [np.asarray(x)]


@pytest.mark.parametrize("cls", (*MEASURES, *EXAMPLE_MEASURES), ids=lambda c: c.name)
def test_contract(cls, setup, tmp_path):
    plan, source, ctx = setup
    assert issubclass(cls, Measure) and cls.name and cls.table_names
    measure = cls.for_run(ctx)
    if measure is None:
        pytest.fail(f"{cls.name} is not enabled for the contract run: widen the fixture")
    one = _fed(cls, ctx, source, plan, 0, plan.n_batches)
    h = plan.n_batches // 2
    a = _fed(cls, ctx, source, plan, 0, h)
    b = _fed(cls, ctx, source, plan, h, plan.n_batches)

    # state_dict: arrays only, saved and loaded without pickle
    state = a.state_dict()
    assert state and all(isinstance(v, np.ndarray) and v.dtype != object for v in state.values())
    np.savez(tmp_path / "s.npz", **state)
    with np.load(tmp_path / "s.npz", allow_pickle=False) as z:
        a2 = cls.from_state_dict({k: z[k] for k in z.files}, ctx)

    # the registered state is what state_dict holds: the same keys, shapes and dtypes
    for measure in (a, one):
        spec, held = measure.state_spec(), measure.state_dict()
        assert set(spec) == set(held)
        assert all(spec[k] == (held[k].shape, held[k].dtype) for k in held), {
            k: (spec[k], (held[k].shape, held[k].dtype)) for k in held
        }

    # two halves merged (through a saved state) = one stream
    merged = a2.merge(b)
    _assert_same_result(one.result(), merged.result())
    # ... and merged into a fresh state one layer block at a time (the Ray driver's way)
    pieced = cls.for_run(ctx)
    for part in (a, b):
        pieced.merge_from(LayerBlockReader(part.state_dict()))
    _assert_same_result(one.result(), pieced.result())
    # device moves come with the registration (here CPU to CPU: the state and its result unchanged)
    assert pieced.to(torch.device("cpu")) is pieced
    _assert_same_result(one.result(), pieced.result())

    # planned before anything exists = what the state holds after the whole pass: the same keys and dtypes,
    # the same shapes (exact), or shapes no smaller in any axis (an upper bound: split halves, where a type
    # missing from one half has no row there); the bytes summed from the plan
    held, planned = one.state_dict(), cls.planned_state(ctx)
    assert set(planned) == set(held), (sorted(planned), sorted(held))
    for k, v in held.items():
        shape, dtype = planned[k]
        assert np.dtype(dtype) == v.dtype, (k, dtype, v.dtype)
        assert len(shape) == v.ndim and (
            tuple(shape) == v.shape if cls.planned_exact else all(p >= h for p, h in zip(shape, v.shape))
        ), (k, shape, v.shape)
    nbytes = sum(v.nbytes for v in held.values())
    if cls.planned_exact:
        assert cls.planned_bytes(ctx) == nbytes > 0
    else:
        assert 0 < nbytes <= cls.planned_bytes(ctx)
    terms = cls.planned_terms(ctx)  # largest first, the smallest counted
    assert terms[0].split()[0] in planned and (len(terms) == len(planned) or "smaller array" in terms[-1])

    # its tables are the declared ones, as Arrow
    tables = one.tables(one.result(), ctx)
    assert set(tables) <= set(cls.table_names) and tables
    for t in tables.values():
        parts = [t] if isinstance(t, pa.Table) else list(t)
        assert parts and all(isinstance(p, pa.Table) for p in parts)


@pytest.fixture(scope="module")
def published(setup, tmp_path_factory):
    """The contract run (every measure on) published by the real pipeline, opened: a run that holds every
    measure's tables."""
    from normvar_core.pipeline.execute.partials import build_measures, run_range
    from normvar_core.pipeline.execute.publish import publish_run
    from normvar_core.runs.reader import open_run

    plan, source, ctx = setup
    measures = build_measures(ctx)
    run_range(source, plan, measures, 0, plan.n_batches)
    return open_run(
        publish_run(
            tmp_path_factory.mktemp("contract") / "c.duckdb",
            plan=plan,
            source=source,
            ctx=ctx,
            measures=measures,
            seconds=0.0,
            notes={},
            source_kind="synthetic",
        )
    )


def _null_of(cls, run, kind="matched", seed=1) -> dict:
    from normvar_core.stats.null import null_stats

    stats = run.stats()
    return cls.null_tables(run, kind, stats, null_stats(kind, stats, run.layer_stats(), seed=seed), seed=seed)


@pytest.mark.parametrize("cls", MEASURES, ids=lambda c: c.name)
def test_a_measure_writes_only_its_own_tables_in_the_null(cls, published):
    """``null_tables`` on a run that holds the measure's tables gives a subset of its ``table_names``, as Arrow
    with rows (a measure without a null gives none)."""
    assert cls.name in published.measures and set(cls.table_names) & set(published.table_names)
    got = _null_of(cls, published)
    assert set(got) <= set(cls.table_names), (cls.name, sorted(got))
    for t in got.values():
        parts = [t] if isinstance(t, pa.Table) else list(t)
        assert parts and all(isinstance(p, pa.Table) for p in parts) and sum(p.num_rows for p in parts) > 0


def test_the_null_run_holds_what_each_measure_gives(published, tmp_path):
    """``write_null_run`` publishes, in registry order, every measure's ``null_tables`` and names those measures
    in the run row's ``accumulators``; its row declares the tables it holds (``open_run``'s integrity check passes:
    every measure named holds the tables its declaration requires)."""
    from normvar_core.pipeline.execute.null_run import write_null_run
    from normvar_core.runs.reader import open_run

    given = {cls.name: _null_of(cls, published, "isotropic", 0) for cls in MEASURES}
    given = {name: tables for name, tables in given.items() if tables}
    assert len(given) >= 2  # the moments and at least one measure built on them
    null = open_run(write_null_run(published, "isotropic", tmp_path / "n.duckdb"))
    assert null.measures == list(given), sorted(given)
    assert set(null.table_names) == {"run", "sentence_lengths", *(t for tables in given.values() for t in tables)}


def test_the_walk_through_measure_equals_a_brute_force(setup):
    """The manual's example measure (examples/norm_measure.py) gives the mean and RMS norm of every layer's
    embeddings, as numpy computes them over the same states."""
    plan, source, ctx = setup
    measure = NormMeasure.for_run(ctx)
    states = []
    for sb in source.batches(plan, 0, plan.n_batches):
        measure.update(sb)
        states.append(sb.states.numpy())
    X = np.concatenate(states, axis=1)  # (L, N, d)
    norms = np.linalg.norm(X, axis=2)
    res = measure.result()
    np.testing.assert_allclose(res["mean_norm"], norms.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(res["rms_norm"], np.sqrt((norms**2).mean(axis=1)), rtol=1e-12)
    assert measure.n == X.shape[1] and list(res["layer"]) == LAYERS


def test_a_measure_without_planned_state_is_listed_not_counted():
    """A measure that does not declare its state (``planned_state`` -> None, the base class's default) is
    left out of the memory plan's total and named in its lines; the declared ones are counted as before."""
    import torch

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.measures import MomentsMeasure
    from normvar_core.pipeline.memory.plan import plan_memory
    from normvar_core.pipeline.model_shape import ModelShape
    from normvar_core.pipeline.run_plan import synthetic_plan

    class Undeclared(MomentsMeasure):
        name = "undeclared"
        planned_state = classmethod(lambda cls, ctx: None)

    cfg = RunConfig(model="gaussian", samples_per_token=0, id_sample=0)
    plan = synthetic_plan(cfg, n_sentences=50, vocab_size=20, layers=[0, 1], batch_size=8)
    ctx = RunContext(cfg=cfg, layers=[0, 1], dim=6, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    shape = ModelShape(
        name="toy",
        architecture="Toy",
        params=1000,
        lm_head_params=0,
        buffer_bytes=0,
        dim=6,
        num_hidden_states=2,
        heads=1,
        ffn=12,
        vocab=20,
        max_length=32,
    )
    kw = dict(shape=shape, memory_bytes=1 << 40, device="cpu", dtype="float32")
    both = plan_memory(ctx, registry=[MomentsMeasure, Undeclared], **kw)
    alone = plan_memory(ctx, registry=[MomentsMeasure], **kw)
    assert both.unknown == ["undeclared"] and "undeclared" not in both.measures
    assert both.measures == alone.measures and both.total_bytes == alone.total_bytes
    assert both.measures["moments"] == MomentsMeasure.planned_bytes(ctx) > 0
    assert any("measure undeclared does not declare planned_state" in line for line in both.lines())


def test_a_merge_rule_is_an_object_never_a_name():
    """A state's own merge is a rule object passed by reference (``Custom(fn)``, as torchmetrics' ``dist_reduce_fx``
    takes a function): it merges two partial states as written; the old name-looked-up ``"custom"`` and an object
    with no ``merge`` are refused when the state is registered."""
    from normvar_core.pipeline.measures.state import Custom, Stateful

    def keep_larger_first(holder, reader) -> None:  # not a sum: the rule is really the function's
        other = reader.get("first")
        if other[0] > holder.first[0]:
            holder.first = other.copy()

    class Holder(Stateful):
        def __init__(self, v):
            self._add_state("first", np.array([v, -v], np.float64), merge=Custom(keep_larger_first))
            self._add_state("n", 1)

    a, b = Holder(2.0), Holder(5.0)
    a.merge(b)
    assert a.first.tolist() == [5.0, -5.0] and a.n == 2
    assert Holder(7.0).merge(Holder(3.0)).first.tolist() == [7.0, -7.0]
    with pytest.raises(ValueError, match="Custom"):
        Stateful()._add_state("x", np.zeros(2), merge="custom")
    with pytest.raises(ValueError, match="has no merge"):
        Stateful()._add_state("x", np.zeros(2), merge=object())
