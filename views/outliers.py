"""Outliers: outlier dimensions and massive activations — which dimensions, tokens and positions carry
the squared norm (decoders put activations 100–1000× the median on the first position)."""
from __future__ import annotations

import streamlit as st

from normvar_core.viz import geometry_figures as GF
from views import _ui

_ui.page_header("Outliers: massive activations and outlier dimensions",
                "Per layer and dimension, max |h| over every embedding relative to the layer's median dimension; "
                "the share of Q(X) = E‖x‖² carried by position 0 and by the largest dimensions; the largest "
                "activations with the token, sentence and position that carry them.")
run = _ui.require_run()
_ui.require(run, "outliers", "outlier statistics")
v = _ui.view()
try:
    heat = GF.outlier_heatmap(_ui.table(run, "dim_stats"), presentation=v.presentation)
    shares = GF.shares_figure(_ui.table(run, "layer_outliers"), presentation=v.presentation)
    top = _ui.table(run, "top_activations")
except Exception as err:  # noqa: BLE001
    _ui.show_error(err)
    st.stop()
_ui.chart(heat, key="outlier_heat", data=_ui.table(run, "dim_stats"), name=f"{run.name}_outlier_dims")
_ui.chart(shares, key="outlier_shares", data=_ui.table(run, "layer_outliers"), name=f"{run.name}_q_shares")
layer = _ui.layer_slider(run)
rows = top[top["layer"] == layer].sort_values("rank")
sents = run.sentences(rows["sentence_id"].tolist()) if run.has_contexts else {}
rows = rows.assign(sentence=[sents.get(int(s), "") for s in rows["sentence_id"]])
st.markdown(f"**Largest activations at layer {layer}**")
st.dataframe(rows[["rank", "value", "dim", "token", "position", "sentence_id", "sentence"]], hide_index=True,
             width="stretch", key="top_acts")
_ui.sync_url("outliers")
