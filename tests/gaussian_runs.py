"""Small runs written by the real pipeline from a seeded Gaussian source (no model): the suite's fixture run and
the degenerate runs of the deck tests."""

from __future__ import annotations

from pathlib import Path


def gaussian_pass(n_sentences: int):
    """One pass of ``n_sentences`` synthetic sentences (vocabulary 60, layers 0 and 1, d = 8) kept in memory:
    (plan, source, ctx, measures) — the same seeded states every time."""
    import torch

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.execute.partials import build_measures, run_range
    from normvar_core.pipeline.run_plan import synthetic_plan
    from normvar_core.pipeline.sources import GaussianSource

    cfg = RunConfig(model="gaussian", samples_per_token=3)
    plan = synthetic_plan(cfg, n_sentences=n_sentences, vocab_size=60, layers=[0, 1], batch_size=16)
    source = GaussianSource(dim=8, layers=[0, 1])
    ctx = RunContext(cfg=cfg, layers=[0, 1], dim=8, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    measures = build_measures(ctx)
    run_range(source, plan, measures, 0, plan.n_batches)
    return plan, source, ctx, measures


def gaussian_run(path: Path, n_sentences: int) -> Path:
    """``gaussian_pass``'s run published at ``path``."""
    from normvar_core.pipeline.execute.publish import publish_run

    plan, source, ctx, measures = gaussian_pass(n_sentences)
    return publish_run(
        path, plan=plan, source=source, ctx=ctx, measures=measures, seconds=0.0, notes={}, source_kind="synthetic"
    )
