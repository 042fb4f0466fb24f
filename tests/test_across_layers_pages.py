"""The measures across layers on the shipped novels (the dashboard tests' real MiniLM run, with the neighbourhoods
and the layer linearity): the Geometry page draws the linear CKA and the linearity score per pair of consecutive
layers with the sentence that says how to read them, and the neighbourhood overlap between layers with the overlap
against k beside the chance line k / n, each against the run file's own table read with DuckDB alone; the findings
state ``layers_linear`` and ``overlap_profile`` with an interval, or "cannot tell" with the reason, as an independent
reading of the same tables decides them. And the chance line is the Gaussian null's overlap: two independent
Gaussian layers share k / n of their k nearest neighbours."""

from __future__ import annotations

import numpy as np
import pytest
from dashboard_run import RUN, arr, figure, open_page, open_section, trace
from runfiles import query
from scipy.stats import t as t_dist

from normvar_core.pipeline.measures.layer_linearity import LayerLinearityMeasure
from normvar_core.stats import overlap
from normvar_core.stats.bootstrap import T1_95
from normvar_core.stats.findings import CLAIM_IDS, cell, findings


@pytest.fixture(scope="module")
def tables(data_dir):
    path = data_dir / "runs" / f"{RUN}.duckdb"
    return {
        t: query(path, f"SELECT * FROM {t}")
        for t in ("layer_linearity", "layer_overlap", "overlap_curve", "layer_geometry")
    }


@pytest.mark.parametrize("curve", LayerLinearityMeasure.curves, ids=lambda c: c.column)
def test_geometry_page_draws_the_linearity_curves_with_their_sentence(app, run, tables, curve):
    at = open_section(open_page(app, "geometry"), "geometry", curve.title)
    fig = figure(at, curve.title)
    title = fig["layout"]["title"]["text"]
    assert curve.description and curve.description in title  # how to read it, under the title
    want = tables["layer_linearity"].sort_values("layer")
    line = trace(fig, RUN)
    np.testing.assert_allclose(arr(line["y"]), want[curve.column].to_numpy(), rtol=0, atol=1e-12)
    H = run.num_hidden_states - 1
    np.testing.assert_allclose(arr(line["x"]), want["layer"].to_numpy() / H, atol=1e-12)  # relative depth of layer l
    assert 0 < want[curve.column].min() and want[curve.column].max() <= 1  # a score and a CKA in (0, 1]
    band = [t for t in fig["data"] if t.get("fill") == "tonexty"]  # the split-half interval of the table
    assert len(band) == 1
    lo_hi = np.concatenate(
        [
            arr(t["y"])
            for t in fig["data"]
            if t.get("legendgroup") == band[0].get("legendgroup") and t.get("name") != RUN
        ]
    )
    for col in (f"{curve.column}_low", f"{curve.column}_high"):
        assert all(np.isclose(lo_hi, v, atol=1e-12).any() for v in want[col])


