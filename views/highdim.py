"""High-dimensional geometry (seed 003): what plain Gaussians in R^d would show, next to the run —
the spread of the norm against 1/√(2d), the mean cosine against what one shared offset explains,
the cosines of random pairs against N(0, 1/d), and M(X_t)/V(X_t) against 1/(n_t − 1)."""

from __future__ import annotations

import streamlit as st

from normvar_core.runs.null import nulls_of
from normvar_core.viz import highdim_figures as HF
from normvar_core.viz.overlay import null_label
from views import _chrome, _data, _state

run, v = _chrome.run_page(
    "High-dimensional geometry: the run next to its Gaussian nulls",
    "Seed 003: radii of Gaussians concentrate (relative width ≈ 1/√(2d)); a random offset moves the "
    "radius and raises every cosine to ≈ M(X)/Q(X), nothing more; two random vectors are nearly "
    "orthogonal; and the mean of n_t random draws is small, M/V ≈ 1/(n_t − 1). Where the run departs "
    "from its nulls, the model — not the dimension — is speaking.",
)
nulls = nulls_of(_data.runs_table(), run.name)
c1, c2 = st.columns([3, 2])
with c1:
    _state.bind("w_highdim_nulls", nulls, lambda x: isinstance(x, list) and all(n in nulls for n in x))
    picked = st.multiselect(
        "Gaussian nulls",
        nulls,
        key="w_highdim_nulls",
        help="the published nulls of this run (Runs page button or `normvar null RUN --kind ...`)",
    )
with c2:
    band = _state.band_slider(run)
if not nulls:
    st.info(
        "This run has no Gaussian null yet: draw one on **Runs** (or `normvar null RUN --kind isotropic`) "
        "to see it next to the run. The references 1/√(2d), M(X)/Q(X) and 1/(n_t − 1) are drawn anyway.",
        icon=":material/casino:",
    )

opened = {null_label(nr.meta): nr for nr in _data.opened_runs(picked).values()}


def _profiles() -> None:
    table = _data.highdim(run, band)
    null_tables = {lab: _data.highdim(nr, band) for lab, nr in opened.items()}
    prof = HF.highdim_profiles(
        table,
        null_tables,
        dim=run.dim,
        label=run.name,
        presentation=v.presentation,
        title=f"{run.name}: the high-dimensional baseline's checks per layer (d = {run.dim})",
    )
    if table["norm_cv"].isna().all():
        st.caption("Norm spread and mean cosine: not in this run (recompute with the layer geometry on).")
    _chrome.chart(prof, key="highdim_profiles", data=table, name=f"{run.name}_highdim")


def _cosines() -> None:
    if not run.has("pair_cosines"):
        st.caption("Random-pair cosines: not in this run (recompute with the layer geometry on).")
        return
    layer = _state.layer_slider(run)

    def at_layer(r):
        pairs = _data.table(r, "pair_cosines")
        return pairs.loc[pairs["layer"] == layer, "cosine"].to_numpy()

    cos = at_layer(run)
    ncos = {lab: at_layer(nr) for lab, nr in opened.items() if nr.has("pair_cosines")}
    fig = HF.pair_cosines_figure(
        cos,
        ncos,
        dim=run.dim,
        label=run.name,
        presentation=v.presentation,
        title=f"Cosines of {len(cos):,} random pairs, layer {layer}",
    )
    _chrome.chart(fig, key="highdim_cosines", data=None, name=f"{run.name}_pair_cosines_layer{layer}")


def _mv() -> None:
    layer = _state.layer_slider(run)
    pts = _data.band_points(run, layer, band)
    npts = {lab: _data.band_points(nr, layer, band) for lab, nr in opened.items()}
    fig = HF.mv_scatter(
        pts, npts, label=run.name, presentation=v.presentation, title=f"M(Xₜ)/V(Xₜ) against nₜ, layer {layer}"
    )
    _chrome.chart(
        fig, key="highdim_mv", data=pts[["token_id", "token", "n", "m", "v"]], name=f"{run.name}_m_over_v_layer{layer}"
    )


_chrome.draw_sections(
    "highdim",
    {
        "profiles": ("Seed 003's checks per layer", _profiles),  # only the open tab
        "cosines": ("Random-pair cosines", _cosines),
        "mv": ("M/V against nₜ", _mv),
    },
)
with (table_box := _chrome.lazy_expander("Table", key="highdim_table")):
    try:
        if table_box.open:
            st.dataframe(
                _data.highdim(run, band).assign(norm_spread_gaussian=1 / (2 * run.dim) ** 0.5),
                hide_index=True,
                width="stretch",
            )
    except Exception as err:
        _chrome.show_error(err)
_state.sync_url("highdim")
