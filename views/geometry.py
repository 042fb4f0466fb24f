"""Geometry (seed 004 Fig. 1): anisotropy, intrinsic dimension, participation ratio and the mean cosine
per layer, several runs on a relative-depth axis (encoders vs decoders); a layer's covariance spectrum; and IsoScore
per layer and the curves the runs' measures declare for this page, drawn by ``views/_sections`` from
``viz.page_figures``."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from normvar_core.runs.null import nulls_of
from normvar_core.stats import layer_geometry as G
from normvar_core.stats import twonn_context
from normvar_core.stats.claims_geometry import id_profile_of
from normvar_core.stats.findings import cell
from normvar_core.viz import geometry_figures as GF
from normvar_core.viz.depth import layer_at_depth, nearest_layer, relative_depth
from normvar_core.viz.overlay import null_kind, null_source
from normvar_core.viz.overlay import null_label as null_label_of
from normvar_core.viz.table_words import TABLES, for_display
from views import _chrome, _data, _sections, _state

run, v = _chrome.run_page(
    "Geometry: anisotropy and intrinsic dimension across layers",
    "Exact over every embedding of a layer: the covariance spectrum (anisotropy λ₁/Σλ, participation "
    "ratio), the mean cosine between all pairs; TwoNN intrinsic dimension on a seeded sample of "
    "embeddings per layer (min(N, --id-sample); each run's own, below the chart) in batches of at least "
    "4,096 (Razzhigaev et al. 2024 protocol, §2.4). Dotted: the protocol's own anisotropy estimate, the mean ± std "
    "over the same "
    "batches — a batch holds few embeddings per direction, so it reads higher "
    "than the exact value over all embeddings. Dashed, in the colour of its run: a Gaussian null "
    "(high-dimensional baseline).",
    needs=("geometry", "layer geometry"),
)
chosen, relative = _state.runs_to_overlay(
    "Runs to overlay (encoder next to decoder)", "w_geo_runs", "w_geo_relative", True
)
null_label, null_run = _state.null_picker(run)
table = _data.runs_table()
kind = null_kind(v.null) if null_run is not None else None

curves, depths, skipped, bands = {}, {}, [], {}
null_curves, null_of, spectra_of = {}, {}, {}


def add_null(label: str, nr, parent: str) -> None:
    """A null run's layer geometry, drawn dashed in the colour of the run ``parent``."""
    if nr is not None and nr.has("layer_geometry") and label not in null_curves:
        null_curves[label], depths[label], null_of[label] = (
            _data.table(nr, "layer_geometry"),
            nr.num_hidden_states,
            parent,
        )
        spectra_of[label] = nr


try:
    for name, r in _data.opened_runs(chosen).items():
        parent = null_source(r.meta.get("source"))
        if parent is not None:  # a null picked among the runs: drawn as a null
            add_null(f"{parent} · {null_label_of(r.meta)}", r, parent)
            continue
        if not r.has("geometry"):
            why = r.skipped("geometry")
            skipped.append(f"{name} ({why})" if why else name)
            continue
        curves[name], depths[name], spectra_of[name] = _data.table(r, "layer_geometry"), r.num_hidden_states, r
        if r.has("intervals"):
            bands[name] = _data.table(r, "intervals")
        if kind is None:
            continue
        # the null of the same kind of every overlaid run (the sidebar's: the picked one)
        mine = [null_run.name] if name == run.name else [n for n in nulls_of(table, name) if null_kind(n) == kind]
        for nn in mine[:1]:
            nr = null_run if nn == null_run.name else _data.open_run(nn)
            if nr is not None:
                add_null(f"{name} · {null_label_of(nr.meta)}", nr, name)
except Exception as err:
    _chrome.show_error(err)
    st.stop()
if null_run is not None and not any(null_of.get(lab) == run.name for lab in null_curves):
    st.caption(f"{null_label} has no geometry: draw it again (nulls of runs with the layer geometry carry it).")
