"""Independent float64 two-pass ground truth, written from the study's definitions (eqs. 3–15)."""
from __future__ import annotations

import numpy as np


def per_type(X: np.ndarray, ids: np.ndarray):
    """X (L, N, d), ids (N,) -> dict token -> (n, mu (L,d), Q (L,), M (L,), V (L,)) by two passes."""
    X = np.asarray(X, dtype=np.float64)
    out = {}
    for t in np.unique(ids):
        x = X[:, ids == t]                                   # (L, n_t, d)
        mu = x.mean(1)                                       # eq. 3
        q = (x * x).sum(-1).mean(1)                          # eq. 4
        m = (mu * mu).sum(-1)                                # eq. 5
        v = ((x - mu[:, None]) ** 2).sum(-1).mean(1)         # eq. 6 (second pass)
        out[int(t)] = (x.shape[1], mu, q, m, v)
    return out


def corpus(X: np.ndarray, ids: np.ndarray):
    """Corpus-level Q, M, V, V_W, V_B (eqs. 8–11) straight from the embeddings."""
    X = np.asarray(X, dtype=np.float64)
    mu = X.mean(1)
    q = (X * X).sum(-1).mean(1)
    m = (mu * mu).sum(-1)
    v = ((X - mu[:, None]) ** 2).sum(-1).mean(1)
    n = X.shape[1]
    v_w = np.zeros(X.shape[0])
    v_b = np.zeros(X.shape[0])
    for t in np.unique(ids):
        x = X[:, ids == t]
        mt = x.mean(1)
        v_w += ((x - mt[:, None]) ** 2).sum(-1).sum(1) / n
        v_b += x.shape[1] * ((mt - mu) ** 2).sum(-1) / n
    return dict(q=q, m=m, v=v, v_w=v_w, v_b=v_b)


def pass_in_memory(cfg):
    """One pass of a real model kept in memory: (plan, source, ctx, parts, accs) — every StateBatch
    of the run (``parts``) fed to every accumulator the run wants (``accs``), for brute-force checks."""
    from normvar_core.pipeline.execute.partials import build_accumulators
    from normvar_core.pipeline.execute.prepare import prepare

    setup = prepare(cfg)
    plan, source, ctx = setup.plan, setup.source, setup.ctx
    parts = list(source.batches(plan, 0, plan.n_batches))
    accs = build_accumulators(ctx)
    for sb in parts:
        for acc in accs.values():
            acc.update(sb)
    return plan, source, ctx, parts, accs
