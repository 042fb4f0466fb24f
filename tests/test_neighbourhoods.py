"""GRIDE and the neighbourhood overlap (``pipeline.measures.neighbourhoods``) against independent ground truth:
the exact k-NN search equals a float64 brute force over all pairs (ties by index, masked or not), GRIDE equals
scipy's maximisation of Denti et al.'s likelihood on the same neighbour lists, and a real MiniLM run's tables
equal the brute force on the geometry's own sample at every layer."""

from __future__ import annotations

import numpy as np
import pytest
from brute import gride_by_scipy, knn_lists, overlap_by_sets

from normvar_core.stats import gride, knn, overlap


def _cloud(seed: int, m: int = 300, rank: int = 6, d: int = 24) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, rank)) @ rng.standard_normal((rank, d))).astype(np.float32)


@pytest.mark.parametrize("seed", [0, 1])
def test_exact_search_equals_brute_force_masked_and_not(seed):
    X = _cloud(seed)
    X[10] = X[11]  # a copy: distance 0, a tie broken by index
    X[20:23] = X[20:23].round(0)  # coarse values: tied distances
    groups = np.random.default_rng(seed).integers(0, 30, len(X))
    (d, i), (dc, ic) = knn.nearest_k(X, 40, groups=groups, chunk=64)
    bd, bi = knn_lists(X, 40)
    cd, ci = knn_lists(X, 40, groups=groups)
    np.testing.assert_array_equal(i, bi)
    np.testing.assert_array_equal(ic, ci)
    np.testing.assert_allclose(d, bd, rtol=1e-12, atol=0)
    np.testing.assert_allclose(dc, cd, rtol=1e-12, atol=0)


@pytest.mark.parametrize("chunk", [48, 512])  # 512: a Gram block of all 200 rows
@pytest.mark.parametrize("k", [30, 12])
def test_the_distinct_rows_searches_equal_a_brute_force_on_the_rows_without_copies(k, chunk):
    """Searches 2 and 3 (the rows flagged first, over those rows only) equal a brute force on X without its copies,
    in the same blocks as searches 0 and 1 (which still see the copies)."""
    X = _cloud(4, m=200)
    X[50:60] = X[0:10]  # copies of rows 0–9, and one copy of a copy
    X[70] = X[5]
    X[80:83] = X[80:83].round(0)
    groups = np.random.default_rng(4).integers(0, 25, len(X))
    first = np.ones(len(X), bool)
    first[[*range(50, 60), 70]] = False
    dist, idx = knn.searches(X, k, groups=groups, first=first, chunk=chunk)
    keep = np.flatnonzero(first)
    for s, grp in ((2, None), (3, groups[keep])):
        bd, bi = knn_lists(X[keep], k, grp)
        np.testing.assert_array_equal(idx[s, keep], np.where(bi >= 0, keep[np.maximum(bi, 0)], -1))
        np.testing.assert_allclose(dist[s, keep], bd, rtol=1e-12, atol=0)
        assert (idx[s, ~first] == -1).all() and np.isinf(dist[s, ~first]).all()
    bd, bi = knn_lists(X, k, groups)
    np.testing.assert_array_equal(idx[1], bi)
    np.testing.assert_allclose(dist[1], bd, rtol=1e-12, atol=0)


@pytest.mark.parametrize("chunk", [32, 512])
def test_the_distinct_rows_search_without_groups_equals_a_brute_force(chunk):
    """Without groups the searches are [0] every other row and [1] the distinct rows (``first``): each equals a
    brute force, with copies, a copy of a copy and ties, in blocks smaller and larger than the batch."""
    X = _cloud(8, m=180)
    X[40:50] = X[0:10]
    X[60] = X[45]
    X[90:93] = X[90:93].round(0)
    first = np.ones(len(X), bool)
    first[[*range(40, 50), 60]] = False
    dist, idx = knn.searches(X, 25, first=first, chunk=chunk)
    assert dist.shape[0] == 2
    bd, bi = knn_lists(X, 25)
    np.testing.assert_array_equal(idx[0], bi)
    np.testing.assert_allclose(dist[0], bd, rtol=1e-12, atol=0)
    keep = np.flatnonzero(first)
    bd, bi = knn_lists(X[keep], 25)
    np.testing.assert_array_equal(idx[1, keep], np.where(bi >= 0, keep[np.maximum(bi, 0)], -1))
    np.testing.assert_allclose(dist[1, keep], bd, rtol=1e-12, atol=0)
    assert (idx[1, ~first] == -1).all()


