"""Independent float64 ground truth for the tests, written from the definitions and nothing of the library's:
per-type and corpus moments by two passes (eqs. 3–11), the band decomposition from stored per-type moments
(eqs. 8–15), nearest types by cosine, the TwoNN neighbour distances over all pairs, and one in-memory pass of a
real model."""

from __future__ import annotations

import numpy as np


def per_type(X: np.ndarray, ids: np.ndarray):
    """X (L, N, d), ids (N,) -> dict token -> (n, mu (L,d), Q (L,), M (L,), V (L,)) by two passes."""
    X = np.asarray(X, dtype=np.float64)
    out = {}
    for t in np.unique(ids):
        x = X[:, ids == t]  # (L, n_t, d)
        mu = x.mean(1)  # eq. 3
        q = (x * x).sum(-1).mean(1)  # eq. 4
        m = (mu * mu).sum(-1)  # eq. 5
        v = ((x - mu[:, None]) ** 2).sum(-1).mean(1)  # eq. 6 (second pass)
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


def band(n: np.ndarray, q: np.ndarray, v: np.ndarray, means: np.ndarray) -> dict[str, float]:
    """Q, M, V_W, V_B of one layer over a set of types from their stored moments, weighted p_t = n_t / Σ n:
    Q = Σ p_t Q_t, M = ‖Σ p_t μ_t‖², V_W = Σ p_t V_t, V_B = Σ p_t ‖μ_t − Σ p_s μ_s‖² (eqs. 8–11)."""
    p = np.asarray(n, np.float64) / np.sum(n)
    mu_t = np.asarray(means, np.float64)
    mu = p @ mu_t
    return {
        "q": float(p @ np.asarray(q, np.float64)),
        "m": float(mu @ mu),
        "v_w": float(p @ np.asarray(v, np.float64)),
        "v_b": float(p @ np.sum((mu_t - mu) ** 2, axis=1)),
    }


def nearest(means: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int, exclude=None) -> tuple[list[int], list]:
    """The ``k`` types whose mean has the largest cosine cos(μ_t, q) = μ_t·q / (‖μ_t‖‖q‖), by a Python loop in
    float64 (zero means and ``exclude`` left out; ties by the smaller id): (ids, cosines)."""
    rows = []
    b = float(np.sqrt(sum(float(x) ** 2 for x in q)))
    for s in range(means.shape[0]):
        a = float(np.sqrt(sum(float(x) ** 2 for x in means[s])))
        if a == 0 or b == 0 or ids[s] == exclude:
            continue
        rows.append((-sum(float(x) * float(y) for x, y in zip(means[s], q)) / (a * b), int(ids[s])))
    rows.sort()
    return [i for _, i in rows[:k]], [-c for c, _ in rows[:k]]


def twonn_radii(X: np.ndarray, tb: np.ndarray):
    """Per layer and row: (r₁, r₂) to the distinct other rows of its batch by float64 distance over all
    pairs, and per layer the number of identical copies (all but one of each group of identical rows)."""
    import torch

    L, K, _ = X.shape
    r = np.full((L, K, 2), np.inf)
    copies = np.zeros(L, np.int64)
    for l in range(L):
        for t in np.unique(tb):
            rows = np.flatnonzero(tb == t)
            Y = torch.from_numpy(X[l, rows]).double()
            D = (Y[:, None] - Y[None]).square().sum(-1).sqrt().numpy()
            kept = np.array([not (D[a, :a] == 0).any() for a in range(rows.size)])
            copies[l] += int((~kept).sum())
            Dk = np.where(D[:, kept] == 0, np.inf, D[:, kept])  # itself and its copies are no neighbours
            r[l, rows] = np.sort(Dk, 1)[:, :2]
    return r, copies


def pass_in_memory(cfg):
    """One pass of a real model kept in memory: (plan, source, ctx, parts, measures) — every StateBatch
    of the run (``parts``) fed to every measure the run wants (``accs``), for brute-force checks."""
    from normvar_core.pipeline.execute.partials import build_measures
    from normvar_core.pipeline.execute.prepare import prepare

    setup = prepare(cfg)
    plan, source, ctx = setup.plan, setup.source, setup.ctx
    parts = list(source.batches(plan, 0, plan.n_batches))
    measures = build_measures(ctx)
    for sb in parts:
        for measure in measures.values():
            measure.update(sb)
    return plan, source, ctx, parts, measures


def context_radii(X: np.ndarray, groups: np.ndarray):
    """Per row of X (float32 values, distinct rows): (r₁, r₂) over every other row, (r₁, r₂) over the rows of
    other groups, and the nearest row of its own group — float64 distances of all pairs, sorted (inf where
    there is none)."""
    Y = np.asarray(X, np.float64)
    D = np.sqrt(np.square(Y[:, None] - Y[None]).sum(-1))
    np.fill_diagonal(D, np.inf)
    same = np.asarray(groups)[:, None] == np.asarray(groups)[None, :]
    every = np.sort(D, 1)[:, :2]
    cross = np.sort(np.where(same, np.inf, D), 1)[:, :2]
    own = np.where(same, D, np.inf).min(1)
    return every, cross, own


def knn_lists(X: np.ndarray, k: int, groups=None):
    """Per row of X (float32 values): its k nearest other rows by float64 distance over all pairs (or over the
    rows of other groups), ties by the smaller index: (distances, indices), inf / -1 past the rows there are."""
    Y = np.asarray(X, np.float64)
    D = np.stack([np.sqrt(np.square(Y - y).sum(-1)) for y in Y])  # row by row: (m, d) at a time
    np.fill_diagonal(D, np.inf)
    if groups is not None:
        D[np.asarray(groups)[:, None] == np.asarray(groups)[None, :]] = np.inf
    m = len(Y)
    idx = np.full((m, k), -1, np.int64)
    dist = np.full((m, k), np.inf)
    for i in range(m):
        order = np.lexsort((np.arange(m), D[i]))
        order = order[np.isfinite(D[i, order])][:k]
        idx[i, : order.size], dist[i, : order.size] = order, D[i, order]
    return dist, idx


def gride_by_scipy(r: np.ndarray, n1: int, n2: int) -> float:
    """GRIDE's estimate: the maximum over d of Denti et al.'s log-likelihood of μ = r_{n2} / r_{n1}, summed
    term by term and maximised by scipy's bounded scalar minimiser (its own tolerance pushed to 1e-12)."""
    from scipy.optimize import minimize_scalar
    from scipy.special import betaln

    mu = r[:, n2 - 1] / r[:, n1 - 1]
    mu = mu[np.isfinite(mu) & (mu > 1)]

    lm = np.log(mu)

    def nll(d):  # log(μ^d − 1) = d log μ + log(1 − μ^(−d)), which does not overflow at large μ^d
        return -(
            mu.size * np.log(d)
            + (n2 - n1 - 1) * np.sum(d * lm + np.log1p(-np.exp(-d * lm)))
            - ((n2 - 1) * d + 1) * np.sum(np.log(mu))
            - mu.size * betaln(n2 - n1, n1)
        )

    return float(
        minimize_scalar(nll, bounds=(1e-3, 500.0), method="bounded", options={"xatol": 1e-12, "maxiter": 2000}).x
    )


def overlap_by_sets(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """Mean over rows of |first k of a ∩ first k of b| / k, by Python sets."""
    return float(np.mean([len(set(x[:k]) & set(y[:k]) - {-1}) / k for x, y in zip(a, b)]))
