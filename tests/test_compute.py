"""compute_run end to end: exactness against a brute force on the real MiniLM, checkpoint/resume,
cancellation, OOM splitting, special tokens / position 0 on tiny random-init models, samples."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import time

import brute
import numpy as np
import pytest
import torch

from normvar_core.config import RunConfig, default_run_name
from normvar_core.datadir import DEFAULT_CORPUS
from normvar_core.errors import CancelledError, NormvarError
from normvar_core.pipeline import batches as B
from normvar_core.pipeline import models as M
from normvar_core.pipeline.execute import local as compute_mod
from normvar_core.pipeline.execute.local import compute_run
from normvar_core.pipeline.execute.progress import Progress
from normvar_core.runs.reader import open_run
from normvar_core.service import jobs


def _novel_lines(start: int, n: int) -> list[str]:
    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        return [s.strip() for s in itertools.islice(fh, start, start + n)]


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "novels200.txt"
    p.write_text("\n".join(_novel_lines(2000, 200)) + "\n", encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "novels60.txt"
    p.write_text("\n".join(_novel_lines(5000, 60)) + "\n", encoding="utf-8")
    return p


def _table(run, what="q"):
    return np.stack([run.token_table(l)[what].to_numpy() for l in run.layers])


def _runs_dir_files(data):
    d = data / "runs"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


# ----------------------------------------------------------------------------- exactness
def test_token_and_layer_stats_equal_brute_force(minilm_path, small_corpus, tmp_path, monkeypatch):
    """token_stats and layer_stats of the run file equal a float64 two-pass brute force over
    every hidden state of the real MiniLM (eqs. 3–6 and 8–11)."""
    cfg = RunConfig(model=str(minilm_path), corpus=str(small_corpus), samples_per_token=20, name="exact", batch_size=25)
    real_load, cache = M.load_model, {}
    monkeypatch.setattr(M, "load_model", lambda c, d=None: cache.setdefault("m", real_load(c, d)))  # load once
    kept = []  # keep every hidden state the run sees
    real_extract = B.extract

    def keep_all(loaded, batch, **kw):
        states, ids = real_extract(loaded, batch, **kw)
        kept.append((batch, states.double().clone(), ids.clone()))
        return states, ids

    monkeypatch.setattr(B, "extract", keep_all)
    path = compute_run(cfg, tmp_path)
    run = open_run(path)
    assert run.meta["architecture"] == "BertModel" and run.meta["norm_placement"] == "post"
    assert run.layers == list(range(7)) and run.meta["n_sentences"] == 200
    # the occurrences' early axes ran some batches before the pass; the pass took those states again
    # instead of a second forward pass: every batch went through the model once
    keys = [tuple(np.asarray(batch.indices).tolist()) for batch, _, _ in kept]
    assert len(keys) == len(set(keys))

    # the kept states are the model's hidden states at every non-padding position (checked
    # independently of extract on two batches), and the batches cover every sentence once
    loaded = cache["m"]
    assert sorted(np.concatenate([b.indices for b, _, _ in kept]).tolist()) == list(range(200))
    for batch, states, ids in kept[:1] + kept[-1:]:
        with torch.inference_mode():
            hs = loaded.model(
                input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True
            ).hidden_states
        am = batch.attention_mask.bool()
        direct = torch.stack([h[am] for h in hs]).double()
        torch.testing.assert_close(states, direct, rtol=1e-5, atol=1e-5)
        assert torch.equal(ids, batch.input_ids[am])
    X = torch.cat([s for _, s, _ in kept], 1).numpy()  # (L, N, d) float64
    I = torch.cat([t for _, _, t in kept]).numpy()
    uniq, cnt = np.unique(I, return_counts=True)
    L, N, d = X.shape
    assert run.meta["n_embeddings"] == N and run.meta["n_types"] == uniq.size
    tokens = loaded.tokenizer.convert_ids_to_tokens(uniq.tolist())
    per_type = brute.per_type(X, I)  # eqs. 3–6, two passes per type
    mu, q, m, v = (np.stack([per_type[int(t)][k] for t in uniq], 1) for k in (1, 2, 3, 4))
    for li, layer in enumerate(run.layers):
        tt = run.token_table(layer)
        assert np.array_equal(tt["token_id"], uniq) and np.array_equal(tt["n"], cnt)
        assert tt["token"].tolist() == tokens
        for name, ref in (("q", q), ("m", m), ("v", v)):
            np.testing.assert_allclose(tt[name].to_numpy(), ref[li], rtol=1e-6, atol=1e-9 * ref[li].max())
    np.testing.assert_allclose(run.stats().mean, mu, rtol=1e-5, atol=1e-6)  # float32 storage

    # layer_stats by the direct definitions
    ls = run.layer_stats()
    ref = brute.corpus(X, I)  # eqs. 8–11
    for li in range(L):
        row = ls.iloc[li]
        assert row["n"] == N
        for k in ("q", "m", "v", "v_w", "v_b"):
            assert row[k] == pytest.approx(ref[k][li], rel=1e-6), (li, k)
        assert row["v_w"] + row["v_b"] == pytest.approx(row["v"], rel=1e-9)  # eq. 9

    # samples: raw embeddings of the right type, <= 20 per type, the 50 most frequent included
    st = run.sampled_tokens()
    top50 = uniq[np.argsort(-cnt, kind="stable")[:50]]
    assert set(top50) <= set(st["token_id"])
    assert (st["count"].to_numpy() == np.minimum(20, cnt[np.searchsorted(uniq, st["token_id"])])).all()
    smp = run.samples(3)
    for tid in st["token_id"][:10]:
        vecs = np.stack(smp[smp["token_id"] == tid]["vector"])
        pool = X[3][I == tid].astype(np.float32)
        dist = np.abs(vecs[:, None, :] - pool[None, :, :]).max(-1).min(1)
        assert dist.max() < 1e-5


# ----------------------------------------------------------------------------- tiny models
@pytest.mark.slow
def test_gpt2_position0_exclusion(tiny_models, tiny_corpus, tmp_path):
    base = dict(model=str(tiny_models["gpt2"]), corpus=str(tiny_corpus), samples_per_token=5)
    full = open_run(compute_run(RunConfig(**base, name="g-all"), tmp_path))
    excl = open_run(compute_run(RunConfig(**base, name="g-p0", exclude_position0=True), tmp_path))
    n_sent = full.meta["n_sentences"]
    assert full.meta["norm_placement"] == "pre" and full.meta["final_norm"] is True
    assert full.meta["notes"]["is_decoder"] is True
    assert excl.meta["options"]["exclude_position0"] is True
    assert full.meta["n_embeddings"] - excl.meta["n_embeddings"] == n_sent
    eot = int(M.load_model(RunConfig(**base)).tokenizer.eos_token_id)

    def n_of(run):
        return dict(zip(run.token_table(0)["token_id"], run.token_table(0)["n"]))

    assert n_of(full)[eot] == 2 * n_sent  # <|endoftext|> on both ends (App. B)
    assert n_of(excl)[eot] == n_sent  # the leading one (position 0) dropped


@pytest.mark.slow
def test_roberta_special_tokens(tiny_models, tiny_corpus, tmp_path):
    base = dict(model=str(tiny_models["roberta"]), corpus=str(tiny_corpus), samples_per_token=0)
    full = open_run(compute_run(RunConfig(**base, name="r-all"), tmp_path))
    excl = open_run(compute_run(RunConfig(**base, name="r-sp", exclude_special=True), tmp_path))
    tok = M.load_model(RunConfig(**base)).tokenizer
    n_sent = full.meta["n_sentences"]
    t0 = full.token_table(0)
    n = dict(zip(t0["token_id"], t0["n"]))
    assert n[tok.bos_token_id] == n_sent and n[tok.eos_token_id] == n_sent
    assert set(t0.loc[t0["token_id"] == tok.bos_token_id, "token"]) == {"<s>"}
    ids_ex = set(excl.token_table(0)["token_id"])
    assert tok.bos_token_id not in ids_ex and tok.eos_token_id not in ids_ex
    assert full.meta["n_embeddings"] - excl.meta["n_embeddings"] == 2 * n_sent
    assert excl.samples(0).empty and full.meta["norm_placement"] == "post"


@pytest.mark.slow
@pytest.mark.filterwarnings("error::RuntimeWarning")  # numpy's "All-NaN slice" of layer 0's R² interval was one
def test_llama_left_padding_samples_and_layers(tiny_models, tiny_corpus, tmp_path, monkeypatch):
    """A layer subset, left padding forced on the tokenizer (as Gemma's): samples still hit their own type; no
    RuntimeWarning (layer 0, the input embeddings, has V(X_t) = 0 for every type: its R² has no interval)."""
    cfg = RunConfig(
        model=str(tiny_models["llama"]),
        corpus=str(tiny_corpus),
        layers=(0, 2),
        samples_per_token=3,
        exclude_position0=True,
        batch_size=7,
    )
    real_load = M.load_model

    def left_padded(c, d=None):
        loaded = real_load(c, d)
        loaded.tokenizer.padding_side = "left"
        return loaded

    monkeypatch.setattr(M, "load_model", left_padded)
    run = open_run(compute_run(cfg, tmp_path))
    assert run.layers == [0, 2] and run.meta["norm_type"] == "RMSNorm"
    bos = real_load(cfg).tokenizer.bos_token_id
    assert bos not in set(run.token_table(0)["token_id"])  # BOS sits at position 0 of every sentence
    assert run.meta["notes"]["is_decoder"] is True
    st = run.stats()
    smp = run.samples(0)
    # layer 0 = input embeddings: every sample equals its token's (constant) embedding = the mean
    for tid, grp in smp.groupby("token_id"):
        mean0 = st.mean[0, np.searchsorted(st.token_ids, tid)]
        np.testing.assert_allclose(np.stack(grp["vector"]), np.broadcast_to(mean0, (len(grp), st.dim)), atol=1e-5)
    with pytest.raises(NormvarError, match="do not exist"):
        compute_run(cfg.replace(layers=(0, 9), name="bad-layers"), tmp_path)


# ----------------------------------------------------------------------------- resume
def _count_batches(stop_after):
    state = {"done": 0}

    def progress(p: Progress):
        if p.stage == "compute" and p.sentences_done:
            state["done"] += 1

    def should_cancel():
        return state["done"] >= stop_after

    return progress, should_cancel


@pytest.mark.slow
def test_checkpoint_resume_equals_uninterrupted(tiny_models, tiny_corpus, tmp_path):
    cfg = RunConfig(
        model=str(tiny_models["bert"]), corpus=str(tiny_corpus), batch_size=8, samples_per_token=4, name="resume"
    )
    ref = open_run(compute_run(cfg, tmp_path / "a"))
    ckpt = tmp_path / "ck" / "job1.ckpt"

    # 1) cancelled after 3 batches (checkpoint written at the cancel), nothing published
    progress, should_cancel = _count_batches(3)
    with pytest.raises(CancelledError):
        compute_run(
            cfg, tmp_path / "b", progress=progress, should_cancel=should_cancel, checkpoint=ckpt, checkpoint_every_s=1e9
        )
    assert _runs_dir_files(tmp_path / "b") == [] and ckpt.exists()
    with np.load(ckpt, allow_pickle=False) as z:  # never pickled
        assert "meta_json" in z.files and any(k.startswith("moments__") for k in z.files)

    # 2) crash (exception) 2 batches later, periodic checkpoints after every batch
    seen = []

    def crash(p: Progress):
        if p.stage == "compute" and p.sentences_done:
            seen.append(p.sentences_done)
            if len(seen) == 3:
                raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        compute_run(cfg, tmp_path / "b", progress=crash, checkpoint=ckpt, checkpoint_every_s=0.0)
    assert _runs_dir_files(tmp_path / "b") == []
    assert ckpt.exists()

    # 3) resume to the end: identical to the uninterrupted run; checkpoint removed
    path = compute_run(cfg, tmp_path / "b", checkpoint=ckpt)
    assert not ckpt.exists() and not list(ckpt.parent.glob(".*"))
    got = open_run(path)
    assert got.meta["notes"]["resumed_from_batch"] > 3
    for col in ("n", "q", "m", "v"):
        assert np.array_equal(_table(got, col), _table(ref, col))
    assert np.array_equal(got.stats().mean, ref.stats().mean)
    a, b = ref.samples(1), got.samples(1)
    assert a["token_id"].tolist() == b["token_id"].tolist()
    assert np.array_equal(np.stack(a["vector"]), np.stack(b["vector"]))

    # a checkpoint of another configuration is refused in one line and kept as it was; fresh=True starts over
    progress, should_cancel = _count_batches(2)
    with pytest.raises(CancelledError):
        compute_run(
            cfg.replace(seed=1), tmp_path / "c", progress=progress, should_cancel=should_cancel, checkpoint=ckpt
        )
    kept = ckpt.read_bytes()
    with pytest.raises(NormvarError, match="another configuration") as err:
        compute_run(cfg, tmp_path / "c", checkpoint=ckpt)
    assert "\n" not in str(err.value) and "--fresh" in str(err.value) and ckpt.read_bytes() == kept
    path = compute_run(cfg, tmp_path / "c", checkpoint=ckpt, fresh=True)
    assert np.array_equal(_table(open_run(path), "v"), _table(ref, "v")) and not ckpt.exists()


@pytest.mark.slow
def test_oom_halves_the_batch(tiny_models, tiny_corpus, tmp_path, monkeypatch):
    cfg = RunConfig(
        model=str(tiny_models["bert"]), corpus=str(tiny_corpus), batch_size=16, samples_per_token=3, name="oom"
    )
    ref = open_run(compute_run(cfg, tmp_path / "a"))
    real = B.extract

    def small_only(loaded, batch, **kw):
        if len(batch) > 5:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(loaded, batch, **kw)

    monkeypatch.setattr(B, "extract", small_only)
    got = open_run(compute_run(cfg, tmp_path / "b"))
    notes = got.meta["notes"]
    assert notes["oom_splits"] >= 1 and notes["max_rows_after_oom"] <= 5
    for col in ("q", "m", "v"):
        # other batch compositions change the forward pass in the last float32 bits only
        np.testing.assert_allclose(_table(got, col), _table(ref, col), rtol=1e-5)
    assert np.array_equal(_table(got, "n"), _table(ref, "n"))

    def never(loaded, batch, **kw):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(B, "extract", never)
    with pytest.raises(NormvarError, match="single sentence"):
        compute_run(cfg.replace(name="oom2"), tmp_path / "c")
    assert _runs_dir_files(tmp_path / "c") == []


# ----------------------------------------------------------------------------- naming / refusal
def test_existing_name_refused_before_loading(tiny_models, tiny_corpus, tmp_path, monkeypatch):
    cfg = RunConfig(model=str(tiny_models["bert"]), corpus=str(tiny_corpus), samples_per_token=0)
    path = compute_run(cfg, tmp_path)
    assert path.name == "tiny-bert__novels60.duckdb"
    before = path.stat().st_mtime_ns
    monkeypatch.setattr(M, "load_model", lambda *a, **k: pytest.fail("model loaded before the name check"))
    t0 = time.monotonic()
    with pytest.raises(NormvarError, match="already exists"):
        compute_run(cfg, tmp_path)
    assert time.monotonic() - t0 < 1.0 and path.stat().st_mtime_ns == before
    monkeypatch.undo()
    path2 = compute_run(cfg.replace(seed=3), tmp_path, overwrite=True)
    assert path2 == path and open_run(path).meta["options"]["seed"] == 3
    assert _runs_dir_files(tmp_path) == [path.name]


def test_default_names():
    assert default_run_name(RunConfig(model="minilm")) == "minilm__novels_en"
    assert default_run_name(RunConfig(model="org/My Model", corpus="/x/y/sotu.jsonl")) == "My-Model__sotu"
    assert default_run_name(RunConfig(model="/m/tiny-gpt2/", corpus="c.txt.gz")) == "tiny-gpt2__c"


@pytest.mark.slow
def test_progress_and_determinism(tiny_models, tiny_corpus, tmp_path):
    events: list[Progress] = []
    cfg = RunConfig(
        model=str(tiny_models["bert"]), corpus=str(tiny_corpus), batch_size=16, samples_per_token=5, name="p1"
    )
    a = open_run(compute_run(cfg, tmp_path, progress=events.append))
    stages = [e.stage for e in events]
    assert stages[0] == "corpus" and stages[-1] == "done" and "compute" in stages and "write" in stages
    comp = [e for e in events if e.stage == "compute"]
    assert comp[-1].sentences_done == comp[-1].sentences_total == a.meta["n_sentences"]
    assert comp[-1].embeddings == a.meta["n_embeddings"] and comp[-1].emb_per_s > 0
    # phases in order (plan, model, the occurrences' early pass, forward, finalize, write, done), each with its counts;
    # the bar never goes back
    phases = [e.phase for e in events]
    firsts = sorted({p: phases.index(p) for p in phases}.items(), key=lambda kv: kv[1])
    assert [p for p, _ in firsts] == ["plan", "model", "early", "forward", "finalize", "write", "done"]
    # loading the model is a phase of its own: not "forward · 0/N sentences · 0 emb/s"
    load = [e for e in events if e.phase == "model"]
    assert load and jobs.progress_text(dataclasses.asdict(load[0])).startswith("model · loading ")
    assert not [e for e in events[: phases.index("model") + 1] if e.phase == "forward"]
    assert all(b.percent >= a_.percent for a_, b in zip(events, events[1:])) and events[-1].percent == 100
    fin = [e for e in events if e.phase == "finalize"]
    assert fin[-1].done == fin[-1].total == len(a.meta["accumulators"]) and fin[-1].unit == "measures"
    wr = [e for e in events if e.phase == "write"]
    assert wr[-1].unit == "tables" and wr[-1].done == wr[-1].total - 1 and wr[-1].eta_s is not None
    b = open_run(compute_run(cfg.replace(name="p2", batch_size=5), tmp_path))  # other batching: same picks
    sa, sb = a.samples(2), b.samples(2)
    assert sa["token_id"].tolist() == sb["token_id"].tolist()
    np.testing.assert_allclose(np.stack(sa["vector"]), np.stack(sb["vector"]), atol=1e-4)
    c = open_run(compute_run(cfg.replace(name="p3", seed=7), tmp_path))
    assert not np.array_equal(np.stack(c.samples(2)["vector"]), np.stack(sa["vector"]))


def test_compute_module_has_no_streamlit():
    import sys

    assert "streamlit" not in sys.modules or not hasattr(compute_mod, "st")
