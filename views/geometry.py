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
runs = _ui.runs_table()
names = runs["name"].tolist()

c1, c2 = st.columns([3, 1])
with c1:
    _ui.bind("w_geo_runs", [v.run], lambda x: isinstance(x, list) and all(n in names for n in x))
    chosen = st.multiselect("Runs to overlay (encoder next to decoder)", names, key="w_geo_runs",
                            help="the sidebar's run is always included")
with c2:
    _ui.bind("w_geo_relative", True)
    relative = st.toggle("Relative depth", key="w_geo_relative")
if v.run not in chosen:
    chosen = [v.run] + list(chosen)

curves, depths, skipped = {}, {}, []
try:
    for name in chosen:
        r = _ui.open_run(name)
        if r is None:
            continue
        if not r.has("geometry"):
            skipped.append(name)
            continue
        curves[name] = _ui.table(r, "layer_geometry")
        depths[name] = _ui.num_hidden_states(r)
    fig = GF.geometry_profiles(curves, relative=relative, num_hidden_states=depths, presentation=v.presentation,
                               title="Layer geometry (seed 004, Fig. 1)")
except Exception as err:  # noqa: BLE001
    _ui.show_error(err)
    st.stop()
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