def test_the_kth_smallest_by_bisection_equals_a_sort():
    """``knn_kernels._kth`` (bisection on the float32 bit patterns' order-preserving keys) equals numpy's sort, on
    coarse values with many ties, negatives, −0.0, ±inf and NaN (taken for inf)."""
    from normvar_core.stats.knn_kernels import _kth

    rng = np.random.default_rng(0)
    for _ in range(3000):
        n = int(rng.integers(1, 300))
        a = rng.integers(-5, 20, n).astype(np.float32) * np.float32(rng.choice([1.0, 0.37, 1e-30]))
        a[rng.random(n) < 0.05] = -0.0
        a[rng.random(n) < 0.1] = np.inf
        a[rng.random(n) < 0.05] = -np.inf
        a[rng.random(n) < 0.05] = np.nan
        k = int(rng.integers(1, n + 2))
        want = np.sort(np.where(np.isnan(a), np.inf, a))[k - 1] if k <= n else np.inf
        assert _kth(a, np.empty(n, np.int64), k) == want


def _kernel_candidates(d2, i, g, first, k, slack):
    """``knn_kernels._candidates`` of row 0 of ``d2`` (1, m), every search type: (columns, type bits)."""
    from normvar_core.stats.knn_kernels import GROUPS_PER_K, _candidates

    m = d2.shape[1]
    order = np.argsort(g, kind="stable").astype(np.int64)
    start = np.searchsorted(g[order], np.arange(g.max() + 2)).astype(np.int64)
    own = order[start[g[i]] : start[g[i] + 1]]
    copies = np.flatnonzero(~first).astype(np.int64)
    G = GROUPS_PER_K * k
    cj, bits = np.empty(m, np.int64), np.empty(m, np.uint8)
    scratch = (np.empty(G, np.float32), np.empty(G, np.int64), np.empty((2, m), np.float32), np.empty(m, np.uint8))
    n = _candidates(d2, 0, i, own, copies, g, np.arange(4, dtype=np.int64), k, slack, *scratch, cj, bits)
    return cj[:n], bits[:n]


def _allowed(m, i, g, first, search):
    ok = np.arange(m) != i
    if search >= 2:
        ok &= first & first[i]
    if search % 2:
        ok &= g != g[i]
    return ok


@pytest.mark.parametrize("m", [5, 127, 128, 129, 300, 1000, 2100])
def test_the_candidates_hold_every_column_within_the_kth_smallest_and_the_slack(m):
    """A row's candidates (``knn_kernels._candidates``), per search: every allowed column whose float32 distance is
    at most the k-th smallest allowed (numpy's sort) plus the slack, or every allowed finite one where fewer than k
    are (what the exact search needs), and only allowed finite columns; with ties, NaN and inf (no candidates),
    masked groups, rows that are copies (no searches 2 and 3)."""
    rng = np.random.default_rng(m)
    k = 128
    for rep in range(12):
        d2 = rng.integers(0, 40, (1, m)).astype(np.float32)  # coarse: many ties
        d2[rng.random(d2.shape) < 0.05] = np.nan
        d2[rng.random(d2.shape) < 0.05] = np.inf
        g = rng.integers(0, int(rng.choice([3, 7, 200])), m).astype(np.int64)
        first = rng.random(m) < 0.8
        i = int(rng.integers(0, m))
        slack = np.float32(rng.choice([0.0, 1.0, 2.5]))
        row = d2[0].copy()
        cj, bits = _kernel_candidates(d2, i, g, first, k, slack)
        for search in range(4):
            ok = _allowed(m, i, g, first, search) & np.isfinite(row)
            allowed = np.sort(row[ok])
            thr = allowed[k - 1] + slack if allowed.size >= k else np.inf
            need = set(np.flatnonzero(ok & (row <= thr)))
            got = set(cj[(bits >> search) & 1 == 1])
            assert need <= got, f"m={m} rep={rep} search={search}: missing {sorted(need - got)[:5]}"
            assert got <= set(np.flatnonzero(ok)), f"m={m} rep={rep} search={search}"


