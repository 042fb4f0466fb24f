"""Token clouds (the study's Fig. 1, App. A, Fig. 8, Table 2): PCA — or a seeded t-SNE map — of sampled
raw embeddings, one colour per token; a clicked embedding's nearest types; box/lasso selections go to
the other pages."""
from __future__ import annotations

import numpy as np
import streamlit as st

from normvar_core.viz.cloud_figures import clouds_figure
from normvar_core.viz.selection import fit_row
from normvar_core.viz.tradeoff_figures import tradeoff_scatter
from normvar_core.viz.clouds import with_tsne
from views import _explore, _ui

run, v = _ui.run_page("Token clouds",
                      "Sampled contextualized embeddings of a few token types, PCA-projected together; the origin is "
                      "projected too and everything is shifted so that it sits at × = (0, 0) (App. A). Clouds near the "
                      "origin have small M(X_t) and large V(X_t). t-SNE: a non-linear map of the same embeddings.")

sampled = _ui.sampled_tokens(run)
if sampled.empty:
    st.info("This run stores no sampled embeddings (computed with samples_per_token = 0).")
    st.stop()
c0, c00 = st.columns([4, 1])
with c0:
    layer = _ui.layer_slider(run)
with c00:
    _ui.bind("w_cloud_map", "t-SNE" if v.cmap == "tsne" else "PCA", lambda x: x in ("PCA", "t-SNE"))
    method = st.radio("Map", ["PCA", "t-SNE"], key="w_cloud_map", horizontal=True,
                      help="PCA: linear, the origin kept (App. A). t-SNE (openTSNE, seed 0): non-linear, of all the "
                           "layer's sampled embeddings at once, computed once per run and layer")
    v.cmap = "tsne" if method == "t-SNE" else "pca"
colours = _ui.word_colour(run)
table = _ui.token_table(run, layer)
n_of = dict(zip(table["token_id"].astype(int), table["n"].astype(int)))
options = [int(t) for t in sampled["token_id"]]
label = dict(zip(options, sampled["token"].astype(str)))
default = [t for t in v.cloud if t in label] or [t for t in _ui.app_a_tokens(run) if t in label] or options[:12]
_ui.bind("w_cloud_tokens", default, lambda x: isinstance(x, list) and all(t in label for t in x))


def _app_a() -> None:
    v.cloud = []
    st.session_state["w_cloud_tokens"] = [t for t in _ui.app_a_tokens(run) if t in label] or options[:12]


handed = st.session_state.get("_clouds_note")  # a selection handed over from another page, in part
if handed and handed[1] and list(st.session_state.get("w_cloud_tokens") or []) == handed[0]:
    st.info(handed[1], icon=":material/filter_alt:")
c1, c2 = st.columns([5, 1])
with c1:
    chosen = st.multiselect("Tokens (those with stored samples)", options, key="w_cloud_tokens",
                            format_func=lambda t: f"{label[t]}  (n={n_of.get(t, 0):,})",
                            help="default: App. A's selection — tokens with 1 ≤ log₁₀ n_t ≤ 5 and ≥ 3 characters, "
                                 "drawn evenly over 10 frequency bins")
with c2:
    st.write("")
    st.button("App. A selection", key="w_cloud_reset", width="stretch", on_click=_app_a)
app_a = [t for t in _ui.app_a_tokens(run) if t in label]
v.cloud = [] if list(chosen) == app_a else [int(t) for t in chosen]

if not chosen:
    st.info("Pick at least one token.")
    _ui.sync_url("clouds")
    st.stop()
try:
    cloud = _ui.cloud(run, layer, chosen)
    coords = cloud.coords
    if v.cmap == "tsne":
        with st.spinner(f"t-SNE of the {int(sampled['count'].sum()):,} sampled embeddings at layer {layer} "
                        "(once per run and layer) …"):
            coords = with_tsne(coords, _explore.tsne(run, layer))
    order = [label[t] for t in chosen]
    fig = clouds_figure(_ui.with_word_colour(coords, colours), explained=cloud.explained,
                        presentation=v.presentation, color_by=_ui.WORD_COLOUR if colours else None,
                        color_title="|T<sub>w</sub>|", method=v.cmap, token_order=order,
                        title=f"{run.name} · layer {layer} · {'t-SNE' if v.cmap == 'tsne' else 'PCA'} · "
                                      f"{len(chosen)} tokens, {len(coords):,} sampled embeddings")
    rows = table.loc[table["token_id"].isin(chosen)]
except Exception as err:  # noqa: BLE001
    _ui.show_error(err)
    st.stop()

event = _ui.chart(fig, key="clouds", data=coords.drop(columns=["context"], errors="ignore"),
                  name=f"{run.name}_clouds_{v.cmap}_layer{layer}", lasso=True, width="content")
points = (getattr(getattr(event, "selection", None), "points", None) or []) if event is not None else []
picked = _explore.selected_tokens(event)
_explore.selection_bar(run, picked, key="clouds_sel", here="clouds")

# nearest types of one clicked embedding (TensorBoard Projector's "nearest points")
nn = None
if len(points) == 1:
    cd = points[0].get("customdata") or []
    try:
        tid, i = int(cd[2]), int(cd[3])
        smp = run.samples(layer, [tid])
        vec = np.asarray(smp.loc[smp["i"] == i, "vector"].iloc[0], dtype=np.float64)
    except (IndexError, ValueError, TypeError, KeyError):
        vec = None
    if vec is not None:
        k = st.slider("k nearest types", 3, 30, 10, key="w_cloud_k")
        nn = _explore.neighbours(run, layer, vec, k)
        st.markdown(f"**The {k} types nearest by cosine to this sampled embedding of `{label.get(tid, tid)}`** "
                    f"(its type's mean included when near; highlighted on the right)")
        st.dataframe(nn[["rank", "token", "cosine", "n", "m", "v"]], hide_index=True, width="stretch",
                     key="clouds_nn", column_config=_explore.NN_COLUMNS)

try:
    fits = _ui.tradeoff(run, v.band)
    band_pts = _ui.band_points(run, layer, v.band)
    hl = nn if nn is not None else rows
    fig8 = tradeoff_scatter(band_pts, fit_row(fits, layer=layer), highlight=hl,
                            presentation=v.presentation, colorbar=False, height=520, aspect=1.0,
                            title="Nearest types among all types" if nn is not None
                            else "The selected tokens among all types (Fig. 8)")
except Exception as err:  # noqa: BLE001
    _ui.show_error(err)
    st.stop()
c1, c2 = st.columns([3, 2])
with c1:
    st.subheader("n_t, Q, M, V of the selected tokens (Table 2)")
    st.dataframe(rows[["token", "token_id", "n", "q", "m", "v"]].sort_values("n", ascending=False),
                 hide_index=True, width="stretch",
                 column_config={"q": st.column_config.NumberColumn("Q(X_t)", format="%.4g"),
                                "m": st.column_config.NumberColumn("M(X_t)", format="%.4g"),
                                "v": st.column_config.NumberColumn("V(X_t)", format="%.4g")})
with c2:
    _ui.chart(fig8, key="clouds_fig8", data=hl, name=f"{run.name}_fig8_layer{layer}")
_ui.sync_url("clouds")
