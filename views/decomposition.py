"""Decomposition (the study's Fig. 5, 6, 18, 19, 20): Q(X) = M(X) + V_W(X) + V_B(X) per layer."""

from __future__ import annotations

import streamlit as st

from normvar_core.viz.decomposition_figures import decomposition_bars, decomposition_ratios, decomposition_raw
from normvar_core.viz.table_words import for_display
from views import _chrome, _data, _sections, _state

run, v = _chrome.run_page(
    "Decomposition of the whole embedding set X",
    "Q(X) = M(X) + V(X) and V(X) = V_W(X) + V_B(X) (within- and between-type variance), over the "
    "token types in the band. Deeper layers: M/Q grows (anisotropy) and V_W takes over from V_B "
    "(Fig. 5, 6).",
)
ctl = _state.page_controls(run, band=True, pool=True, null=True)
band, pool, null_label, null_run = ctl.band, ctl.pool, ctl.null_label, ctl.null_run

try:
    d = _data.decomposition(run, band, pool)
except Exception as err:
    _chrome.show_error(err)
    st.stop()
n_types = int(d["n_types"].iloc[0]) if len(d) else 0
st.caption(
    f"{n_types:,} token types, {_chrome.fmt_int(d['n'].iloc[0] if len(d) else 0)} embeddings per layer "
    f"with {10 ** band[0]:,.0f} ≤ n_t ≤ {10 ** band[1]:,.0f}"
)


def _layernorm_tables() -> None:
    """App. I: LayerNorm's prediction of Q per layer, and why it holds or fails."""
    ln = _data.layernorm(run, band)
    if ln is None:
        st.caption("App. I (LayerNorm's prediction of Q): not in this run — recompute it to record the norms' γ and β.")
        return
    if (ln["module"] == "").all():
        st.caption(
            "No stored hidden state is the output of a normalization (Pre-LN blocks without a final "
            "norm in the stored layers): LayerNorm predicts nothing here."
        )
    st.caption(
        "Q(X_t) ≈ ‖γ‖² + ‖β‖² where the hidden state is a norm's output (exact when γ is uniform); "
        "mean and C.V. of Q(X_t) over the types in the band. Empty module: a Pre-LN block's output."
    )
    st.dataframe(for_display(ln), hide_index=True, width="stretch", key="layernorm_table")
    why = _data.layernorm_attribution(run)
    if why is not None and len(why):
        st.caption(
            "Why it holds or fails, over all embeddings of each norm-output layer: "
            "Q(X) = Σ γᵢ² E zᵢ² + 2 Σ βᵢ(mᵢ − βᵢ) + ‖β‖² exactly, and App. I takes E zᵢ² = 1 in every "
            "coordinate. γ-weighting = Σ γᵢ² E zᵢ² / ‖γ‖² (1 if z spreads evenly); z energy = Σ E zᵢ²/d "
            "(1 for a norm output); top-5 share = the part of z's energy in its 5 largest coordinates, "
            "and their γᵢ² over the mean γᵢ² — below 1, the norm shrinks the coordinates z loads "
            "(outlier dimensions) and Q falls below ‖γ‖² + ‖β‖²."
        )
        st.dataframe(for_display(why), hide_index=True, width="stretch", key="layernorm_attribution")


def _shares() -> None:
    bars = decomposition_bars(
        d,
        presentation=v.presentation,
        title=f"{run.name}: shares of Q(X) per layer (Fig. 5) and V<sub>W</sub>/V (Fig. 6)",
    )
    _chrome.chart(bars, key="decomp_bars", data=d, name=f"{run.name}_decomposition")


def _ratios() -> None:
    nd = _data.decomposition(null_run, band, pool) if null_run is not None else None
    ratios = decomposition_ratios(
        d, presentation=v.presentation, title="Ratios to Q(X) (Fig. 18)", null=nd, null_label=null_label or ""
    )
    _chrome.chart(ratios, key="decomp_ratios", data=d, name=f"{run.name}_decomposition_ratios")


def _raw() -> None:
    log_y = st.toggle("Log scale for raw values", key="w_decomp_log")
    nd = _data.decomposition(null_run, band, pool) if null_run is not None else None
    ln = _data.layernorm(run, band)
    q_pred = ln.loc[ln["module"] != "", ["layer", "q_pred"]] if ln is not None else None
    raw = decomposition_raw(
        d,
        log_y=log_y,
        presentation=v.presentation,
        title="Raw values (Fig. 19, 20)",
        null=nd,
        null_label=null_label or "",
        q_pred=q_pred,
    )
    _chrome.chart(raw, key="decomp_raw", data=d, name=f"{run.name}_decomposition_raw")


_state.bind("w_decomp_log", False)  # kept while another tab is open (the toggle sits in "Raw values")
_sections.draw(
    "decomposition",
    {"shares": _shares},  # its figure (viz.page_figures), then its own tabs; only the
    extra={
        "ratios": ("Ratios to Q(X) (Fig. 18)", _ratios),  # open one is computed and drawn
        "raw": ("Raw values (Fig. 19, 20)", _raw),
        "layernorm": ("LayerNorm's prediction (App. I)", _layernorm_tables),
    },
)
with (table_box := _chrome.lazy_expander("Table", key="decomp_table")):
    if table_box.open:
        st.dataframe(for_display(d), hide_index=True, width="stretch")
_state.sync_url("decomposition")