@pytest.mark.parametrize("m", [300, 2100])
def test_the_candidates_are_the_columns_under_the_group_minimas_bound(m):
    """Without NaN, a search's candidates are exactly its allowed columns at most T + slack, T the k-th smallest of
    its G = 4k column groups' (j mod G) minima over its allowed columns (numpy): the bound the kernel finds without
    masking a row whose dropped columns cannot change it."""
    from normvar_core.stats.knn_kernels import GROUPS_PER_K

    rng = np.random.default_rng(m)
    k = 32
    G = GROUPS_PER_K * k
    fmax = np.finfo(np.float32).max
    for rep in range(12):
        d2 = rng.integers(0, 400, (1, m)).astype(np.float32)
        d2[rng.random(d2.shape) < 0.02] = np.inf
        g = rng.integers(0, int(rng.choice([3, 40, 400])), m).astype(np.int64)
        first = rng.random(m) < float(rng.choice([0.6, 0.97]))
        i = int(rng.integers(0, m))
        slack = np.float32(rng.choice([0.0, 3.0]))
        row = d2[0].copy()
        cj, bits = _kernel_candidates(d2, i, g, first, k, slack)
        for search in range(4):
            ok = _allowed(m, i, g, first, search)
            v = np.where(ok, row, np.inf)
            mins = np.full(G, np.inf, np.float32)
            np.minimum.at(mins, np.arange(m) % G, v)
            T = np.sort(mins)[k - 1]
            thr = min(np.float32(T + slack), fmax)
            want = np.flatnonzero(ok & (row <= thr)) if not (search >= 2 and not first[i]) else np.array([], int)
            np.testing.assert_array_equal(cj[(bits >> search) & 1 == 1], want, err_msg=f"rep={rep} search={search}")


def test_the_device_search_equals_the_brute_force():
    """The torch search (a GPU run's, here on the CPU's torch) gives the brute force's lists, every search, and its
    distances to float64 rounding (the device's own summation order)."""
    import torch

    from normvar_core.pipeline.measures import knn_device

    X = _cloud(5, m=150)
    X[40:45] = X[0:5]
    X[60:63] = X[60:63].round(0)
    groups = np.random.default_rng(5).integers(0, 20, len(X))
    first = np.ones(len(X), bool)
    first[40:45] = False
    dist, idx = knn_device.searches(torch.from_numpy(X), 20, groups=groups, first=first, chunk=32)
    keep = np.flatnonzero(first)
    for s, rows, grp in (
        (0, np.arange(len(X)), None),
        (1, np.arange(len(X)), groups),
        (2, keep, None),
        (3, keep, groups[keep]),
    ):
        bd, bi = knn_lists(X[rows], 20, grp)
        np.testing.assert_array_equal(idx[s, rows], np.where(bi >= 0, rows[np.maximum(bi, 0)], -1))
        np.testing.assert_allclose(dist[s, rows], bd, rtol=1e-14, atol=0)
    assert (idx[2:, ~first] == -1).all()