missing = [n for n in curves if n != run.name and kind and not any(null_of.get(l) == n for l in null_curves)]
if missing:
    st.caption(f"No {kind} null with geometry yet for: " + ", ".join(missing) + " (draw one on Runs).")
if skipped:
    st.caption("Without geometry (recompute to include): " + ", ".join(skipped))
log_key = "w_geo_log_null" if null_curves else "w_geo_log"  # on by default as soon as a null is drawn
_state.bind(log_key, bool(null_curves))  # kept while the spectrum's tab is open


def _overlay_data() -> pd.DataFrame:
    return pd.concat([df.assign(run=n) for n, df in {**curves, **null_curves}.items()], ignore_index=True)


def _profiles() -> None:
    log_y = st.toggle(
        "Log scale for intrinsic dimension and participation ratio",
        key=log_key,
        help="a Gaussian null's ID (~100) and participation ratio (~400) sit far above the real curves",
    )
    fig = GF.geometry_profiles(
        curves,
        relative=relative,
        num_hidden_states=depths,
        presentation=v.presentation,
        title="Layer geometry (Razzhigaev et al. 2024 protocol, Fig. 1)",
        null_curves=null_curves,
        null_of=null_of,
        log_y=log_y,
        bands=bands,
    )
    _chrome.chart(fig, key="geometry", data=_overlay_data(), name=f"{run.name}_geometry")
    st.caption(
        "; ".join(f"{n}: {G.sample_text(df)}" for n, df in curves.items())
        + " (the Razzhigaev et al. 2024 protocol's batches)."
    )
    differ = G.samples_differ({n: G.recorded_sample(df) for n, df in curves.items()})
    if differ:
        st.warning(differ)
    for n, df in curves.items():  # the context bias of small corpora, in words (dash-dotted: the cross-context TwoNN)
        if said := twonn_context.context_sentence(df):
            st.warning(f"{n}: {said}", icon=":material/info:")
        if (f := id_profile_of(df)).details.get("context_split"):  # the Findings page's verdict, the same rule
            st.warning(f"{n}: TwoNN profile (claim id_profile): **{cell(f)}** — {f.details['context_split']}.")
    if differ := twonn_context.shares_differ(curves):
        st.warning(differ)


def _spectrum() -> None:
    layer = _state.layer_slider(run)
    depth = relative_depth(layer, run.num_hidden_states)
    spectra, rows = {}, []
    for label, r in spectra_of.items():
        if not r.has("layer_spectrum"):
            continue
        at = layer_at_depth(r.layers, depth, r.num_hidden_states) if relative else nearest_layer(r.layers, layer)
        spec_t = _data.table(r, "layer_spectrum")
        spectra[label] = (spec_t, at)
        rows.append(spec_t[spec_t["layer"] == at].assign(run=label))
    where = f"depth {depth:.2f}" if relative and len(spectra) > 1 else f"layer {layer}"
    spec = GF.spectra_figure(
        spectra,
        presentation=v.presentation,
        nulls=list(null_curves),
        null_of=null_of,
        title=f"Covariance spectrum at {where}" + ("" if len(spectra) > 1 else f" · {run.name}"),
    )
    _chrome.chart(
        spec,
        key="spectrum",
        data=pd.concat(rows, ignore_index=True) if rows else None,
        name=f"{run.name}_spectrum_layer{layer}",
    )


# the page's figures (viz.page_figures: profiles, spectrum, IsoScore): only the open tab is drawn
_sections.draw(
    "geometry",
    {"profiles": _profiles, "spectrum": _spectrum},
    _sections.Overlay(
        runs={n: spectra_of[n] for n in curves},
        nulls={lab: spectra_of[lab] for lab in null_curves},
        null_of=null_of,
        bands=bands,
        relative=relative,
        presentation=v.presentation,
        name=run.name,
    ),
)
with (table_box := _chrome.lazy_expander(f"Table: {TABLES['layer_geometry']}", key="geometry_table")):
    if table_box.open:
        st.dataframe(for_display(_overlay_data()), hide_index=True, width="stretch")
_state.sync_url("geometry")
