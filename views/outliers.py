"""Outliers: outlier dimensions and massive activations — which dimensions, tokens and positions carry
the squared norm (decoders put activations 100–1000× the median on the first position)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from normvar_core.runs.siblings import excludes_position0, position0_sibling_config
from normvar_core.viz import geometry_figures as GF
from views import _access, _chrome, _data, _sections, _state

run, v = _chrome.run_page(
    "Outliers: massive activations and outlier dimensions",
    "Per layer and dimension, max |h| over every embedding relative to the layer's median dimension; "
    "the share of Q(X) = E‖x‖² carried by position 0 and by the largest dimensions; the largest "
    "activations with the token, sentence and position that carry them.",
    needs=("outliers", "outlier statistics"),
)


def _largest() -> None:
    layer = _state.layer_slider(run)
    top = _data.table(run, "top_activations")
    rows = GF.distinct_top(top[top["layer"] == layer])
    sents = run.sentences(rows["sentence_id"].tolist()) if run.has_contexts else {}
    rows = rows.assign(sentence=[sents.get(int(s), "") for s in rows["sentence_id"]])
    st.markdown(
        f"**Largest activations at layer {layer}** — one row per (token, position, dimension), at its "
        "largest |h| and the sentence that carries it"
    )
    st.dataframe(
        rows[["rank", "value", "dim", "token", "position", "sentence_id", "sentence"]],
        hide_index=True,
        width="stretch",
        key="top_acts",
    )


def _position0() -> None:
    other = _data.position0_sibling(run)
    if other is not None and other.has("geometry"):
        with_all, without = (other, run) if excludes_position0(run) else (run, other)
        curves = {
            f"{with_all.name} (all positions)": _data.table(with_all, "layer_geometry"),
            f"{without.name} (position 0 excluded)": _data.table(without, "layer_geometry"),
        }
        fig = GF.geometry_profiles(
            curves, relative=False, presentation=v.presentation, title="Layer geometry with and without position 0"
        )
        _chrome.chart(
            fig,
            key="geometry_pos0",
            data=pd.concat([df.assign(run=n) for n, df in curves.items()], ignore_index=True),
            name=f"{run.name}_geometry_position0",
        )
        return
    st.info(
        "No run of the same model, corpus and options with position 0 "
        f"{'included' if excludes_position0(run) else 'excluded'} yet: compute it to see how anisotropy, "
        "intrinsic dimension and the mean cosine change when the first position's massive activations are "
        "left out.",
        icon=":material/info:",
    )
    if (
        run.meta.get("options")
        and not _access.read_only()
        and st.button("Compute it (a worker job)", key="w_pos0_submit", icon=":material/rocket_launch:")
    ):
        from normvar_core.service.jobs import JobStore

        cfg = position0_sibling_config(run)
        job = JobStore(_data.data_dir()).submit(cfg)
        st.success(f"Queued job `{job}` ({cfg.name}); it appears here when the worker publishes it.")


def _dims() -> None:
    dims = _data.table(run, "dim_stats")
    heat = GF.outlier_heatmap(dims, presentation=v.presentation)
    _chrome.chart(heat, key="outlier_heat", data=dims, name=f"{run.name}_outlier_dims")


def _shares() -> None:
    layer_out = _data.table(run, "layer_outliers")
    shares = GF.shares_figure(layer_out, presentation=v.presentation)
    _chrome.chart(shares, key="outlier_shares", data=layer_out, name=f"{run.name}_q_shares")


_sections.draw(
    "outliers",
    {"dims": _dims, "shares": _shares},  # its figures (viz.page_figures), then its own tabs
    extra={
        "largest": ("Largest activations", _largest),
        "position0": ("Geometry with and without position 0", _position0),
    },
)
_state.sync_url("outliers")
