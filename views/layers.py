"""Layers (the study's Fig. 4): C.V. of Q(X_t), slope and R^2 of V on M against layer."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from normvar_core.viz.tradeoff_figures import layers_figure
from views import _chrome, _data, _state

run, v = _chrome.run_page(
    "Layers: where the trade-off is strongest",
    "C.V. of Q(X_t) (left), slope (middle) and R² (right) of the regression of V(X_t) on M(X_t), "
    "per layer (Fig. 4). Where the C.V. is smallest, the slope approaches −1 and R² approaches 1. "
    "Bands: 95 % bootstrap intervals over token types (1,000 resamples).",
)
chosen, relative = _state.runs_to_overlay("Runs to overlay", "w_layers_runs", "w_relative", False)
ctl = _state.page_controls(run, band=True, pool=True, null=True)
band, pool = ctl.band, ctl.pool


@st.cache_resource(max_entries=32, show_spinner=False)
def _figure(
    key: tuple,
    band: tuple,
    pool: bool,
    relative: bool,
    presentation: bool,
    null_label,
    _curves,
    _bands,
    _depths,
    _null_curves,
):
    """Fig. 4 built once per (the drawn runs' file versions, view): the runs and their versions are the key,
    the curves (read from those versions) are not hashed."""
    return layers_figure(
        _curves,
        relative=relative,
        num_hidden_states=_depths,
        presentation=presentation,
        null_curves=_null_curves,
        bands=_bands,
    )


try:
    runs = _data.opened_runs(chosen)
    curves = {name: _data.tradeoff(r, band, pool) for name, r in runs.items()}
    bands = {name: _data.intervals(r, band, pool) for name, r in runs.items()}
    depths = {name: r.num_hidden_states for name, r in runs.items()}
    null_curves = {}
    if ctl.null_run is not None:
        null_curves[ctl.null_label] = _data.tradeoff(ctl.null_run, band, pool)
        depths[ctl.null_label] = ctl.null_run.num_hidden_states
    drawn_runs = [*runs.values(), *([ctl.null_run] if ctl.null_run is not None else [])]
    fig = _figure(
        tuple((r.name, str(r.path), tuple(r.version)) for r in drawn_runs),
        tuple(band),
        pool,
        relative,
        v.presentation,
        ctl.null_label,
        curves,
        bands,
        depths,
        null_curves,
    )
except Exception as err:
    _chrome.show_error(err)
    st.stop()

rows = [df.assign(run=name, model=runs[name].meta.get("model")) for name, df in curves.items()]
data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
_chrome.chart(fig, key="layers", data=data, name=f"{run.name}_layers")
with (table_box := _chrome.lazy_expander("Table", key="layers_table")):
    if table_box.open:
        st.dataframe(data, hide_index=True, width="stretch")
_state.sync_url("layers")
