"""The neighbourhoods' exact 128-NN search on seed 004's 16,384-point sample: normvar's numba pass (``stats.knn``)
against faiss-cpu's exact flat search (``IndexFlatL2``) as the candidate generator, followed by the same exact
float64 re-rank.

The sample: MiniLM's states at one layer (``--layer``, default 4) of 16,384 seeded random token positions of the
shipped novels, in the TwoNN batches of 4,096, each position's sentence its group — what the measure searches per
layer. Per batch both methods run the measure's searches (every other row, and the rows of other sentences; with
copies in the batch, both again over its distinct rows). faiss returns each row's k' = 128 + 1 + (its batch's
largest sentence) + ``--margin`` nearest by its float32 distances; a row's list is exact when the last of them is
above its k-th allowed float32 distance plus twice the Gram product's rounding bound (the rule of ``stats.knn``),
and the rows where it is not are searched again by ``stats.knn``. Both results are checked equal (indices exactly,
distances to 1e-12), then the wall and CPU seconds of each (medians of ``--repeat``) are printed as a markdown
table. faiss is not a dependency: the script imports it from the environment or from ``--faiss-path``, and times
the numba search alone where it finds none.
Usage: .venv/bin/python benchmarks/bench_knn.py [--layer 4] [--repeat 3] [--margin 32] [--faiss-path DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent.parent)]

K = 128


def minilm_sample(layer: int, size: int = 16384, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(X (size, 384) float32, sentence of each row): MiniLM's states at ``layer`` of ``size`` seeded random
    token positions of the shipped novels, in a random order."""
    import gzip

    import torch
    from transformers import AutoModel, AutoTokenizer

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from model_dirs import installed_minilm_dir

    from normvar_core.datadir import DEFAULT_CORPUS

    path = installed_minilm_dir()
    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    rows, sents, n = [], [], 0
    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        lines = [s.strip() for s in fh if s.strip()][: 4 * size // 10]
    with torch.no_grad():
        for a in range(0, len(lines), 64):
            enc = tok(lines[a : a + 64], padding=True, truncation=True, max_length=128, return_tensors="pt")
            hs = model(**enc, output_hidden_states=True).hidden_states[layer]
            mask = enc["attention_mask"].bool()
            rows.append(hs[mask].numpy())
            sents.append(np.repeat(np.arange(a, a + mask.shape[0]), mask.sum(1).numpy()))
            n += int(mask.sum())
            if n >= 3 * size:
                break
    X, s = np.concatenate(rows), np.concatenate(sents)
    pick = np.random.default_rng(seed).permutation(X.shape[0])[:size]
    return np.ascontiguousarray(X[pick], np.float32) + np.float32(0.0), s[pick]


def faiss_searches(faiss, X: np.ndarray, k: int, groups: np.ndarray, first: np.ndarray | None, margin: int):
    """``stats.knn.searches(X, k, groups, first)`` with faiss's flat search generating the candidates."""
    from normvar_core.stats import knn
    from normvar_core.stats.knn_kernels import _distances  # noqa: F401  (compiled by knn's first call)

    X32 = np.ascontiguousarray(X, np.float32)
    m, d = X32.shape
    which = [0, 1] + ([2, 3] if first is not None else [])
    sq64 = np.einsum("ij,ij->i", X32.astype(np.float64), X32.astype(np.float64))
    c = (2 * d + 24) * 2.0**-24 * 1.02
    slack2 = 2 * c * (sq64 + sq64.max())
    g = np.unique(groups, return_inverse=True)[1].reshape(-1)
    dist, idx = np.full((len(which), m, k), np.inf), np.full((len(which), m, k), -1, np.int64)
    redo = np.zeros((len(which), m), bool)
    for part, sub in ((0, np.arange(m)), (2, None if first is None else np.flatnonzero(first))):
        if sub is None:
            continue
        index = faiss.IndexFlatL2(d)
        index.add(X32[sub])
        most = int(np.bincount(g[sub]).max())
        kk = min(sub.size, k + 1 + most + margin)
        D, I = index.search(X32[sub], kk)
        I = sub[I]
        for masked in (0, 1):
            allowed = I != sub[:, None]
            if masked:
                allowed &= g[I] != g[sub][:, None]
            pos = np.cumsum(allowed, 1)  # allowed entries before and at each column
            has = pos[:, -1] >= k
            kth = np.where(has, D[np.arange(sub.size), np.argmax(pos >= k, 1)], np.inf)
            thr = kth + slack2[sub]
            complete = (kk == sub.size) | (D[:, -1] > thr)
            take = allowed & (D <= thr[:, None])
            s = part + masked
            redo[s, sub[~complete]] = True
            take &= complete[:, None]
            ri, ci = np.nonzero(take)  # row-major: each row's candidates together
            cj = I[ri, ci]
            cd = np.empty(cj.size)
            for a in range(0, cj.size, 1 << 14):
                w = X32[cj[a : a + (1 << 14)]].astype(np.float64) - X32[sub[ri[a : a + (1 << 14)]]]
                cd[a : a + w.shape[0]] = np.sqrt(np.einsum("ij,ij->i", w, w))
            order = np.lexsort((cj, cd, ri))
            ri, cj, cd = ri[order], cj[order], cd[order]
            rank = np.arange(ri.size) - np.searchsorted(ri, ri)
            keep = rank < k
            dist[s, sub[ri[keep]], rank[keep]] = cd[keep]
            idx[s, sub[ri[keep]], rank[keep]] = cj[keep]
    if redo.any():  # rows whose list may not hold every candidate: the numba search
        rows = np.flatnonzero(redo.any(0))
        d2, i2 = knn.searches(X32, k, groups=groups, first=first)
        dist[:, rows], idx[:, rows] = d2[:, rows], i2[:, rows]
    return dist, idx, int(redo.any(0).sum())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layer", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--margin", type=int, default=32)
    ap.add_argument("--faiss-path", default="", help="a folder holding faiss (pip install --target DIR faiss-cpu)")
    args = ap.parse_args()
    if args.faiss_path:
        sys.path.append(args.faiss_path)
    try:
        import faiss
    except ImportError:  # not a dependency: the numba search alone
        faiss = None

    from normvar_core.pipeline.measures.geometry import first_copies
    from normvar_core.stats import knn
    from normvar_core.stats.layer_geometry import twonn_batch_of

    X, sent = minilm_sample(args.layer)
    tb = twonn_batch_of(X.shape[0])
    batches = []
    for t in np.unique(tb):
        rows = np.flatnonzero(tb == t)
        first = np.zeros(rows.size, bool)
        first[first_copies(X[rows])[1]] = True
        batches.append((X[rows], sent[rows], None if first.all() else first))
    knn.searches(X[:600], K, groups=sent[:600])  # numba's compile / cache load out of the timing
    times: dict = {"numba": [], "faiss": []} if faiss else {"numba": []}
    redone = 0
    for _ in range(args.repeat):
        for name in times:
            w0, c0 = time.perf_counter(), time.process_time()
            out = []
            for Xb, sb, fb in batches:
                if name == "numba":
                    out.append(knn.searches(Xb, K, groups=sb, first=fb))
                else:
                    dist, idx, n = faiss_searches(faiss, Xb, K, sb, fb, args.margin)
                    out.append((dist, idx))
                    redone = n
            times[name].append((time.perf_counter() - w0, time.process_time() - c0))
            if name == "numba":
                want = out
            else:
                for (d1, i1), (d2, i2) in zip(want, out, strict=True):
                    np.testing.assert_array_equal(i1, i2)
                    np.testing.assert_allclose(d1, d2, rtol=1e-12, atol=0)
    print(
        f"MiniLM layer {args.layer}, 16,384 positions in 4 TwoNN batches of 4,096, k = {K}, every search of the "
        f"measure; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; equal lists: yes; rows faiss left to "
        f"the numba search (last batch): {redone}\n"
    )
    print("| method | wall runs (s) | wall median (s) | CPU median (s) |\n|---|---|---:|---:|")
    version = getattr(faiss, "__version__", "")
    labels = {"numba": "numba pass (`stats.knn`)", "faiss": f"faiss-cpu {version} IndexFlatL2"}
    for name, label in labels.items():
        if name not in times:
            continue
        w = [t[0] for t in times[name]]
        print(
            f"| {label} | {', '.join(f'{x:.1f}' for x in w)} | {statistics.median(w):.1f} | "
            f"{statistics.median(t[1] for t in times[name]):.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
