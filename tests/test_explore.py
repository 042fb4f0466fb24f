"""Exploration: nearest types, the occurrence percentile of "your own sentence", the
tokenizer-normalised lookup, the clouds' colours and label placement, the t-SNE map — each against an
independent ground truth (float64 brute force, a real MiniLM forward pass through transformers, the
real tokenizer, sklearn)."""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import brute
import numpy as np
import pandas as pd
import pytest
from dashboard_run import RUN

from normvar_core.errors import NormvarError
from normvar_core.stats.lookup import find_type, levenshtein, suggest
from normvar_core.stats.neighbours import nearest_types
from normvar_core.stats.occurrence_rank import distance_percentile
from normvar_core.viz.viewstate import ViewState


@pytest.fixture(scope="module")
def run(data_dir):
    from normvar_core.runs.reader import open_run

    return open_run(data_dir / "runs" / f"{RUN}.duckdb")


# ------------------------------------------------------------------------------------ neighbours
def test_nearest_types_equal_a_float64_brute_force():
    rng = np.random.default_rng(22)
    means = rng.normal(size=(300, 24)).astype(np.float32)
    means[[5, 77]] = 0.0  # zero means have no cosine
    means[10] = means[11] * 2  # a tie in cosine: the smaller id first
    ids = np.arange(1000, 1300) * 7
    q = rng.normal(size=24)
    got = nearest_types(means, ids, q, 15, exclude=int(ids[3]))
    want_ids, want_cos = brute.nearest(means, ids, q, 15, exclude=int(ids[3]))
    assert got["token_id"].tolist() == want_ids
    np.testing.assert_allclose(got["cosine"], want_cos, rtol=1e-12)
    tie = nearest_types(means, ids, means[11], 2)
    assert tie["token_id"].tolist() == [int(ids[10]), int(ids[11])]


def test_nearest_types_of_a_real_run(run):
    st = run.stats()
    li = st.layer(3)
    tid = int(run.tokens().set_index("token")["token_id"]["her"])
    col = int(np.searchsorted(st.token_ids, tid))
    got = nearest_types(st.mean[li], st.token_ids, st.mean[li, col], 10, exclude=tid)
    want_ids, want_cos = brute.nearest(st.mean[li], st.token_ids, st.mean[li, col], 10, exclude=tid)
    assert got["token_id"].tolist() == want_ids
    np.testing.assert_allclose(got["cosine"], want_cos, rtol=1e-10)


# ------------------------------------------------------------------------------------ your own sentence
SENTENCE = "She said that her father was there."


