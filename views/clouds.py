"""Token clouds (the study's Fig. 1, App. A, Fig. 8, Table 2): PCA — or a seeded t-SNE map — of sampled
raw embeddings, one colour per token; a clicked embedding's nearest types; box/lasso selections go to
the other pages. Two tabs, each computed only when open: the cloud, and Fig. 8 with Table 2."""

from __future__ import annotations

import numpy as np
import streamlit as st

from normvar_core.viz.cloud_figures import clouds_figure
from normvar_core.viz.clouds import with_tsne
from normvar_core.viz.selection import clicked_sample, event_points, fit_row
from normvar_core.viz.tradeoff_figures import tradeoff_scatter
from views import _chrome, _data, _explore, _sections, _state
from views._run_cache import per_run_version

run, v = _chrome.run_page(
    "Token clouds",
    "Sampled contextualized embeddings of a few token types, PCA-projected together; the origin is "
    "projected too and everything is shifted so that it sits at × = (0, 0) (App. A). Clouds near the "
    "origin have small M(X_t) and large V(X_t). t-SNE: a non-linear map of the same embeddings.",
)

sampled = _data.sampled_tokens(run)
if sampled.empty:
    st.info("This run stores no sampled embeddings (computed with samples_per_token = 0).")
    st.stop()
layer = _state.layer_slider(run)
table = _data.token_table(run, layer)
n_of = dict(zip(table["token_id"].astype(int), table["n"].astype(int)))
options = [int(t) for t in sampled["token_id"]]
label = dict(zip(options, sampled["token"].astype(str)))
app_a = list(_data.cloud_tokens(run))  # App. A's selection among the sampled types (the deck's too)
default = [t for t in v.cloud if t in label] or app_a
_state.bind("w_cloud_tokens", default, lambda x: isinstance(x, list) and all(t in label for t in x))


def _app_a() -> None:
    v.cloud = []
    st.session_state["w_cloud_tokens"] = app_a


handed = st.session_state.get("_clouds_note")  # a selection handed over from another page, in part
if handed and handed[1] and list(st.session_state.get("w_cloud_tokens") or []) == handed[0]:
    st.info(handed[1], icon=":material/filter_alt:")
c1, c2 = st.columns([5, 1])
with c1:
    chosen = st.multiselect(
        "Tokens (those with stored samples)",
        options,
        key="w_cloud_tokens",
        format_func=lambda t: f"{label[t]}  (n={n_of.get(t, 0):,})",
        help="default: App. A's selection — tokens with 1 ≤ log₁₀ n_t ≤ 5 and ≥ 3 characters, "
        "drawn evenly over 10 frequency bins",
    )
with c2:
    st.write("")
    st.button("App. A selection", key="w_cloud_reset", width="stretch", on_click=_app_a)
v.cloud = [] if list(chosen) == app_a else [int(t) for t in chosen]

if not chosen:
    st.info("Pick at least one token.")
    _state.sync_url("clouds")
    st.stop()

# session_state: the sampled embedding clicked on the cloud ({run, layer, token_id, i, k}); the Fig. 8 tab
# highlights its nearest types. The chart's own selection is gone once its tab is closed.
CLICKED = "_clouds_clicked"


def _map_control():
    _state.bind("w_cloud_map", "t-SNE" if v.cmap == "tsne" else "PCA", lambda x: x in ("PCA", "t-SNE"))
    method = st.radio(
        "Map",
        ["PCA", "t-SNE"],
        key="w_cloud_map",
        horizontal=True,
        help="PCA: linear, the origin kept (App. A). t-SNE (openTSNE, seed 0): non-linear, of all the "
        "layer's sampled embeddings at once, computed once per run and layer",
    )
    v.cmap = "tsne" if method == "t-SNE" else "pca"


@per_run_version(16)
def _figure(run, layer: int, chosen: tuple, cmap: str, presentation: bool, by_units: bool):
    """The cloud and its coordinates, built once per (run version, view): a figure of 20 tokens' clouds with
    their labels placed takes ≈ 0.4 s to build, every rerun of the page."""
    cloud = _data.cloud(run, layer, chosen)
    coords = with_tsne(cloud.coords, _explore.tsne(run, layer)) if cmap == "tsne" else cloud.coords
    fig = clouds_figure(
        _state.with_word_colour(coords, _state.word_units(run) if by_units else None),
        explained=cloud.explained,
        presentation=presentation,
        color_by=_state.WORD_COLOUR if by_units else None,
        color_title="|T<sub>w</sub>|",
        method=cmap,
        token_order=[label[t] for t in chosen],
        title=f"{run.name} · layer {layer} · {'t-SNE' if cmap == 'tsne' else 'PCA'} · "
        f"{len(chosen)} tokens, {len(coords):,} sampled embeddings",
    )
    return fig, coords


