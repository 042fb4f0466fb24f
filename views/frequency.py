"""Frequency (the study's Fig. 7, 9-17): Q, M, V against log10 n_t, slopes per layer, histograms."""
from __future__ import annotations

import streamlit as st

from normvar_core.viz import figures
from normvar_core.viz import geometry_figures as GF
from views import _ui

_ui.page_header("Frequency: Q, M and V against log₁₀ n_t",
                "Frequent tokens sit closer to the origin (M falls) and spread more (V rises), while Q stays "
                "nearly flat (Fig. 7, App. F). Regressions use the types inside the band.")
run = _ui.require_run()
v = _ui.view()

c1, c2, c3, c4 = st.columns([2, 2, 2, 1])
with c1:
    layer = _ui.layer_slider(run)
with c2:
    band = _ui.band_slider(run)
    pool = _ui.pool_toggle()
with c3:
    null_label, null_run = _ui.null_picker(run)
with c4:
    _ui.bind("w_freq_raw", False)
    log_y = not st.toggle("Raw values (Fig. 7)", key="w_freq_raw",
                          help="off: log₁₀(1 + Z), the scale of the regressions (App. F); on: Q, M, V themselves")

try:
    regs = _ui.frequency_regressions(run, band, pool)
    points = _ui.band_points(run, layer, band, pool)
    drawn, total = figures.downsample(points, figures.MAX_POINTS)
    null_points = null_regs = None
    if null_run is not None:
        null_points, _ = figures.downsample(_ui.band_points(null_run, layer, band, pool), figures.MAX_POINTS)
        null_regs = _ui.frequency_regressions(null_run, band, pool)
    scatter = figures.frequency_scatter(drawn, regs, layer=layer, log_y=log_y, total=total,
                                        presentation=v.presentation, null_points=null_points,
                                        null_label=null_label or "",
                                        title=f"{run.name} · layer {layer} (Fig. 7, 11–13)")
    slopes = figures.frequency_slopes(regs, presentation=v.presentation, null_regs=null_regs,
                                      null_label=null_label or "",
                                      title="Slope on log₁₀ nₜ per layer (Fig. 17)")
    hist = _ui.histograms(run, layer, band, pool=pool)
    hfig = figures.histograms_figure(hist, presentation=v.presentation,
                                     title=f"Histograms at layer {layer} (Fig. 14–16)")
    corpus = figures.corpus_histograms(run.sentence_length_hist(), run.frequency_hist(),
                                       presentation=v.presentation, title="The corpus (Fig. 9, 10)")
except Exception as err:  # noqa: BLE001
    _ui.show_error(err)
    st.stop()

_ui.chart(scatter, key="freq_scatter", data=points[["token_id", "token", "n", "log10_n", "q", "m", "v"]],
          name=f"{run.name}_frequency_layer{layer}")
c1, c2 = st.columns(2)
with c1:
    _ui.chart(slopes, key="freq_slopes", data=regs, name=f"{run.name}_frequency_slopes")
with c2:
    _ui.chart(hfig, key="freq_hist", data=hist, name=f"{run.name}_histograms_layer{layer}")
_ui.chart(corpus, key="corpus_hist", data=None, name=f"{run.name}_corpus")
if run.has("selfsim"):
    try:
        ss = _ui.table(run, "token_selfsim")
        ss = ss[ss["layer"] == layer].merge(run.tokens()[["token_id", "token"]], on="token_id", how="left")
        sfig = GF.selfsim_scatter(ss, presentation=v.presentation,
                                  title=f"Self-similarity against log₁₀ nₜ, layer {layer} (exact)")
        _ui.chart(sfig, key="freq_selfsim", data=ss, name=f"{run.name}_selfsim_layer{layer}")
    except Exception as err:  # noqa: BLE001
        _ui.show_error(err)
else:
    st.caption(f"Self-similarity: {run.skipped('selfsim') or 'not in this run (recompute with `--self-similarity on`)'}.")
_ui.sync_url("frequency")