def test_overlap_tab_draws_the_profile_and_the_curve_over_k_beside_chance(app, tables):
    at = open_section(open_page(app, "geometry"), "geometry", "Neighbourhoods")
    prof = figure(at, "Neighbourhood overlap between layers")
    o = tables["layer_overlap"].sort_values("layer")
    np.testing.assert_allclose(arr(trace(prof, f"{RUN} (next layer)")["y"]), o["overlap_next"].to_numpy(), atol=1e-12)
    np.testing.assert_allclose(arr(trace(prof, f"{RUN} (chance: Gaussian null)")["y"]), o["chance"].to_numpy())
    title = prof["layout"]["title"]["text"]
    assert "k / n" in title and "independent" in title  # the null's closed form, in words

    fig = figure(at, "Neighbourhood overlap against k")
    c = tables["overlap_curve"]
    nxt = c[c["pair"] == "next"]
    layers = sorted(nxt["layer"].unique())
    drawn = [t for t in fig["data"] if str(t.get("name", "")).startswith("layer ")]
    assert 2 <= len(drawn) // 2 <= 4 and len(drawn) % 2 == 0  # up to four layers, unmasked and masked
    for t in drawn:
        layer = int(t["name"].split()[1])
        masked = "other sentences" in t["name"]
        want = nxt[(nxt["layer"] == layer) & (nxt["masked"] == masked)].sort_values("k")
        assert layer in layers and f"→ {int(want['to_layer'].iloc[0])}" in t["name"]
        np.testing.assert_allclose(arr(t["x"]), want["k"].to_numpy())
        np.testing.assert_allclose(arr(t["y"]), want["overlap"].to_numpy(), atol=1e-12)
        np.testing.assert_allclose(arr(t["error_y"]["array"]), want["overlap_std"].to_numpy(), atol=1e-12)
    chance = trace(fig, f"{RUN} (chance k / n: Gaussian null)")
    g = tables["layer_geometry"]
    K, B = int(g["id_sample"].max()), int(g["twonn_batches"].max())
    n = 1 / (arr(chance["y"]) / np.asarray(overlap.KS))  # chance = k · mean(1 / n_i): one n for all k
    np.testing.assert_allclose(arr(chance["x"]), overlap.KS)
    np.testing.assert_allclose(n, n[0], rtol=1e-12)
    assert K // B - 1 <= n[0] <= -(-K // B) - 1  # n_i = its batch's other points
    # the y axis spans the data (with their bars), not the chance line far below; chance is said in words
    lo = min(float(np.min(arr(t["y"]) - arr(t["error_y"]["array"]))) for t in drawn)
    y0, y1 = fig["layout"]["yaxis"]["range"]
    assert (
        y0 <= lo and y0 > float(np.max(arr(chance["y"]))) and y1 <= 1.0 and fig["layout"]["yaxis"].get("type") != "log"
    )
    [note] = [a["text"] for a in fig["layout"]["annotations"] if a["text"].startswith("chance k / n")]
    assert f"at k = {overlap.KS[0]}" in note and f"at k = {overlap.KS[-1]}" in note
    # the log axis of k labels whole decades only
    xa = fig["layout"]["xaxis"]
    assert [t for t in xa["ticktext"] if t] == ["1", "10"] and len(xa["tickvals"]) == len(overlap.KS)
    # at k = 10 the curve is the profile's value
    at10 = nxt[(nxt["k"] == overlap.K_DEFAULT) & ~nxt["masked"].astype(bool)].set_index("layer")["overlap"]
    np.testing.assert_allclose(at10.to_numpy(), o.set_index("layer").loc[at10.index, "overlap_next"], atol=1e-12)


def _linear_expected(tables, H: int):
    """The claim from the table by hand: the middle pairs' mean cross-fitted score, the interval from its
    low end (± t₁ half the folds' gap) to the in-sample score's high end (± t₁ half the halves' gap)."""
    t = tables["layer_linearity"]
    mid = t[(t["next_layer"] == t["layer"] + 1) & (t["layer"] / H >= 0.25) & (t["next_layer"] / H <= 0.75)]
    val, ins = mid["linearity_xfit"].mean(), mid["linearity"].mean()
    lo = val - T1_95 * abs(mid["linearity_xfit_ab"].mean() - mid["linearity_xfit_ba"].mean()) / 2
    hi = min(ins + T1_95 * abs(mid["linearity_a"].mean() - mid["linearity_b"].mean()) / 2, 1.0)
    verdict = "cannot tell" if lo < 0.95 < hi else ("holds" if val < 0.95 else "fails")  # an encoder: holds below
    return val, (lo, hi), verdict, len(mid)