def test_a_batch_searched_on_the_states_device_equals_the_host_search():
    """One TwoNN batch's search on the device path (the rows as a tensor; here the CPU's torch; no host copy of them
    given) equals its host path: the same overlap lists, GRIDE to its solver's tolerance, the same TwoNN and context
    measures, copies dropped alike — found on the device (``knn_device.canonical_rows``) as the host finds them
    (``first_copies``), −0.0 as 0.0."""
    import torch

    from normvar_core.pipeline.measures import sample_lists as S
    from normvar_core.stats.twonn_context import subset_levels

    X = _cloud(6, m=300)
    X[100:110] = X[0:10]  # copies: GRIDE and TwoNN on the distinct rows
    X[200, :] = 0.0
    X[201, :] = -0.0  # a copy of row 200 bit for bit once -0.0 is taken as 0.0
    sentences = np.random.default_rng(6).integers(0, 60, 300)
    rows = np.arange(300) + 17  # the batch's sample positions
    levels = subset_levels(np.zeros(300, int))
    out = []
    for Xs in (X + np.float32(0.0), torch.from_numpy(X) + 0.0):
        found = S.search_batch(Xs, sentences)
        lists = np.full((2, 317, 64), -1, np.int32)
        curves = S.neighbourhood_part(found, rows, lists)
        fit, copies, context = S.twonn_part(found, sentences, levels, 0, lambda j, f=found: X[f.firsts[j]])
        out.append((lists, curves, fit, copies, context))
    (lh, ch, fh, nh, xh), (ld, cd, fd, nd, xd) = out
    np.testing.assert_array_equal(ld, lh)
    assert (lh[:, :17] == -1).all() and (lh[:, 17:] >= 17).all()
    np.testing.assert_allclose(np.asarray(cd, float), np.asarray(ch, float), rtol=1e-12, atol=1e-9)
    assert nh == nd == 11 and fd == pytest.approx(fh, rel=1e-13)  # rows 100-109, and 201
    assert xd["share"] == xh["share"] and xd["cross"] == pytest.approx(xh["cross"], rel=1e-13)
    for k in xh["curve"]:
        np.testing.assert_allclose(xd["curve"][k], xh["curve"][k], rtol=1e-13)


def test_copies_found_on_the_device_are_the_hosts():
    import torch

    from normvar_core.pipeline.measures.knn_device import canonical_rows
    from normvar_core.pipeline.measures.sample_lists import first_copies

    rng = np.random.default_rng(9)
    base = rng.standard_normal((30, 6)).astype(np.float32)
    base[4] = -0.0
    X = base[rng.integers(0, 30, 200)]
    X[X == 0] = rng.choice([0.0, -0.0], size=int((X == 0).sum())).astype(np.float32)
    want_canon, want_firsts = first_copies(X + np.float32(0.0))
    canon, firsts = canonical_rows(torch.from_numpy(X))
    np.testing.assert_array_equal(canon, want_canon)
    np.testing.assert_array_equal(firsts, want_firsts)
    assert firsts.size == np.unique(X + np.float32(0.0), axis=0).shape[0] < 200


