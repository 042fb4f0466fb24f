"""The three "Layer by Layer" measures (Skean et al. 2025), each one file on the contract
(``pipeline/measures/prompt_entropy.py``, ``dataset_entropy.py``, ``curvature.py``): in a real run of the tiny BERT
over the shipped novels their tables equal a float64 brute force over every counted embedding, sentence by sentence
(numpy's eigenvalues of each sentence's token Gram matrix, of the sentence means' S × S Gram matrix, and the angles
between successive token differences, one sentence at a time); on i.i.d. Gaussian tokens (``GaussianSource``, no
type means) each equals its Gaussian null: log T_s for a sentence's entropy, the entropy of p_s ∝ 1 / T_s for the
dataset's, 2π/3 for the curvature. The contract (state round trip, merges, planned state, tables) is checked with
every measure by the contract test."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from recording import recorded_run

from normvar_core.config import RunConfig
from normvar_core.pipeline.measures import MEASURES

NAMES = ("prompt_entropy", "dataset_entropy", "curvature")


def entropy(lam: np.ndarray) -> float:
    """−Σ p log p, p = λ / Σλ (rounding's negative λ read as 0)."""
    lam = np.clip(lam, 0.0, None)
    p = lam[lam > 0] / lam.sum()
    return float(-(p * np.log(p)).sum())


def brute(X: np.ndarray, sentences: np.ndarray) -> dict[str, np.ndarray]:
    """Per layer of X (L, N, d) float64, the three measures by their definitions, one sentence at a time."""
    ids = list(dict.fromkeys(sentences.tolist()))
    rows = {s: np.flatnonzero(sentences == s) for s in ids}
    out = {name: [] for name in NAMES}
    for Xl in X:
        out["prompt_entropy"].append(np.mean([entropy(np.linalg.eigvalsh(Xl[r] @ Xl[r].T)) for r in rows.values()]))
        M = np.stack([Xl[r].mean(0) for r in rows.values()])  # S × d: the S × S Gram matrix, not the d × d sum
        out["dataset_entropy"].append(entropy(np.linalg.eigvalsh(M @ M.T)))
        curv = []
        for r in rows.values():
            V = np.diff(Xl[r], axis=0)
            angles = [
                np.arccos(np.clip(V[k] @ V[k + 1] / (np.linalg.norm(V[k]) * np.linalg.norm(V[k + 1])), -1, 1))
                for k in range(len(V) - 1)
                if np.linalg.norm(V[k]) > 0 and np.linalg.norm(V[k + 1]) > 0
            ]
            if angles:
                curv.append(np.mean(angles))
        out["curvature"].append(np.mean(curv))
    return {k: np.array(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, tiny_models):
    from normvar_core.runs.reader import open_run

    cfg = RunConfig(
        model=str(tiny_models["bert"]),
        max_sentences=120,
        batch_size=16,
        name="lbl",
        prompt_entropy=True,
        geometry=False,
        halves=False,
        occurrences=0,
    )  # the three measures, and the moments and samples every run holds
    path, source, measures = recorded_run(cfg, tmp_path_factory.mktemp("lbl"))
    assert set(NAMES) <= set(measures)
    return open_run(path), source.all_states(), source.all_sentences()


def test_the_three_measures_equal_a_float64_brute_force(recorded):
    run, X, sentences = recorded
    want = brute(X, sentences)
    S = len(set(sentences.tolist()))
    for name in NAMES:
        got = run.table(f"layer_{name}").sort_values("layer")
        assert list(got["layer"]) == list(run.layers), name
        # the same numbers by two float64 routes (batched and padded, or summed d × d, vs one sentence at a time):
        # 1e-9 relative
        np.testing.assert_allclose(got[name].to_numpy(), want[name], rtol=1e-9, err_msg=name)
        assert (got["sentences"] <= S).all() and (got["sentences"] > S // 2).all(), name
    # not a degenerate case: entropies strictly between 0 and their bound, angles well inside (0, π), and layers
    # differing
    lengths = np.bincount(np.unique(sentences, return_inverse=True)[1])
    assert (want["prompt_entropy"] > 0.1).all() and (want["prompt_entropy"] < np.log(lengths).mean()).all()
    assert (want["dataset_entropy"] > 0.1).all() and (want["dataset_entropy"] < np.log(S)).all()
    assert ((want["curvature"] > 0.3) & (want["curvature"] < np.pi - 0.3)).all()
    assert all(np.ptp(want[name]) > 1e-3 for name in NAMES)
    assert run.curves and {c.table for c in run.curves} >= {f"layer_{n}" for n in NAMES}


def test_each_equals_its_gaussian_null_on_iid_gaussian_tokens():
    """Tokens i.i.d. N(0, σ² I_d), d = 512 ≫ T: a sentence's Gram matrix ≈ dσ² I (entropy → log T_s), the sentence
    means' ≈ diag(dσ² / T_s) (entropy → H(p), p_s ∝ 1 / T_s), and successive differences meet at cos → −1/2 (2π/3);
    every measure is scale-free, so the two layers (σ and 3σ) agree to rounding."""
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.execute.partials import build_measures, run_range
    from normvar_core.pipeline.run_plan import synthetic_plan
    from normvar_core.pipeline.sources import GaussianSource

    cfg = RunConfig(model="gaussian", prompt_entropy=True, geometry=False, halves=False, occurrences=0)
    plan = synthetic_plan(cfg, n_sentences=40, vocab_size=40, layers=[0, 1], batch_size=8, min_len=4, max_len=30)
    source = GaussianSource(dim=512, layers=[0, 1], seed=5, offset=0.0, scales=[1.0, 3.0])
    ctx = RunContext(cfg=cfg, layers=[0, 1], dim=512, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    measures = build_measures(ctx, registry=[c for c in MEASURES if c.name in NAMES])
    lengths = []
    for b in source.batches(plan, 0, plan.n_batches):
        lengths += b.sentence_runs()[1].tolist()
    run_range(source, plan, measures, 0, plan.n_batches)
    T = np.array(lengths, np.float64)
    got = {name: measures[name].result()[name] for name in NAMES}
    p = (1 / T) / (1 / T).sum()
    nulls = {
        "prompt_entropy": np.log(T).mean(),
        "dataset_entropy": float(-(p * np.log(p)).sum()),
        "curvature": 2 * np.pi / 3,
    }
    # the finite-d deficit: about T / (2d) nats for an entropy (T ≤ 30, d = 512: ≤ 0.03), O(1/d) for the angle
    for name, tol in (("prompt_entropy", 0.05), ("dataset_entropy", 0.05), ("curvature", 0.01)):
        assert got[name][0] == pytest.approx(got[name][1], rel=1e-9), name
        assert abs(got[name][0] - nulls[name]) < tol, (name, got[name][0], nulls[name])
    assert got["prompt_entropy"][0] < nulls["prompt_entropy"]  # the Gram's spread can only lower the entropy