def test_own_sentence_percentiles_match_a_direct_minilm_forward_pass(run, minilm_path, tmp_path):
    """The worker task's rows against transformers run here, the run's samples and its exact means."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from normvar_core.service.own_sentence import read_result, write_sentence

    doc = read_result(write_sentence(str(run.path), SENTENCE, tmp_path / "s.json", run.path.parent.parent))
    rows = pd.DataFrame(doc["rows"])
    tok = AutoTokenizer.from_pretrained(minilm_path)
    model = AutoModel.from_pretrained(minilm_path).eval()
    enc = tok(SENTENCE, return_tensors="pt")
    with torch.no_grad():
        hs = model(**enc, output_hidden_states=True).hidden_states
    ids = enc["input_ids"][0].tolist()
    assert rows[rows["layer"] == 0]["token_id"].tolist() == ids
    st = run.stats()
    checked = 0
    for layer in (0, 1, 3, 6):
        li = st.layer(layer)
        for p, tid in enumerate(ids):
            r = rows[(rows["layer"] == layer) & (rows["position"] == p)].iloc[0]
            col = int(np.searchsorted(st.token_ids, tid))
            if col >= len(st.token_ids) or st.token_ids[col] != tid:
                assert r["n"] == 0 and pd.isna(r["percentile"])
                continue
            x = hs[layer][0, p].double().numpy()
            mu = st.mean[li, col]
            d = math.sqrt(sum((float(a) - float(b)) ** 2 for a, b in zip(x, mu)))
            smp = run.samples(layer, [tid])
            ref = [math.sqrt(sum((float(a) - float(b)) ** 2 for a, b in zip(v, mu))) for v in smp["vector"]]
            assert r["distance"] == pytest.approx(d, rel=1e-5)
            assert r["n_samples"] == len(ref)
            if ref:
                # the mid-rank: uses nearer the mean, ties (within float32 noise of the scale) counted half
                tol = 1e-5 * (math.sqrt(sum(float(b) ** 2 for b in mu)) + d)
                pct = (
                    100.0
                    * (sum(1 for e in ref if e < d - tol) + 0.5 * sum(1 for e in ref if abs(e - d) <= tol))
                    / len(ref)
                )
                assert r["percentile"] == pytest.approx(pct, abs=100.0 / len(ref) + 1e-9)
                if r["position"] == 0 and layer == 0:  # [CLS] at layer 0: every use at one point, the middle
                    assert max(ref) - min(ref) < tol and r["percentile"] == 50.0
                checked += 1
            assert r["m"] == pytest.approx(float(st.m[li, col]), rel=1e-12)
            assert r["dist_sq"] == pytest.approx(d * d, rel=1e-5)
    assert checked >= 12


def test_distance_percentile_edges():
    mu = np.zeros(3)
    smp = np.array([[1.0, 0, 0], [2.0, 0, 0], [3.0, 0, 0], [4.0, 0, 0]])
    assert distance_percentile(np.array([0.0, 0, 0]), mu, smp) == (0.0, 0.0)
    assert distance_percentile(np.array([0.0, 2.0, 0]), mu, smp) == (2.0, 37.5)  # one nearer, one tie
    same = np.repeat([[1.0, 2.0, 3.0]], 5, axis=0).astype(np.float32)  # every use at one point
    assert distance_percentile(same[0].astype(np.float64) * (1 + 1e-7), same.mean(0), same)[1] == 50.0
    assert distance_percentile(np.array([0.0, 0, 9.0]), mu, smp) == (9.0, 100.0)
    d, p = distance_percentile(np.array([1.0, 0, 0]), mu, np.zeros((0, 3)))
    assert d == 1.0 and math.isnan(p)


def test_submit_sentence_refuses_bad_input(run):
    from normvar_core.service.jobs import JobStore

    store = JobStore(run.path.parent.parent)
    with pytest.raises(NormvarError, match="empty"):
        store.submit_sentence(RUN, "   ")
    with pytest.raises(NormvarError, match="more than"):
        store.submit_sentence(RUN, "word " * 400)
    with pytest.raises(NormvarError):
        store.submit_sentence("no-such-run", "A sentence.")


def test_sentence_job_runs_through_the_worker_once(run, tmp_path):
    """``submit_sentence`` -> the worker's "sentence" task (``tasks.TASKS``) -> ``reports/<job>.sentence.json``
    with the rows of ``write_sentence`` called directly; the same request while queued gives back its job."""
    import shutil

    from normvar_core.service.jobs import JobStore
    from normvar_core.service.own_sentence import read_result, write_sentence
    from normvar_core.service.worker import Worker

    data = tmp_path / "data"
    (data / "runs").mkdir(parents=True)
    path = Path(shutil.copy(run.path, data / "runs" / run.path.name))
    store = JobStore(data)
    jid = store.submit_sentence(RUN, SENTENCE)
    assert store.submit_sentence(RUN, SENTENCE) == jid
    assert Worker(data, poll_s=0.05).run(once=True, install_signals=False) == 1
    job = store.get(jid)
    assert (job.task, job.state, job.run_path) == ("sentence", "done", str(data / "reports" / f"{jid}.sentence.json"))
    direct = read_result(write_sentence(str(path), SENTENCE, tmp_path / "s.json", data))
    assert read_result(job.run_path)["rows"] == direct["rows"]


# ------------------------------------------------------------------------------------ lookup
@cache
def _lev(a: str, b: str) -> int:
    if not a or not b:
        return len(a) + len(b)
    return min(_lev(a[1:], b) + 1, _lev(a, b[1:]) + 1, _lev(a[1:], b[1:]) + (a[0] != b[0]))


def test_lookup_normalises_like_the_tokenizer_and_suggests(minilm_path):
    from transformers import AutoTokenizer

    from normvar_core.pipeline.models.tokenizer_files import for_model

    real = AutoTokenizer.from_pretrained(minilm_path)
    files = for_model("minilm")
    for word in ("License", "Café", "UNBELIEVABLY", "her", "Über-cool"):
        assert files.pieces(word) == real.tokenize(word)
    vocab = pd.DataFrame(
        {"token_id": [1, 2, 3, 4, 5], "token": ["license", "licensed", "##se", "lichen", "the"], "n": [3, 9, 4, 2, 100]}
    )
    assert find_type(vocab, "License", files.normalise)["token"].tolist() == ["license"]
    assert find_type(vocab, "License").empty  # without the tokenizer: exact only
    assert find_type(vocab, "se")["token"].tolist() == ["##se"]  # fn. 7: the marker is optional
    sug = suggest(vocab.iloc[1:], "Licence", files.normalise, k=3)
    assert sug["token"].tolist()[:2] == ["licensed", "lichen"]
    for a, b in [("licence", "license"), ("kitten", "sitting"), ("", "abc"), ("flaw", "lawn")]:
        assert levenshtein(a, b) == _lev(a, b)


# ------------------------------------------------------------------------------------ clouds
def test_token_colours_are_far_apart_in_cielab():
    from PIL import Image, ImageCms  # an independent sRGB -> CIELAB (LittleCMS, D50 white)

    from normvar_core.viz.cloud_layout import token_colours

    cols = list(token_colours([f"t{i}" for i in range(24)]).values())
    im = Image.new("RGB", (len(cols), 1))
    for i, c in enumerate(cols):
        im.putpixel((i, 0), tuple(int(c[k : k + 2], 16) for k in (1, 3, 5)))
    to_lab = ImageCms.buildTransformFromOpenProfiles(
        ImageCms.createProfile("sRGB"), ImageCms.createProfile("LAB"), "RGB", "LAB"
    )
    out = ImageCms.applyTransform(im, to_lab)
    lab = np.array(
        [[v * 100 / 255 if k == 0 else v - 128 for k, v in enumerate(out.getpixel((i, 0)))] for i in range(len(cols))],
        dtype=np.float64,
    )
    d = np.linalg.norm(lab[:, None] - lab[None], axis=2) + np.eye(len(cols)) * 1e9
    assert d.min() > 20 and len(set(cols)) == 24
    assert all(27 <= L <= 81 for L in lab[:, 0])


def test_cloud_labels_never_overlap_and_stay_in_the_plot(run):
    from normvar_core.viz.cloud_figures import clouds_figure
    from normvar_core.viz.cloud_layout import equal_frame, label_box
    from normvar_core.viz.clouds import pca_cloud

    ids = run.sampled_tokens()["token_id"].astype(int).tolist()[:16]
    coords = pca_cloud(run.samples(3, ids)).coords
    for pres in (False, True):
        fig = clouds_figure(coords, presentation=pres)
        L = fig.layout
        w = L.width - L.margin.l - L.margin.r
        h = L.height - L.margin.t - L.margin.b
        frame = equal_frame(np.r_[coords["pc1"], 0], np.r_[coords["pc2"], 0], w, h)
        assert tuple(L.xaxis.range) == pytest.approx(frame.xrange) and tuple(L.yaxis.range) == pytest.approx(
            frame.yrange
        )
        boxes = []
        for a in L.annotations:
            px, py = frame.to_px(np.array([a.x]), np.array([a.y]))
            bw, bh = label_box(a.text, a.font.size)
            cx, cy = px[0] + a.ax, py[0] + a.ay
            assert bw / 2 <= cx <= w - bw / 2 and bh / 2 <= cy <= h - bh / 2
            boxes.append((cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2))
        assert len(boxes) == len(set(coords["token"]))
        for i in range(len(boxes)):
            for j in range(i):
                a, b = boxes[i], boxes[j]
                assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (i, j)
        assert [t.name for t in fig.data if t.name != "origin"] == list(dict.fromkeys(coords["token"]))


def test_tsne_map_is_seeded_and_keeps_neighbourhoods(run):
    from sklearn.manifold import trustworthiness

    from normvar_core.viz.clouds import tsne_map

    ids = run.sampled_tokens().sort_values("count")["token_id"].astype(int).tolist()[-4:]
    smp = run.samples(4, ids)
    a, b = tsne_map(smp), tsne_map(smp)
    pd.testing.assert_frame_equal(a, b)
    X = np.stack(smp["vector"]).astype(np.float64)
    assert trustworthiness(X, a[["tsne1", "tsne2"]].to_numpy(), n_neighbors=10) > 0.9


def test_viewstate_keeps_the_clouds_tokens_and_map():
    v = ViewState.from_query({"cloud": "2014, 1996,x,2014", "map": "tsne"})
    assert v.cloud == [2014, 1996] and v.cmap == "tsne"
    assert ViewState.from_query(v.to_query()) == v
    assert "cloud" not in ViewState().to_query() and "map" not in ViewState().to_query()
    assert ViewState.from_query({"map": "umap"}).cmap == "pca"


@pytest.mark.subprocess
def test_tokenizer_files_do_not_load_torch():
    import subprocess
    import sys

    code = (
        "import sys; from normvar_core.pipeline.models.tokenizer_files import for_model; "
        "from normvar_core.stats.lookup import find_type; t = for_model('minilm'); "
        "assert t.normalise('License') == 'license', t.normalise('License'); "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert out.stdout.strip() == "[]"


def test_tsne_map_is_kept_on_disk_per_run_version(run, tmp_path):
    """The dashboard's t-SNE map is computed once per run version and layer and read back from the data
    dir's cache (a restarted dashboard does not compute it again); a stale version's map is removed."""
    from views._explore import stored_tsne, tsne_file

    path = tsne_file(run, 2, tmp_path)
    stale = path.with_name("0123456789abcdef-layer2.parquet")
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an older version's map")
    first = stored_tsne(run, 2, tmp_path)
    assert path.is_file() and not stale.exists()
    pd.testing.assert_frame_equal(pd.read_parquet(path), first)
    marked = first.assign(tsne1=first["tsne1"] + 1.0)  # what is on disk is what is shown: nothing recomputed
    marked.to_parquet(path, index=False)
    pd.testing.assert_frame_equal(stored_tsne(run, 2, tmp_path), marked)
    path.write_bytes(b"PAR1 damaged")  # a damaged file is computed again, to the same seeded map
    pd.testing.assert_frame_equal(stored_tsne(run, 2, tmp_path), first)
    assert len(first) == len(run.samples(2)) and np.isfinite(first[["tsne1", "tsne2"]].to_numpy()).all()