def test_findings_state_the_claims_across_layers_with_an_interval(app, run, tables):
    f = {x.id: x for x in findings(run)}
    val, iv, verdict, pairs = _linear_expected(tables, run.num_hidden_states - 1)
    lin = f["layers_linear"]
    assert pairs == 2 and lin.verdict == verdict and lin.interval is not None
    assert lin.value == pytest.approx(val, abs=1e-12)
    np.testing.assert_allclose(lin.interval, iv, atol=1e-12)
    assert "encoder: holds when <" in lin.why and "cross-fitted" in lin.why and "embeddings per dimension" in lin.why

    prof = f["overlap_profile"]
    if f["id_profile"].verdict == "cannot tell":  # the novels' TwoNN peak is biased by context: no anchor
        assert prof.verdict == "cannot tell" and prof.interval is None and "id_profile cannot tell" in prof.why
        assert prof.layer == f["id_profile"].layer
        return
    g = tables["layer_geometry"].sort_values("layer")
    o = tables["layer_overlap"].sort_values("layer").reset_index(drop=True)
    p = int(np.argmax(g["twonn_id"].to_numpy()))  # id_profile's peak
    assert prof.layer == int(o["layer"][p])
    after = o["overlap_next"].to_numpy()[p + 1 : -1]
    assert after.size  # the novels' peak has layers after it
    val = after.mean() - o["overlap_next"][p]
    B = int(g["twonn_batches"].max())
    std = o["overlap_next_std"].to_numpy()
    half = t_dist.ppf(0.975, B - 1) * np.sqrt((std[p] ** 2 + np.sum(std[p + 1 : -1] ** 2) / after.size**2) / (B - 1))
    assert B >= 2 and half > 0  # an interval over the batches
    assert prof.value == pytest.approx(val, abs=1e-12)
    np.testing.assert_allclose(prof.interval, [val - half, val + half], atol=1e-12)
    want = "cannot tell" if val - half < 0 < val + half else ("holds" if val > 0 else "fails")
    assert prof.verdict == want and f"χ₁₀ to the next layer there {o['overlap_next'][p]:.3f}" in prof.why

    at = open_page(app, "findings")
    table = at.dataframe[0].value
    assert list(table["id"]) == list(CLAIM_IDS)
    rows = table.set_index("id")[RUN]
    for cid in ("layers_linear", "overlap_profile"):
        assert rows[cid] == cell(f[cid]) and (f[cid].interval is not None or rows[cid].startswith("cannot tell"))
        if f[cid].interval is not None:
            assert f"[{cell(f[cid]).split('[')[1]}" in rows[cid]
    said = " ".join(m.value for m in at.markdown)
    assert "without the residual" in said and "χ₁₀ to the next layer" in said  # the reasons, in words


def test_two_independent_gaussian_layers_share_k_over_n_neighbours():
    """The chance column is the overlap of a Gaussian null whose layers are drawn independently: over repeated
    draws of two independent isotropic clouds of the same points, the mean χ_k equals k / (N − 1) within 4
    standard errors of the repeats, at every k."""
    N, d, reps = 400, 16, 30
    rng = np.random.default_rng(7)
    chis = []
    for _ in range(reps):
        lists = []
        for _layer in range(2):
            X = rng.standard_normal((N, d))
            D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
            np.fill_diagonal(D, np.inf)
            lists.append(np.argsort(D, axis=1, kind="stable")[:, : max(overlap.KS)])
        chis.append(overlap.shared(*lists).mean(1) / np.asarray(overlap.KS))
    chis = np.asarray(chis)
    want = overlap.chance(np.full(N, N - 1))
    np.testing.assert_allclose(want, np.asarray(overlap.KS) / (N - 1), rtol=1e-12)
    se = chis.std(0, ddof=1) / np.sqrt(reps)
    assert np.all(np.abs(chis.mean(0) - want) <= 4 * se + 1e-12), (chis.mean(0), want, se)


def test_compare_draws_the_id_across_scales_and_the_overlap(app, tables):
    """Compare draws the ID across scales and the neighbourhood overlap (with the overlap against k under it), each
    chosen in its More curves tab, over the runs that hold it and naming the one that does not."""
    from dashboard_run import RUN2

    at = open_page(app, "compare", run2=RUN2)
    at = open_section(at, "compare", "ID across scales")
    fig = figure(at, "ID across scales")
    g = tables["layer_geometry"]
    gride = [t for t in fig["data"] if str(t.get("name", "")).startswith("layer ")]  # RUN's alone: RUN2 has none
    assert gride and not any(RUN2 in str(t.get("name", "")) for t in fig["data"])
    at = open_section(at, "compare", "Neighbourhood overlap")
    prof = figure(at, "Neighbourhood overlap between layers")
    o = tables["layer_overlap"].sort_values("layer")
    np.testing.assert_allclose(arr(trace(prof, f"{RUN} (next layer)")["y"]), o["overlap_next"].to_numpy(), atol=1e-12)
    assert figure(at, "Neighbourhood overlap against k") and len(g)
