"""The run counts its embeddings itself, not through a measure: ``run_range`` adds every StateBatch's rows to
``partials.Counted``, and a run resumed at batch k starts from ``RunPlan.counted_before(k)``. Ground truth:
the positions the seeded Gaussian source actually yielded, counted here, and the plan's per-type counts."""

from __future__ import annotations

import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.execute.partials import Counted, build_measures, run_range
from normvar_core.pipeline.run_plan import synthetic_plan
from normvar_core.pipeline.sources import GaussianSource

LAYERS = [0, 2]


@pytest.mark.parametrize("position0", [False, True])
def test_the_run_counts_what_the_source_yields_and_a_resumed_run_starts_from_the_plans_count(position0):
    cfg = RunConfig(model="gaussian", samples_per_token=0, exclude_position0=position0)
    plan = synthetic_plan(cfg, n_sentences=50, vocab_size=20, layers=LAYERS, batch_size=6)
    source = GaussianSource(dim=6, layers=LAYERS, seed=2, dtype=torch.float64)
    ctx = RunContext(cfg=cfg, layers=LAYERS, dim=6, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    yielded = [int(sb.token_ids.shape[0]) for sb in source.batches(plan, 0, plan.n_batches)]
    assert sum(yielded) == plan.total_embeddings  # the source yields the plan's counted positions

    k = plan.n_batches // 2
    assert plan.counted_before(0) == 0 and plan.counted_before(plan.n_batches) == plan.total_embeddings
    assert plan.counted_before(k) == sum(yielded[:k])

    seen = []
    count = Counted(plan.counted_before(k))  # resumed at batch k: the batches before it already counted
    run_range(
        source, plan, build_measures(ctx), k, plan.n_batches, count=count, on_batch=lambda i: seen.append((i, count.n))
    )
    assert seen == [(i, sum(yielded[: i + 1])) for i in range(k, plan.n_batches)]
    assert count.n == plan.total_embeddings
