"""TwoNN's context bias (``stats.twonn_context``): the masked neighbour search against a brute force over all
pairs, the same-sentence share, the decimation partitions, and what the run's tables and findings hold.

* the search with a sentence's own points masked gives, for every point, the same r₁ and r₂ as a float64
  brute force over all allowed pairs, ties and far-off norms included; its unmasked part equals seed 004's
  search (the brute force of ``test_twonn_stream``) and its nearest own-sentence distance too;
* the same-sentence share is the brute force's share, exactly;
* the decimation draws seeded, nested subsets of m/k rows of each batch before the pass;
* too few distinct embeddings make the intrinsic-dimension profile "cannot tell".
"""

from __future__ import annotations

import numpy as np
import pytest
from brute import context_radii

from normvar_core.stats import twonn_context as C


def context_case(rng, trial):
    """Distinct float32 rows in groups (sentences): integer grids (many exact ties) on odd trials, Gaussian
    points with a few groups of near-identical rows and very different norms on even ones."""
    m, d = int(rng.integers(5, 220)), int(rng.integers(2, 24))
    if trial % 2:
        X = rng.integers(-2, 3, size=(m, d)).astype(np.float32)
    else:
        X = rng.standard_normal((m, d)).astype(np.float32) * rng.choice([1.0, 1e3], size=(m, 1)).astype(np.float32)
        X[: m // 4] = X[0] + 1e-3 * rng.standard_normal((m // 4, d)).astype(np.float32)  # one tight sentence
    X = np.unique(X, axis=0)
    X = X[rng.permutation(len(X))]
    groups = rng.integers(0, max(1, len(X) // 4), len(X))
    if trial % 2 == 0:
        groups[: len(X) // 5] = -1
    return X, groups


@pytest.mark.parametrize("trial", range(20))
def test_masked_search_equals_brute_force(trial):
    rng = np.random.default_rng(500 + trial)
    X, groups = context_case(rng, trial)
    every, cross, own = context_radii(X, groups)
    chunk = int(rng.integers(1, 64))
    got_every, got_cross, got_own = C.context_neighbours(X, groups, chunk=chunk)
    np.testing.assert_array_equal(got_every, every)
    np.testing.assert_array_equal(got_cross, cross)
    np.testing.assert_array_equal(got_own, own)
    unmasked, same_again, no_own = C.context_neighbours(X, None, chunk=chunk)
    np.testing.assert_array_equal(unmasked, every)
    assert same_again is unmasked and np.isinf(no_own).all()


def test_masked_search_with_every_pair_tied_and_wide_rows_equals_brute_force():
    """Every pair at one distance (scaled unit vectors: each row's candidates are all the others, past the
    kernel's first room for them) and a realistic width (d = 384, Gaussian rows in sentences): the same exact
    distances as the brute force."""
    rng = np.random.default_rng(44)
    tied = (3 * np.eye(120)).astype(np.float32)
    wide = rng.standard_normal((300, 384)).astype(np.float32)
    wide[:100] = wide[:100] + 4 * rng.standard_normal(384).astype(np.float32)  # one sentence apart
    for X, groups in ((tied, rng.integers(0, 30, 120)), (wide, rng.integers(0, 60, 300))):
        every, cross, own = context_radii(X, groups)
        for chunk in (7, 512):
            got_every, got_cross, got_own = C.context_neighbours(X, groups, chunk=chunk)
            np.testing.assert_array_equal(got_every, every)
            np.testing.assert_array_equal(got_cross, cross)
            np.testing.assert_array_equal(got_own, own)


def _nearest_two_rows(X):
    """Each row's two nearest other rows (indices), by a brute-force float64 search (ties: the lower index)."""
    Y = np.asarray(X, np.float64)
    D = np.sqrt(np.square(Y[:, None] - Y[None]).sum(-1))
    np.fill_diagonal(D, np.inf)
    nn = np.argsort(D, axis=1, kind="stable")[:, :2]
    return np.where(np.isfinite(np.take_along_axis(D, nn, 1)), nn, -1)


@pytest.mark.parametrize("trial", range(6))
def test_same_sentence_share_equals_brute_force(trial):
    rng = np.random.default_rng(900 + trial)
    X, groups = context_case(rng, 2 * trial)
    every, cross, own = context_radii(X, groups)
    share = float(np.mean(own < cross[:, 0]))
    got = C.batch_context(X, groups, every, _nearest_two_rows(X), batch=0)
    assert got["share"] == share
    # the unmasked fit of the batch is seed 004's
    assert got["curve"][1][0] == C.twonn_of(every)
    assert np.isnan(got["cross"]) and np.isnan(C.twonn_of(cross)) or got["cross"] == C.twonn_of(cross)


def test_one_point_per_sentence_masks_nothing_and_one_sentence_masks_everything():
    """Each point its own sentence: the cross-context search is seed 004's and the share is 0; every point in
    one sentence: no cross-context neighbour (inf), no estimate, and the share is 1."""
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(600, 6)).astype(np.float32)
    every, cross, own = C.context_neighbours(X, np.arange(600))
    np.testing.assert_array_equal(cross, every)
    got = C.batch_context(X, np.arange(600), every, _nearest_two_rows(X), batch=0)
    assert got["share"] == 0.0 and got["cross"] == C.twonn_of(every) and 4.5 < got["cross"] < 7.5
    every, cross, own = C.context_neighbours(X, np.zeros(600, int))
    assert np.isinf(cross).all() and (own == every[:, 0]).all()
    got = C.batch_context(X, np.zeros(600, int), every, _nearest_two_rows(X), batch=0)
    assert got["share"] == 1.0 and np.isnan(got["cross"])


@pytest.mark.parametrize("sizes", [[7], [512], [4096, 4100], [5000, 4096, 4096]])
def test_decimation_subsets_are_seeded_and_nested(sizes):
    """Each TwoNN batch of m rows: m // k rows of level ≥ k, the subsets nested (level ≥ 8 inside ≥ 4 inside
    ≥ 2), the same on every call, and another batch's draw not a copy of this one's."""
    tb = np.concatenate([np.full(m, t) for t, m in enumerate(sizes)])
    level = C.subset_levels(tb)
    np.testing.assert_array_equal(level, C.subset_levels(tb))
    assert set(np.unique(level)) <= set(C.DECIMATION)
    for t, m in enumerate(sizes):
        mine = level[tb == t]
        for k in C.DECIMATION:
            assert (mine >= k).sum() == m // k
    if len(sizes) > 1 and sizes[1] == sizes[0]:
        assert not np.array_equal(level[tb == 0], level[tb == 1])


def _view(geometry):
    """A RunView holding only a layer geometry table (what ``id_profile`` reads)."""
    from normvar_core.stats.claims import RunView

    z = np.zeros((0, 0))
    return RunView(
        name="r",
        layers=list(geometry["layer"]),
        num_hidden_states=len(geometry),
        is_decoder=False,
        norm_placement="post",
        is_null=False,
        exclude_position0=False,
        token_ids=np.zeros(0, int),
        n=z,
        q=z,
        m=z,
        v=z,
        layer_stats=None,
        halves=None,
        geometry=geometry,
        outliers=None,
    )


def _geometry(samples):
    """The ``layer_geometry`` rows seed 004's protocol writes (``layer_geometry.layer_row``) for per-layer samples."""
    import pandas as pd

    from normvar_core.stats import layer_geometry as G

    rows = []
    for li, X in enumerate(samples):
        cov = np.cov(X.T.astype(np.float64), bias=True)
        row, _ = G.layer_row(cov, X, n=len(X), sum_u_sq=1.0, n_u=len(X), norm_sum=1.0, sq_sum=1.0)
        rows.append({"layer": li, **row})
    return pd.DataFrame(rows)


def test_twonn_on_three_distinct_points_cannot_tell():
    """900 embeddings per layer holding 3 distinct points: TwoNN's fit on 3 points gives a number, and the
    id_profile verdict is "cannot tell", naming the layer and its distinct embeddings; 900 distinct ones decide."""
    from normvar_core.stats.claims_geometry import id_profile

    rng = np.random.default_rng(0)
    few = [np.repeat(rng.standard_normal((3, 16)), 300, 0).astype(np.float32) for _ in range(5)]
    got = id_profile(_view(_geometry(few)))
    assert got.verdict == "cannot tell" and "only 3 distinct embeddings of 900" in got.why
    many = [rng.standard_normal((900, 4 + 2 * min(i, 4 - i))).astype(np.float32) for i in range(5)]
    got = id_profile(_view(_geometry(many)))
    assert got.verdict == "holds" and "distinct" not in got.why


@pytest.mark.parametrize(
    "share, cross, want",
    [
        (0.44, [3.5, 9.0, 12.0, 16.2], "cannot tell"),  # biased and the estimates disagree: neither decides
        (0.44, [3.5, 12.0, 11.0, 8.0], "holds"),  # biased, but both peak inside: the verdict stands
        (0.04, [3.5, 9.0, 12.0, 16.2], "holds"),  # disagree, but no layer above 5 %: the protocol's decides
        (None, None, "holds"),  # a run file without the context columns
    ],
)
def test_twonn_verdict_follows_the_context_bias(share, cross, want):
    """The protocol's TwoNN peaks inside (layer 2 of 0..3: holds on its own). Where some layer's same-sentence
    share is above 5 % and the cross-context estimate gives the other verdict, id_profile is "cannot tell", its
    cell naming both estimates and its why the share and both verdicts; otherwise the protocol's verdict."""
    import pandas as pd

    from normvar_core.stats.claims_geometry import id_profile
    from normvar_core.stats.findings import cell

    g = pd.DataFrame(
        {"layer": [0, 1, 2, 3], "twonn_id": [3.5, 8.0, 9.9, 7.7], "twonn_id_std": 0.01, "twonn_batches": 2}
    )
    if share is not None:
        g = g.assign(twonn_id_cross=cross, same_sentence_nn=[0.01, 0.02, 0.05, share])
    got = id_profile(_view(g))
    assert got.verdict == want and got.layer == 2 and got.value == 9.9
    if want == "cannot tell":
        assert cell(got).startswith("cannot tell: 9.9 [") and cell(got).endswith(" @2 · cross-context 16.2 @3")
        assert "44% of the sampled tokens at layer 3" in got.why and "(holds on it)" in got.why
        assert "(fails on it, peak 16.2 at layer 3)" in got.why
    else:
        assert "cross-context" not in cell(got) and "disagree" not in got.why


def test_the_pages_words_follow_the_shares():
    """Above 5 % the caption names the layer, both estimates and the corpus size as the cause; Compare warns
    when two runs' largest shares differ by more than 5 points, and not otherwise."""
    import pandas as pd

    small = pd.DataFrame(
        {"layer": [0, 6], "twonn_id": [3.4, 8.4], "twonn_id_cross": [3.4, 16.4], "same_sentence_nn": [0.005, 0.348]}
    )
    large = small.assign(twonn_id=[3.4, 10.9], twonn_id_cross=[3.3, 16.3], same_sentence_nn=[0.002, 0.165])
    said = C.context_sentence(small)
    assert "layer 6" in said and "35%" in said and "8.4" in said and "16.4" in said and "corpus is small" in said
    assert C.context_sentence(small.assign(same_sentence_nn=[0.01, 0.05])) is None
    assert C.context_sentence(small.drop(columns="same_sentence_nn")) is None  # a run file from before
    warn = C.shares_differ({"a": small, "b": large})
    assert "a: 35%" in warn and "b: 16%" in warn and "cross-context" in warn
    assert C.shares_differ({"a": small, "b": small.assign(same_sentence_nn=[0.0, 0.30])}) is None


def test_seed_twonn_of_the_gaussian_run_is_scikit_dimensions_on_its_sample(written_run_path):
    """The seeded Gaussian run: seed 004's twonn_id at each layer is scikit-dimension's TwoNN on the distinct
    rows of the layer's sample (one batch of 1,106 points, replayed: the same seeded states and sample); the
    context columns and the decimation table are there, within their ranges."""
    import skdim
    from gaussian_runs import gaussian_pass

    from normvar_core.runs.reader import open_run

    run = open_run(written_run_path)
    g = run.table("layer_geometry").sort_values("layer")
    assert (g["twonn_id_std"] == 0).all() and (g["id_sample"] == 1106).all()
    geo = gaussian_pass(80)[3]["geometry"]
    assert np.unique(geo.neighbours.tb).size == 1
    for li, got in enumerate(g["twonn_id"]):
        uniq = np.unique(geo.sample[li].numpy().astype(np.float64), axis=0)
        # the same distances (exact float64 of float32 rows) fitted by another library: the fits' sums of logs
        # round in another order, ~1e-15 relative; rtol 1e-9 as in test_geometry
        np.testing.assert_allclose(got, skdim.id.TwoNN().fit(uniq).dimension_, rtol=1e-9)
    assert g["same_sentence_nn"].between(0, 1).all() and np.isfinite(g["twonn_id_cross"]).all()
    dec = run.table("twonn_decimation")
    assert sorted(set(dec["subsets"])) == [1, 2, 4, 8] and sorted(set(dec["size"])) == [138, 276, 553, 1106]
    full = dec[dec["subsets"] == 1].sort_values("layer")
    # the curve's full-batch point is the same number the layer row holds (one value written twice)
    np.testing.assert_array_equal(full["twonn_id"].to_numpy(), g["twonn_id"].to_numpy())


@pytest.mark.parametrize("seed", range(4))
def test_first_copies_renumber_numpy_unique(seed):
    """The batch's distinct rows (the geometry's ``first_copies``) are ``np.unique(X, axis=0)``'s, renumbered in
    order of first appearance: the same groups and the same first rows, -0.0 taken as 0.0 as the stream does."""
    from normvar_core.pipeline.measures.sample_lists import first_copies

    rng = np.random.default_rng(seed)
    base = rng.standard_normal((40, 5)).astype(np.float32)
    base[3] = -0.0
    X = base[rng.integers(0, 40, 300)] + np.float32(0.0)
    canon, firsts = first_copies(X)
    _, first, group = np.unique(X, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    assert canon.tolist() == rank[np.asarray(group).reshape(-1)].tolist()
    assert firsts.tolist() == first[order].tolist()