def _cloud_tab() -> None:
    """The cloud (PCA or t-SNE) with its box/lasso selection bar and a clicked embedding's nearest types."""
    c1, c2 = st.columns([1, 3], vertical_alignment="bottom")
    with c1:
        _map_control()
    with c2:
        colours = _state.word_colour(run)
    if v.cmap == "tsne":
        with st.spinner(
            f"t-SNE of the {int(sampled['count'].sum()):,} sampled embeddings at layer {layer} "
            "(once per run and layer) …"
        ):
            _explore.tsne(run, layer)
    fig, coords = _figure(run, layer, tuple(int(t) for t in chosen), v.cmap, v.presentation, colours is not None)
    event = _chrome.chart(
        fig,
        key="clouds",
        data=coords.drop(columns=["context"], errors="ignore"),
        name=f"{run.name}_clouds_{v.cmap}_layer{layer}",
        lasso=True,
        width="content",
    )
    points = event_points(event)
    _explore.selection_bar(run, _explore.selected_tokens(event), key="clouds_sel", here="clouds")
    st.session_state.pop(CLICKED, None)
    clicked = clicked_sample(points[0]) if len(points) == 1 else None  # None: not one click, or a crafted one
    if clicked is None:
        return
    # nearest types of one clicked embedding (TensorBoard Projector's "nearest points")
    tid, i = clicked
    try:
        vec = _clicked_vector(tid, i)
    except (IndexError, ValueError, TypeError, KeyError):  # no such sample in this run
        return
    k = st.slider("k nearest types", 3, 30, 10, key="w_cloud_k", persist_state="page")
    nn = _explore.neighbours(run, layer, vec, k)
    st.session_state[CLICKED] = {"run": run.name, "layer": layer, "token_id": tid, "i": i, "k": k}
    st.markdown(
        f"**The {k} types nearest by cosine to this sampled embedding of `{label.get(tid, tid)}`** "
        f"(its type's mean included when near; highlighted in the Fig. 8 tab)"
    )
    st.dataframe(
        nn[["rank", "token", "cosine", "n", "m", "v"]],
        hide_index=True,
        width="stretch",
        key="clouds_nn",
        column_config=_explore.NN_COLUMNS,
    )


def _clicked_vector(tid: int, i: int) -> np.ndarray:
    smp = run.samples(layer, [tid])
    return np.asarray(smp.loc[smp["i"] == i, "vector"].iloc[0], dtype=np.float64)


def _fig8_tab() -> None:
    """Fig. 8: the selected tokens (or the clicked embedding's nearest types) among all types, and Table 2."""
    rows = table.loc[table["token_id"].isin(chosen)]
    nn = None
    clicked = st.session_state.get(CLICKED)
    if clicked and clicked["run"] == run.name and clicked["layer"] == layer:
        try:
            nn = _explore.neighbours(run, layer, _clicked_vector(clicked["token_id"], clicked["i"]), clicked["k"])
            st.caption(
                f"Highlighted: the {clicked['k']} types nearest to the embedding of "
                f"`{label.get(clicked['token_id'], clicked['token_id'])}` clicked on the cloud."
            )
        except (IndexError, ValueError, TypeError, KeyError):
            nn = None
    hl = nn if nn is not None else rows
    fig8 = tradeoff_scatter(
        _data.band_points(run, layer, v.band),
        fit_row(_data.tradeoff(run, v.band), layer=layer),
        highlight=hl,
        presentation=v.presentation,
        colorbar=False,
        height=520,
        aspect=1.0,
        title="Nearest types among all types" if nn is not None else "The selected tokens among all types (Fig. 8)",
    )
    c1, c2 = st.columns([3, 2])
    with c1:
        st.subheader("n_t, Q, M, V of the selected tokens (Table 2)")
        st.dataframe(
            rows[["token", "token_id", "n", "q", "m", "v"]].sort_values("n", ascending=False),
            hide_index=True,
            width="stretch",
            column_config={
                "q": st.column_config.NumberColumn("Q(X_t)", format="%.4g"),
                "m": st.column_config.NumberColumn("M(X_t)", format="%.4g"),
                "v": st.column_config.NumberColumn("V(X_t)", format="%.4g"),
            },
        )
    with c2:
        _chrome.chart(fig8, key="clouds_fig8", data=hl, name=f"{run.name}_fig8_layer{layer}")


_state.bind("w_word_colour", True)  # the Cloud tab's toggle keeps its state while Fig. 8 is open
_sections.draw(
    "clouds",
    {"cloud": _cloud_tab},  # its figure, then Fig. 8; only the open tab is computed
    extra={"fig8": ("Among all types (Fig. 8, Table 2)", _fig8_tab)},
)
_state.sync_url("clouds")
