"""Layers (the study's Fig. 4): C.V. of Q(X_t), slope and R^2 of V on M against layer."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from normvar_core.viz import figures
from views import _ui

_ui.page_header("Layers: where the trade-off is strongest",
                "C.V. of Q(X_t) (left), slope (middle) and R² (right) of the regression of V(X_t) on M(X_t), "
                "per layer (Fig. 4). Where the C.V. is smallest, the slope approaches −1 and R² approaches 1. "
                "Bands: 95 % bootstrap intervals over token types (1,000 resamples).")
run = _ui.require_run()
v = _ui.view()

chosen, relative = _ui.runs_to_overlay("Runs to overlay", "w_layers_runs", "w_relative", False)
c1, c2 = st.columns([2, 2])
with c1:
    band = _ui.band_slider(run)
    pool = _ui.pool_toggle()
with c2:
    null_label, null_run = _ui.null_picker(run)

curves, depths, rows, bands = {}, {}, [], {}
try:
    for name in chosen:
        r = _ui.open_run(name)
        if r is None:
            continue
        df = _ui.tradeoff(r, band, pool)
        curves[name] = df
        bands[name] = _ui.intervals(r, band, pool)
        depths[name] = _ui.num_hidden_states(r)
        rows.append(df.assign(run=name, model=r.meta.get("model")))
    null_curves = {}
    if null_run is not None:
        null_curves[null_label] = _ui.tradeoff(null_run, band, pool)
        depths[null_label] = _ui.num_hidden_states(null_run)
    fig = figures.layers_figure(curves, relative=relative, num_hidden_states=depths,
                                presentation=v.presentation, null_curves=null_curves, bands=bands)
except Exception as err:  # noqa: BLE001
    _ui.show_error(err)
    st.stop()

data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
_ui.chart(fig, key="layers", data=data, name=f"{run.name}_layers")
with st.expander("Table"):
    st.dataframe(data, hide_index=True, width="stretch")
_ui.sync_url("layers")
