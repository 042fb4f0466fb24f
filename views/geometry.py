"""Geometry (seed 004 Fig. 1): anisotropy, intrinsic dimension, participation ratio and the mean cosine
per layer, several runs on a relative-depth axis (encoders vs decoders); a layer's covariance spectrum."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from normvar_core.viz import geometry_figures as GF
from views import _ui

_ui.page_header("Geometry: anisotropy and intrinsic dimension across layers",
                "Exact over every embedding of a layer: the covariance spectrum (anisotropy λ₁/Σλ, participation "
                "ratio), the mean cosine between all pairs; TwoNN intrinsic dimension on a seeded sample of "
                "16,384 embeddings in batches of 4,096 (seed 004 §2.4). Dashed: seed 004's own anisotropy estimate, "
                "the mean ± std over batches of 4,096 — a batch holds few embeddings per direction, so it reads higher "
                "than the exact value over all embeddings.")
run = _ui.require_run()
_ui.require(run, "geometry", "layer geometry")
v = _ui.view()
chosen, relative = _ui.runs_to_overlay("Runs to overlay (encoder next to decoder)", "w_geo_runs",
                                       "w_geo_relative", True)
null_label, null_run = _ui.null_picker(run)

curves, depths, skipped, bands = {}, {}, [], {}
try:
    for name in chosen:
        r = _ui.open_run(name)
        if r is None:
            continue
        if not r.has("geometry"):
            why = r.skipped("geometry")
            skipped.append(f"{name} ({why})" if why else name)
            continue
        curves[name] = _ui.table(r, "layer_geometry")
        if r.has("intervals"):
            bands[name] = _ui.table(r, "intervals")
        depths[name] = _ui.num_hidden_states(r)
    null_curves = {}
    if null_run is not None and null_run.has("layer_geometry"):
        null_curves[null_label] = _ui.table(null_run, "layer_geometry")
        depths[null_label] = _ui.num_hidden_states(null_run)
    fig = GF.geometry_profiles(curves, relative=relative, num_hidden_states=depths, presentation=v.presentation,
                               title="Layer geometry (seed 004, Fig. 1)", null_curves=null_curves,
                               bands=bands)
except Exception as err:  # noqa: BLE001
    _ui.show_error(err)
    st.stop()
if null_run is not None and not null_curves:
    st.caption(f"{null_label} has no geometry: draw it again (nulls of runs with the layer geometry carry it).")
if skipped:
    st.caption("Without geometry (recompute to include): " + ", ".join(skipped))
data = pd.concat([df.assign(run=n) for n, df in curves.items()], ignore_index=True)
_ui.chart(fig, key="geometry", data=data, name=f"{run.name}_geometry")

layer = _ui.layer_slider(run)
try:
    spec = GF.spectrum_figure(_ui.table(run, "layer_spectrum"), layer, presentation=v.presentation,
                              title=f"{run.name} · covariance spectrum at layer {layer}")
except Exception as err:  # noqa: BLE001
    _ui.show_error(err)
    st.stop()
_ui.chart(spec, key="spectrum", data=_ui.table(run, "layer_spectrum").query("layer == @layer"),
          name=f"{run.name}_spectrum_layer{layer}")
with st.expander("Table (layer_geometry)"):
    st.dataframe(data, hide_index=True, width="stretch")
_ui.sync_url("geometry")
