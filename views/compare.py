"""Compare two runs: Fig. 4 and Fig. 5/6 curves on a relative-depth axis, the trade-off scatter
of each at a matched relative depth, the layer geometry and the per-layer curves that the runs' measures declare
(``page_figures.declared_figures``, drawn by ``views/_sections.generic``) — each in its own tab, computed only when
open."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from normvar_core.stats import layer_geometry as G
from normvar_core.stats import twonn_context
from normvar_core.stats.claims_geometry import id_profile_of
from normvar_core.stats.findings import cell
from normvar_core.viz import depth
from normvar_core.viz.decomposition_figures import decomposition_compare
from normvar_core.viz.geometry_figures import geometry_profiles
from normvar_core.viz.overlay import runs_in_order
from normvar_core.viz.page_figures import OVERLAP, SCALES, declared_figures, holds
from normvar_core.viz.selection import MAX_POINTS, downsample, fit_row
from normvar_core.viz.shared_axes import share_ranges
from normvar_core.viz.tradeoff_figures import layers_figure, tradeoff_scatter
from views import _chrome, _data, _sections, _state

run_a, v = _chrome.run_page(
    "Compare two runs",
    "Curves on a relative-depth axis (layer / number of layers) so that models of different depth "
    "line up; the scatters show each run at the layer closest to the chosen depth.",
)
names = runs_in_order(_data.runs_table())  # real runs first, each Gaussian null under its run
others = [n for n in names if n != run_a.name]  # the run itself is no second run
if not others:
    st.info(f"Only one run ({run_a.name}) is published: compute a second one on **New run** to compare.")
    st.stop()

c1, c2, c3 = st.columns([2, 2, 2])
with c1:
    _state.bind("w_run2", v.run2 if v.run2 in others else others[0], lambda x: x in others)
    v.run2 = st.selectbox(
        "Compare with", others, key="w_run2", help="real runs first, each Gaussian null under its run"
    )
with c2:
    _state.bind("w_depth", 0.5 if v.depth is None else float(v.depth))
    v.depth = st.slider("Relative depth", 0.0, 1.0, step=0.05, key="w_depth")
with c3:
    band = _state.band_slider(run_a)

run_b = _data.open_run(v.run2)
if run_b is None:
    st.info("Pick a second run.")
    st.stop()
label_a, label_b = run_a.name, run_b.name if run_b.name != run_a.name else run_b.name + " (2)"
depths = {label_a: run_a.num_hidden_states, label_b: run_b.num_hidden_states}
try:
    la = depth.layer_at_depth(run_a.layers, v.depth, run_a.num_hidden_states)
    lb = depth.layer_at_depth(run_b.layers, v.depth, run_b.num_hidden_states)
except Exception as err:
    _chrome.show_error(err)
    st.stop()

_chrome.report_button([run_a, run_b], key="w_report_compare")
# The TwoNN notes (sample sizes, same-sentence neighbours) sit in the one tab that plots TwoNN: "Layer geometry".


def _layers() -> None:
    fits_a, fits_b = _data.tradeoff(run_a, band), _data.tradeoff(run_b, band)
    fig = layers_figure(
        {label_a: fits_a, label_b: fits_b},
        relative=True,
        num_hidden_states=depths,
        mark_layer={label_a: la, label_b: lb},
        presentation=v.presentation,
        title="Fig. 4 on a relative-depth axis",
    )
    _chrome.chart(
        fig,
        key="cmp_layers",
        data=pd.concat([fits_a.assign(run=label_a), fits_b.assign(run=label_b)], ignore_index=True),
        name=f"compare_{run_a.name}_{run_b.name}_layers",
    )


def _ratios() -> None:
    dec_a, dec_b = _data.decomposition(run_a, band), _data.decomposition(run_b, band)
    fig = decomposition_compare(
        {label_a: dec_a, label_b: dec_b},
        relative=True,
        num_hidden_states=depths,
        presentation=v.presentation,
        title="Fig. 5/6 ratios on a relative-depth axis",
    )
    _chrome.chart(
        fig,
        key="cmp_decomp",
        data=pd.concat([dec_a.assign(run=label_a), dec_b.assign(run=label_b)], ignore_index=True),
        name=f"compare_{run_a.name}_{run_b.name}_decomposition",
    )


def _geometry() -> None:
    """Both runs' layer geometry on relative depth (the Geometry page's figure): TwoNN solid (seed 004) and
    dash-dotted (cross-context), with what makes their TwoNN differ besides the model, in words."""
    if not (run_a.has("geometry") and run_b.has("geometry")):
        st.info("Both runs need the layer geometry (computed without --no-geometry) for this tab.")
        return
    curves = {label_a: _data.table(run_a, "layer_geometry"), label_b: _data.table(run_b, "layer_geometry")}
    if differ := G.samples_differ({label: G.recorded_sample(g) for label, g in curves.items()}):
        st.warning(differ)
    if differ := twonn_context.shares_differ(curves):
        st.warning(differ)
    for label, g in curves.items():
        if said := twonn_context.context_sentence(g):
            st.caption(f"{label}: {said}")
        if (f := id_profile_of(g)).details.get("context_split"):  # the Findings page's verdict, the same rule
            st.warning(f"{label}: TwoNN profile (claim id_profile): **{cell(f)}** — {f.details['context_split']}.")
    bands = {
        label: _data.table(r, "intervals") for label, r in ((label_a, run_a), (label_b, run_b)) if r.has("intervals")
    }  # the Geometry page's and the deck's split-half bands, the same figure
    fig = geometry_profiles(
        curves,
        relative=True,
        num_hidden_states=depths,
        presentation=v.presentation,
        bands=bands,
        title="Layer geometry on a relative-depth axis (TwoNN: solid the Razzhigaev et al. 2024 protocol's, "
        "dash-dotted cross-context)",
    )
    _chrome.chart(
        fig,
        key="cmp_geometry",
        data=pd.concat([g.assign(run=label) for label, g in curves.items()], ignore_index=True),
        name=f"compare_{run_a.name}_{run_b.name}_geometry",
    )


def _scatters() -> None:
    scat = []
    for r, layer in ((run_a, la), (run_b, lb)):
        pts = _data.band_points(r, layer, band)
        drawn, total = downsample(pts, MAX_POINTS)
        scat.append(
            (
                r,
                layer,
                pts,
                tradeoff_scatter(
                    drawn,
                    fit_row(_data.tradeoff(r, band), layer=layer),
                    total=total,
                    presentation=v.presentation,
                    height=480,
                    title=f"{r.name} · layer {layer} (depth {depth.relative_depth(layer, r.num_hidden_states):.2f})",
                ),
            )
        )
    share_ranges([fig for *_, fig in scat])  # the same axes and colour scale: the panels read across
    for i, (col, (r, layer, pts, fig)) in enumerate(zip(st.columns(2), scat)):
        with col:
            _chrome.chart(fig, key=f"cmp_scatter_{i}", data=pts, name=f"{r.name}_tradeoff_layer{layer}")


def _declared(f) -> None:
    """A figure drawn by the generic builder (a per-layer curve that a run's measure declares, the ID across scales,
    the neighbourhood overlap), over both runs (those without it named)."""
    pair = {label_a: run_a, label_b: run_b}
    bands = {lab: _data.table(r, "intervals") for lab, r in pair.items() if r.has("intervals")}
    _sections.generic(
        f,
        _sections.Overlay(
            runs=pair, bands=bands, presentation=v.presentation, name=f"compare_{run_a.name}_{run_b.name}"
        ),
    )


_chrome.draw_sections(
    "compare",
    {
        "layers": ("Fig. 4 on relative depth", _layers),  # only the open tab is computed
        "ratios": ("Fig. 5/6 ratios", _ratios),
        "scatters": ("Trade-off at the matched depth", _scatters),
        "geometry": ("Layer geometry", _geometry),
        # one tab for the rest, both runs: the ID across scales, the neighbourhood overlap (with the overlap against
        # k under it) and the curves the runs' measures declare
        **_sections.more_curves(
            "compare",
            tuple(f for f in (SCALES, OVERLAP) if holds(run_a, f) or holds(run_b, f))
            + declared_figures(None, [run_a, run_b]),
            _declared,
        ),
    },
)
_state.sync_url("compare")
