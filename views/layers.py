"""Layers (the study's Fig. 4): C.V. of Q(X_t), slope and R^2 of V on M against layer."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from normvar_core.runs.null import nulls_of
from normvar_core.viz import figures
from views import _ui

_ui.page_header("Layers: where the trade-off is strongest",
                "C.V. of Q(X_t) (left), slope (middle) and R² (right) of the regression of V(X_t) on M(X_t), "
                "per layer (Fig. 4). Where the C.V. is smallest, the slope approaches −1 and R² approaches 1.")
run = _ui.require_run()
v = _ui.view()
runs = _ui.runs_table()
names = runs["name"].tolist()

c1, c2, c3, c4 = st.columns([3, 2, 1, 2])
with c1:
    _ui.bind("w_layers_runs", [v.run], lambda x: isinstance(x, list) and all(n in names for n in x))
    chosen = st.multiselect("Runs to overlay", names, key="w_layers_runs",
                            help="the sidebar's run is always included")
with c2:
    band = _ui.band_slider(run)
with c3:
    _ui.bind("w_relative", False)
    relative = st.toggle("Relative depth", key="w_relative",
                         help="x = layer / (number of layers): models of different depth line up")
with c4:
    nulls = nulls_of(runs, v.run)
    null_pick = st.selectbox("Gaussian null (seed 003)", ["none"] + nulls, key="w_layers_null",
                             help="dashed grey: the same token counts drawn from a Gaussian "
                                  "(`normvar null RUN`, or the button on Runs)")
if v.run not in chosen:
    chosen = [v.run] + list(chosen)

curves, depths, rows = {}, {}, []
try:
    for name in chosen:
        r = _ui.open_run(name)
        if r is None:
            continue
        df = _ui.tradeoff(r, band)
        curves[name] = df
        depths[name] = _ui.num_hidden_states(r)
        rows.append(df.assign(run=name, model=r.meta.get("model")))
    null_curves = {}
    if null_pick != "none":
        nr = _ui.open_run(null_pick)
        if nr is not None:
            label = "Gaussian null (" + str(nr.meta.get("source", "")).split(":")[1] + ")"
            null_curves[label] = _ui.tradeoff(nr, band)
            depths[label] = _ui.num_hidden_states(nr)
    fig = figures.layers_figure(curves, relative=relative, num_hidden_states=depths,
                                presentation=v.presentation, null_curves=null_curves)
except Exception as err:  # noqa: BLE001
    _ui.show_error(err)
    st.stop()

data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
_ui.chart(fig, key="layers", data=data, name=f"{run.name}_layers")
with st.expander("Table"):
    st.dataframe(data, hide_index=True, width="stretch")
_ui.sync_url("layers")