def test_fewer_rows_than_neighbours_are_padded():
    X = _cloud(2, m=9)
    (d, i), (_, ic) = knn.nearest_k(X, 16, groups=np.arange(9) // 3)
    assert (i[:, :8] >= 0).all() and (i[:, 8:] == -1).all() and np.isinf(d[:, 8:]).all()
    assert (ic[:, :6] >= 0).all() and (ic[:, 6:] == -1).all()


@pytest.mark.parametrize("masked", [False, True])
def test_gride_equals_scipys_maximum_of_the_likelihood(masked):
    X = _cloud(3, m=400)
    groups = np.random.default_rng(3).integers(0, 40, len(X)) if masked else None
    (d, _), cross = knn.nearest_k(X, gride.NEIGHBOURS, groups=groups)
    r = cross[0] if masked else d
    for n1, est, err, scale, points in gride.batch_curve(r):
        assert points == len(X)
        assert abs(est - gride_by_scipy(r, n1, 2 * n1)) < 1e-6, n1
        assert 0 < err < est and scale == pytest.approx(r[:, 2 * n1 - 1].mean())


def test_gride_recovers_a_known_dimension():
    """Uniform points in a 3-cube embedded in 20 dimensions: GRIDE ≈ 3 at every scale up to n1 = 16."""
    rng = np.random.default_rng(5)
    X = (rng.random((3000, 3)) @ np.linalg.qr(rng.standard_normal((20, 3)))[0].T).astype(np.float32)
    (d, _), _ = knn.nearest_k(X, 32)
    for n1, est, err, _, _ in gride.batch_curve(d, scales=(1, 2, 4, 8, 16)):
        assert abs(est - 3) < 0.3 + 3 * err, (n1, est, err)


def test_overlap_counts_equal_python_sets():
    rng = np.random.default_rng(7)
    a = np.stack([rng.permutation(100)[:64] for _ in range(50)])
    b = np.where(rng.random((50, 64)) < 0.5, a, np.stack([rng.permutation(100)[:64] for _ in range(50)]))
    b[:, 60:] = -1
    got = overlap.shared(a, b)
    for j, k in enumerate(overlap.KS):
        assert got[j].mean() / k == pytest.approx(overlap_by_sets(a, b, k), abs=1e-12)


def test_a_real_run_equals_the_brute_force_on_its_sample(minilm_pass_150):
    """MiniLM, 150 sentences, the geometry's sample of 600: every layer's GRIDE (unmasked and masked) and overlap
    (k = 10 with the next and the last layer, and the curve over k) equal a brute force on the same states."""
    measures = minilm_pass_150["measures"]
    geo, nb = measures["geometry"], measures["neighbourhoods"]
    nb.take_results({"geometry": geo.result()})
    tables = nb.tables(nb.result(), None)
    g, o, c = (tables[t].to_pandas() for t in ("layer_gride", "layer_overlap", "overlap_curve"))
    sample, sent, layers = geo.sample.numpy(), np.asarray(geo.uplan.sentence), list(geo.layers)
    assert np.unique(geo.neighbours.tb).size == 1  # one batch of 600
    lists = {}
    for li, layer in enumerate(layers):
        X = sample[li]
        for masked in (False, True):
            grp = sent if masked else None
            _, lists[li, masked] = knn_lists(X, 64, grp)
            keep = np.unique(X, axis=0, return_index=True)[1]
            keep.sort()
            r, _ = knn_lists(X[keep], 128, None if grp is None else grp[keep])
            rows = g[(g.layer == layer) & (g.masked == masked)].set_index("n1")
            assert list(rows.index) == list(gride.SCALES)
            for n1 in gride.SCALES:
                assert abs(rows.loc[n1, "gride_id"] - gride_by_scipy(r, n1, 2 * n1)) < 1e-6, (layer, masked, n1)
    last = len(layers) - 1
    for li, layer in enumerate(layers):
        for masked in (False, True):
            for pair, lj in (("next", li + 1), ("last", last)):
                if lj > last:
                    continue
                got = c[(c.layer == layer) & (c.pair == pair) & (c.masked == masked)].set_index("k")["overlap"]
                for k in overlap.KS:
                    want = overlap_by_sets(lists[li, masked], lists[lj, masked], k)
                    assert got[k] == pytest.approx(want, abs=1e-12), (layer, pair, masked, k)
        row = o[o.layer == layer].iloc[0]
        assert row["overlap_last"] == pytest.approx(
            overlap_by_sets(lists[li, False], lists[last, False], overlap.K_DEFAULT), abs=1e-12
        )
        assert row["chance"] == pytest.approx(overlap.K_DEFAULT / 599)
    assert o[o.layer == layers[-1]].iloc[0]["overlap_last"] == 1.0 and np.isnan(o.iloc[-1]["overlap_next"])


class _Run:
    """A run file's tables by name, as the claims read them."""

    def __init__(self, **tables):
        self.tables = tables
        self.table_names = list(tables)

    def table(self, name):
        return self.tables[name]


def _view(ids, chi, std=0.01, batches=4, **geo_columns):
    from types import SimpleNamespace

    import pandas as pd

    layers = list(range(len(ids)))
    geo = pd.DataFrame({"layer": layers, "twonn_id": ids, "twonn_batches": batches, **geo_columns})
    o = pd.DataFrame({"layer": layers, "overlap_next": chi + [float("nan")], "overlap_next_std": std})
    return SimpleNamespace(run=_Run(layer_overlap=o), geometry=geo)


@pytest.mark.parametrize(
    "chi, verdict",
    [
        ([0.5, 0.3, 0.8, 0.85, 0.9], "holds"),
        ([0.5, 0.9, 0.6, 0.5, 0.4], "fails"),
        ([0.5, 0.60, 0.61, 0.60, 0.60], "cannot tell"),
    ],
)
def test_the_overlap_claim_compares_the_peak_with_the_layers_after_it(chi, verdict):
    """TwoNN peaks at layer 1; Δ = mean χ(l, l+1) after it − χ(1, 2): above 0 holds, below fails, within its
    interval (± t₃ √((s² + Σs²/n²) / (B − 1)), the stored std the batches' population one) cannot tell."""
    from scipy.stats import t

    from normvar_core.stats.claims_neighbourhoods import overlap_profile

    f = overlap_profile(_view([3.0, 12.0, 9.0, 8.0, 8.0, 8.0], chi, std=0.05))
    assert f.verdict == verdict and f.layer == 1
    assert f.value == pytest.approx(np.mean(chi[2:]) - chi[1])
    half = t.ppf(0.975, 3) * np.sqrt((0.05**2 + 3 * 0.05**2 / 9) / 3)
    assert f.interval == pytest.approx([f.value - half, f.value + half])


def test_the_overlap_claim_without_a_layer_after_the_peak_or_the_table():
    from normvar_core.stats.claims_neighbourhoods import overlap_profile

    assert overlap_profile(_view([3.0, 5.0, 9.0, 12.0], [0.5, 0.6, 0.4])).verdict == "cannot tell"
    rv = _view([3.0, 5.0, 9.0, 12.0], [0.5, 0.6, 0.4])
    rv.run = _Run()
    f = overlap_profile(rv)
    assert f.verdict == "untestable" and "neighbourhoods option" in f.why


def test_the_overlap_claim_cannot_tell_without_an_interval_or_an_anchor():
    """One TwoNN batch: no interval, so no verdict (not a firm one with ``interval: null``); where ``id_profile``
    cannot tell where the peak is (a layer's sample holds too few distinct embeddings) neither can the overlap;
    a point with no more than k = 10 neighbours, or a table without its columns: untestable."""
    import pandas as pd

    from normvar_core.stats.claims_neighbourhoods import overlap_profile

    chi, ids = [0.5, 0.3, 0.8, 0.85, 0.9], [3.0, 12.0, 9.0, 8.0, 8.0, 8.0]
    f = overlap_profile(_view(ids, chi, std=0.05, batches=1))
    assert f.verdict == "cannot tell" and f.interval is None and "one TwoNN batch" in f.why
    f = overlap_profile(_view(ids, chi, std=0.05, id_sample=30, twonn_duplicates=[0, 0, 0, 25, 0, 0]))
    assert f.verdict == "cannot tell" and "id_profile cannot tell" in f.why and "5 distinct" in f.why
    rv = _view(ids, chi, std=0.05)
    rv.run.tables["layer_overlap"]["chance"] = 1.0  # 5 points: 4 candidates each, k = 10
    f = overlap_profile(rv)
    assert f.verdict == "untestable" and "1 by construction" in f.why
    rv.run.tables["layer_overlap"] = pd.DataFrame({"layer": range(6), "overlap_next": 0.5})
    f = overlap_profile(rv)
    assert f.verdict == "untestable" and "lacks overlap_next_std" in f.why
