"""Token clouds (the study's Fig. 1, App. A, Fig. 8, Table 2): PCA of sampled raw embeddings."""
from __future__ import annotations

import streamlit as st

from normvar_core.viz import figures
from views import _ui

_ui.page_header("Token clouds",
                "Sampled contextualized embeddings of a few token types, PCA-projected together; the origin is "
                "projected too and everything is shifted so that it sits at × = (0, 0) (App. A). Clouds near the "
                "origin have small M(X_t) and large V(X_t).")
run = _ui.require_run()
v = _ui.view()

sampled = _ui.sampled_tokens(run)
if sampled.empty:
    st.info("This run stores no sampled embeddings (computed with samples_per_token = 0).")
    st.stop()
layer = _ui.layer_slider(run)
colours = _ui.word_colour(run)
table = _ui.token_table(run, layer)
n_of = dict(zip(table["token_id"].astype(int), table["n"].astype(int)))
options = [int(t) for t in sampled["token_id"]]
label = dict(zip(options, sampled["token"].astype(str)))
default = [t for t in _ui.app_a_tokens(run) if t in label] or options[:12]
_ui.bind("w_cloud_tokens", default, lambda x: isinstance(x, list) and all(t in label for t in x))

c1, c2 = st.columns([5, 1])
with c1:
    chosen = st.multiselect("Tokens (those with stored samples)", options, key="w_cloud_tokens",
                            format_func=lambda t: f"{label[t]}  (n={n_of.get(t, 0):,})",
                            help="default: App. A's selection — tokens with 1 ≤ log₁₀ n_t ≤ 5 and ≥ 3 characters, "
                                 "drawn evenly over 10 frequency bins")
with c2:
    st.write("")
    if st.button("App. A selection", key="w_cloud_reset", width="stretch"):
        st.session_state.pop("w_cloud_tokens", None)
        st.rerun()

if not chosen:
    st.info("Pick at least one token.")
    st.stop()
try:
    cloud = _ui.cloud(run, layer, chosen)
    fig = figures.clouds_figure(_ui.with_word_colour(cloud.coords, colours), explained=cloud.explained,
                                presentation=v.presentation, color_by=_ui.WORD_COLOUR if colours else None,
                                color_title="|T<sub>w</sub>|",
                                title=f"{run.name} · layer {layer} · {len(chosen)} tokens, "
                                      f"{len(cloud.coords):,} sampled embeddings")
    rows = table.loc[table["token_id"].isin(chosen)]
    fits = _ui.tradeoff(run, v.band)
    points = _ui.band_points(run, layer, v.band)
    fig8 = figures.tradeoff_scatter(points, figures.fit_row(fits, layer=layer), highlight=rows,
                                    presentation=v.presentation, colorbar=False, height=520,
                                    title="The selected tokens among all types (Fig. 8)")
except Exception as err:  # noqa: BLE001
    _ui.show_error(err)
    st.stop()

c1, c2 = st.columns([3, 2])
with c1:
    event = _ui.chart(fig, key="clouds", data=cloud.coords, name=f"{run.name}_clouds_layer{layer}", selectable=True)
    _ui.token_link(event, key="clouds_token")
with c2:
    _ui.chart(fig8, key="clouds_fig8", data=rows, name=f"{run.name}_fig8_layer{layer}")
st.subheader("n_t, Q, M, V of the selected tokens (Table 2)")
st.dataframe(rows[["token", "token_id", "n", "q", "m", "v"]].sort_values("n", ascending=False),
             hide_index=True, width="stretch",
             column_config={"q": st.column_config.NumberColumn("Q(X_t)", format="%.4g"),
                            "m": st.column_config.NumberColumn("M(X_t)", format="%.4g"),
                            "v": st.column_config.NumberColumn("V(X_t)", format="%.4g")})
_ui.sync_url("clouds")
