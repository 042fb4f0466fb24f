"""Occurrences: every occurrence the run kept for a layer, at its coordinates on the layer's
principal axes, in a hand-written WebGL scatter (``views/_scatter_gl.py``: gl.POINTS, bytes not JSON, nothing
fetched from another host). Colour by token type, log frequency, position, M(X_t) or V(X_t); search a token;
a box (dragged with shift, or typed) or a lasso (dragged with alt) is a DuckDB predicate whose types go to
Trade-off, Token clouds and Token."""

from __future__ import annotations

import html

import numpy as np
import streamlit as st

from normvar_core.runs import occurrence_queries as O
from normvar_core.viz import occurrence_figures as OF
from normvar_core.viz.selection import picked_point, scatter_region
from views import _chrome, _explore, _state
from views._run_cache import per_run_version
from views._scatter_gl import scatter

SEL_KEY = _explore.OCCURRENCE_BOX

run, v = _chrome.run_page(
    "Occurrences: every embedding of a layer",
    "Each point is one occurrence x of a token in the corpus, at its coordinates on the layer's two "
    "principal axes (of the covariance over all embeddings). Scroll to zoom, drag to pan, click a "
    "point; shift+drag draws a box, alt+drag a lasso (or pick the tool above the chart).",
)
if not O.has_occurrences(run):
    st.info(
        "This run keeps no occurrences: recompute it with `--occurrences` above 0 (the default keeps "
        "1,000,000 per layer).",
        icon=":material/scatter_plot:",
    )
    st.stop()


def _html(text: str) -> str:
    return html.escape(str(text))


@per_run_version(8)
def points(run, layer: int):
    return O.occurrence_points(run, layer)


@per_run_version(32)
def coloured(run, layer: int, by: str):
    return OF.colours(points(run, layer), by)


@per_run_version(4)
def drawn(run, layer: int, by: str) -> tuple[bytes, str]:
    """The scatter's points block (11 bytes a point), built once per (run version, layer, colouring): a
    search or a selection adds only its own small part."""
    p = points(run, layer)
    return OF.points_block(p["x"].to_numpy(), p["y"].to_numpy(), coloured(run, layer, by)[0])


BOX_KEYS = ("w_occ_x0", "w_occ_x1", "w_occ_y0", "w_occ_y1")
LASSO = "_occ_lasso"
LASSO_MAX = 100  # vertices, as the component's LASSO_MAX


def take_selection() -> None:
    """The chart's box or lasso (a callback: it runs before the page, so it may set the box's inputs): a box
    fills the typed bounds and drops the lasso, a lasso drops the box, "clear" drops both. A message of any other
    shape (``selection.scatter_region``: a crafted one) changes nothing; a lasso of more than LASSO_MAX vertices is
    thinned the same way as the component thins it (each vertex's SQL term costs ≈ 10 ms over a million points)."""
    state = st.session_state.get("occ_chart")
    region = scatter_region(state.get("selection") if isinstance(state, dict) else None, LASSO_MAX)
    if region is None:
        return
    kind, shape = region
    if kind in ("lasso", "clear"):
        for k in BOX_KEYS:
            st.session_state.pop(k, None)
    if kind == "box":
        for k, val in zip(BOX_KEYS, (*shape[0], *shape[1])):
            st.session_state[k] = val
    if kind in ("box", "clear"):
        st.session_state.pop(LASSO, None)
    else:
        st.session_state[LASSO] = shape


def typed_box() -> None:
    st.session_state.pop(LASSO, None)


c1, c2, c3 = st.columns([2, 2, 3])
with c1:
    layer = _state.layer_slider(run)
with c2:
    by = st.selectbox("Colour by", list(OF.COLOUR_BY), key="w_occ_colour")
with c3:
    query = st.text_input(
        "Search a token", key="w_occ_search", placeholder="e.g. bank", help="its occurrences are drawn larger, in black"
    )

try:
    pts = points(run, layer)
    legend = coloured(run, layer, by)[1]
except Exception as err:
    _chrome.show_error(err)
    st.stop()

hit = None
if query.strip():
    hit = (pts["token"].astype(str) == query.strip()).to_numpy()
    if not hit.any():
        st.caption(f"`{query.strip()}` has no occurrence at layer {layer} in this run.")
    else:
        st.caption(
            f"`{query.strip()}`: {int(hit.sum()):,} occurrence{'s' if hit.sum() != 1 else ''} at layer {layer}, "
            f"drawn larger, in black."
        )

