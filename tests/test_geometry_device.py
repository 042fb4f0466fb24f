"""The geometry's finalize where its state is (``geometry_device``, a GPU run's path), run on the CPU's torch against
the host path on the same state, its TwoNN read from the lists searched after the pass (the neighbourhoods on: the
lists searched on the device too) or streamed: MiniLM over 300 sentences of the novels (one TwoNN batch; layer 0
holds copies), every ``layer_geometry`` column, the decimation rows, the spectra, the pair cosines and the lists
equal to float64 rounding; and the parts alone against the host's on cases with ties, copies and sentences."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from normvar_core.pipeline.measures import geometry_device as D


def _close(a, b, key):
    if isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), key
    elif isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        assert a == b, key
    else:
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), key


@pytest.mark.model
@pytest.mark.parametrize("neighbourhoods", [True, False])  # TwoNN read from the lists after the pass, or streamed
def test_the_device_finalize_equals_the_host_finalize(minilm_path, neighbourhoods):
    from test_twonn_stream import geometry_pass

    geo, _ = geometry_pass(300, 4096, neighbourhoods)
    host = geo.result()
    geo.device_finalize = True
    dev = geo.result()
    assert len(host["rows"]) == len(dev["rows"]) == 7
    assert host["rows"][0]["twonn_duplicates"] > 0  # layer 0: copies, dropped alike
    for a, b in zip(host["rows"], dev["rows"]):
        assert a.keys() == b.keys()
        for key in a:
            _close(a[key], b[key], (a["layer"], key))
    for a, b in zip(host["decimation"], dev["decimation"]):
        for key in a:
            _close(a[key], b[key], (a["layer"], a["subsets"], key))
    for a, b in zip(host["spectra"], dev["spectra"]):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12 * a.max())
    for a, b in zip(host["cosines"], dev["cosines"]):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-15)
    if neighbourhoods:  # the lists searched on the device are the host's
        np.testing.assert_array_equal(dev["lists"]["lists"], host["lists"]["lists"])
        for a, b in zip(host["lists"]["curves"], dev["lists"]["curves"]):
            np.testing.assert_allclose(np.asarray(b, float), np.asarray(a, float), rtol=1e-11, atol=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_canonical_rows_and_anisotropy_equal_the_hosts(seed):
    from normvar_core.pipeline.measures.knn_device import canonical_rows
    from normvar_core.pipeline.measures.sample_lists import first_copies
    from normvar_core.stats.layer_geometry import batch_anisotropy

    rng = np.random.default_rng(seed)
    base = rng.standard_normal((25, 7)).astype(np.float32)
    base[2] = 0.0
    X = base[rng.integers(0, 25, 160)]
    X[X == 0] = rng.choice([0.0, -0.0], size=int((X == 0).sum())).astype(np.float32)
    canon, firsts = canonical_rows(torch.from_numpy(X))
    want_canon, want_firsts = first_copies(X + np.float32(0.0))
    np.testing.assert_array_equal(canon, want_canon)
    np.testing.assert_array_equal(firsts, want_firsts)
    assert D.batch_anisotropy(torch.from_numpy(X)) == pytest.approx(batch_anisotropy(X), rel=1e-12)


def test_the_masked_search_equals_the_brute_force():
    """``masked_search`` on integer grids (ties) and sentences: every row's two nearest over all and over other
    sentences are the brute force's float64 distances (``brute.context_radii``), for the whole set and a subset."""
    from brute import context_radii

    rng = np.random.default_rng(3)
    X = np.unique(rng.integers(-2, 3, size=(200, 4)).astype(np.float32), axis=0)
    sent = rng.integers(0, 40, len(X))
    masked = D.masked_search(torch.from_numpy(X), sent)
    for idx in (np.arange(len(X)), np.sort(rng.choice(len(X), len(X) // 3, replace=False))):
        every, cross, _ = context_radii(X[idx], sent[idx])
        got_every, got_cross = masked(idx)
        np.testing.assert_allclose(got_every, every, rtol=1e-15)
        np.testing.assert_allclose(got_cross, cross, rtol=1e-15)
