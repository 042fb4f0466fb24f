"""Frequency (the study's Fig. 7, 9-17): Q, M, V against log10 n_t, slopes per layer, histograms."""

from __future__ import annotations

import streamlit as st

from normvar_core.viz import geometry_figures as GF
from normvar_core.viz.frequency_figures import corpus_histograms, frequency_scatter, frequency_slopes, histograms_figure
from normvar_core.viz.selection import MAX_POINTS, downsample
from views import _chrome, _data, _sections, _state
from views._run_cache import per_run_version

run, v = _chrome.run_page(
    "Frequency: Q, M and V against log₁₀ n_t",
    "Frequent tokens sit closer to the origin (M falls) and spread more (V rises), while Q stays "
    "nearly flat (Fig. 7, App. F). Regressions use the types inside the band.",
)
ctl = _state.page_controls(run, layer=True, band=True, pool=True, null=True, extra=[1])
layer, band, pool, null_label, null_run = ctl.layer, ctl.band, ctl.pool, ctl.null_label, ctl.null_run
with ctl.extra[0]:
    _state.bind("w_freq_raw", False)
    log_y = not st.toggle(
        "Raw values (Fig. 7)",
        key="w_freq_raw",
        help="off: log₁₀(1 + Z), the scale of the regressions (App. F); on: Q, M, V themselves",
    )


@per_run_version(64)
def _scatter(
    run,
    layer: int,
    band,
    pool: bool,
    log_y: bool,
    presentation: bool,
    null_name,
    null_version,
    null_text: str,
):
    """The page's first figure, built once per (run version, view): the null run comes by name and
    file version, so a recomputed null is drawn again."""
    regs = _data.frequency_regressions(run, band, pool)
    points = _data.band_points(run, layer, band, pool)
    drawn, total = downsample(points, MAX_POINTS)
    null_run = _data.open_run(null_name) if null_name else None
    null_points = downsample(_data.band_points(null_run, layer, band, pool), MAX_POINTS)[0] if null_run else None
    return frequency_scatter(
        drawn,
        regs,
        layer=layer,
        log_y=log_y,
        total=total,
        presentation=presentation,
        null_points=null_points,
        null_label=null_text,
        title=f"{run.name} · layer {layer} (Fig. 7, 11–13)",
    )


@per_run_version(16)
def _corpus(run, presentation: bool):
    return corpus_histograms(
        run.sentence_length_hist(), run.frequency_hist(), presentation=presentation, title="The corpus (Fig. 9, 10)"
    )


def _scatter_tab() -> None:
    points = _data.band_points(run, layer, band, pool)
    scatter = _scatter(
        run,
        layer,
        band,
        pool,
        log_y,
        v.presentation,
        null_run.name if null_run else None,
        tuple(null_run.version) if null_run else None,
        null_label or "",
    )
    _chrome.chart(
        scatter,
        key="freq_scatter",
        data=points[["token_id", "token", "n", "log10_n", "q", "m", "v"]],
        name=f"{run.name}_frequency_layer{layer}",
    )


def _slopes_tab() -> None:
    regs = _data.frequency_regressions(run, band, pool)
    null_regs = _data.frequency_regressions(null_run, band, pool) if null_run is not None else None
    slopes = frequency_slopes(
        regs,
        presentation=v.presentation,
        null_regs=null_regs,
        null_label=null_label or "",
        title="Slope on log₁₀ nₜ per layer (Fig. 17)",
    )
    _chrome.chart(slopes, key="freq_slopes", data=regs, name=f"{run.name}_frequency_slopes")


def _histograms_tab() -> None:
    hist = _data.histograms(run, layer, band, pool=pool)
    hfig = histograms_figure(hist, presentation=v.presentation, title=f"Histograms at layer {layer} (Fig. 14–16)")
    _chrome.chart(hfig, key="freq_hist", data=hist, name=f"{run.name}_histograms_layer{layer}")


def _selfsim_tab() -> None:
    if not run.has("selfsim"):
        st.caption(
            f"Self-similarity: {run.skipped('selfsim') or 'not in this run (recompute with `--self-similarity on`)'}."
        )
        return
    ss = _data.table(run, "token_selfsim")
    ss = ss[ss["layer"] == layer].merge(run.tokens()[["token_id", "token"]], on="token_id", how="left")
    sfig = GF.selfsim_scatter(
        ss, presentation=v.presentation, title=f"Self-similarity against log₁₀ nₜ, layer {layer} (exact)"
    )
    _chrome.chart(sfig, key="freq_selfsim", data=ss, name=f"{run.name}_selfsim_layer{layer}")


# the page's figures (viz.page_figures: the moments' four, self-similarity): only the open tab is drawn
_sections.draw(
    "frequency",
    {
        "scatter": _scatter_tab,
        "slopes": _slopes_tab,
        "histograms": _histograms_tab,
        "corpus": lambda: _chrome.chart(
            _corpus(run, v.presentation), key="corpus_hist", data=None, name=f"{run.name}_corpus"
        ),
        "selfsim": _selfsim_tab,
    },
    _sections.Overlay(runs={run.name: run}, presentation=v.presentation, name=run.name),
)
_state.sync_url("frequency")