with st.expander("Box selection", expanded=True):
    if len(pts):  # the chart draws no ticks: the typed bounds need the axes' extent
        st.caption(
            f"The points span x {pts['x'].min():.4f} to {pts['x'].max():.4f} and "
            f"y {pts['y'].min():.4f} to {pts['y'].max():.4f}; drag a box on the chart, or type one here."
        )
    b = st.columns(4)
    bounds = [
        b[i].number_input(
            label, key=k, format="%.4f", on_change=typed_box, **({} if k in st.session_state else {"value": None})
        )
        for i, (label, k) in enumerate(zip(("x from", "x to", "y from", "y to"), BOX_KEYS))
    ]
box = ((bounds[0], bounds[1]), (bounds[2], bounds[3])) if all(x is not None for x in bounds) else None
lasso = st.session_state.get(LASSO)
if lasso:
    shape, predicate, what = lasso, O.polygon_predicate(layer, lasso), "Lasso"
elif box is not None:
    (x0, x1), (y0, y1) = box
    shape, predicate, what = [[x0, y0], [x1, y0], [x1, y1], [x0, y1]], O.box_predicate(layer, *box), "Box"
else:
    shape = predicate = what = None

cap = int((run.meta.get("options") or {}).get("occurrences") or 0)
every = int(run.meta.get("n_embeddings") or 0)
st.caption(
    f"{len(pts):,} occurrences"
    + (f" of {every:,} (a seeded sample: the run kept at most {cap:,} per layer)" if 0 < len(pts) < every else ""),
    help="every occurrence the run kept for this layer, at its place on the layer's principal axes",
)
payload = OF.scatter_payload(
    pts["x"].to_numpy(), pts["y"].to_numpy(), drawn(run, layer, by), highlight=hit, shape=shape, height=620
)
chart = scatter(
    data=payload, key="occ_chart", height=660, on_picked_change=lambda: None, on_selection_change=take_selection
)

if legend["kind"] == "types":
    swatch = " · ".join(
        f'<span style="color:rgb{tuple(c)}">■</span> <code>{_html(t)}</code> ({n:,})' for t, n, c in legend["items"]
    )
    st.markdown(f"<small>{swatch} · the rest in grey ({legend['other']:,})</small>", unsafe_allow_html=True)
else:
    st.caption(
        f"Colour: {legend['label']}, 1st to 99th percentile: {legend['lo']:.3g} (dark violet) to "
        f"{legend['hi']:.3g} (yellow); the values beyond take the end colours"
    )

axes = O.occurrence_axes(run)
row = axes[axes["layer"] == layer]
if len(row):
    r = row.iloc[0]
    angle = (
        ""
        if not np.isfinite(r["angle_x_deg"])
        else f"; {r['angle_x_deg']:.2f}° and {r['angle_y_deg']:.2f}° from the exact top-2 axes"
    )
    st.caption(
        f"Axes: {r['axes']} (k = {int(r['k'])}, estimated from {int(r['n_early']):,} embeddings{angle}). "
        f"Variance along them: {r['var_x']:.4g}, {r['var_y']:.4g}."
    )

pick = picked_point(chart.picked, len(pts))  # None: no click, or a message the page cannot read
if pick is not None and (pts["x"].iat[pick[0]], pts["y"].iat[pick[0]]) == pick[1:]:  # not another layer's point
    one = pts.iloc[pick[0]]
    text = run.sentences([int(one["sentence_id"])]).get(int(one["sentence_id"]), "")
    st.markdown(
        f"**`{one['token']}`** · sentence {int(one['sentence_id'])}, position {int(one['position'])} · "
        f"n_t = {int(one['n']):,} · M = {one['m']:.4g} · V = {one['v']:.4g}"
    )
    st.caption(text)

if predicate is not None:
    st.session_state[SEL_KEY] = {"run": run.name, "layer": layer, "predicate": predicate}
    types = O.selected_types(run, predicate)
    st.markdown(f"**{what}: {int(types['count'].sum()):,} occurrences of {len(types):,} types**")
    st.code(predicate, language="sql", wrap_lines=True)
    _explore.selection_bar(run, types["token"].astype(str).tolist(), key="occ_sel", here="occurrences")
    left, right = st.columns(2)
    left.dataframe(types, hide_index=True, width="stretch", key="occ_types", height=300)
    right.dataframe(
        O.selected_contexts(run, predicate, limit=200), hide_index=True, width="stretch", key="occ_contexts", height=300
    )
else:  # a cleared selection no longer feeds the Token page
    st.session_state.pop(SEL_KEY, None)
_state.sync_url("occurrences")
