"""Trade-off (the study's Fig. 2, 8 and Table 2): V(X_t) against M(X_t) at one layer."""

from __future__ import annotations

from types import SimpleNamespace

import streamlit as st

from normvar_core.stats.tokenstats import in_band
from normvar_core.viz.labels import MISSING, number
from normvar_core.viz.selection import MAX_POINTS, downsample, find_tokens, fit_row, fmt
from normvar_core.viz.tradeoff_figures import tradeoff_scatter
from normvar_core.viz.viewstate import band_counts
from views import _chrome, _data, _explore, _state
from views._run_cache import per_run_version

run, v = _chrome.run_page(
    "Trade-off: V(X_t) against M(X_t)",
    "Each point is a token type t. Q = M + V, so when Q(X_t) varies little across types the "
    "points fall on a line of slope ≈ −1 (Fig. 2). The regression uses the types inside the band. "
    "Drag a box or lasso to hand a set of types to Token clouds or the highlights.",
)
ctl = _state.page_controls(run, layer=True, band=True, pool=True, null=True, extra=[3])
layer, band, pool, null_label, null_run = ctl.layer, ctl.band, ctl.pool, ctl.null_label, ctl.null_run


def _highlight_app_a() -> None:
    """Fig. 8: highlight App. A's token selection (the tokens of the clouds)."""
    ids = set(_data.app_a_tokens(run))
    toks = _data.token_table(run, run.layers[0])
    st.session_state["w_tokens"] = ",".join(toks.loc[toks["token_id"].isin(ids), "token"].astype(str))


with ctl.extra[0]:
    colours = None if pool else _state.word_colour(run)
    queries = _state.tokens_input()
    st.button(
        "Highlight App. A's selection (Fig. 8)",
        key="w_app_a",
        on_click=_highlight_app_a,
        type="tertiary",
        icon=":material/auto_awesome:",
    )


@per_run_version(64)
def _scene(
    run,
    layer: int,
    band,
    pool: bool,
    queries: tuple,
    null_name,
    null_version,
    null_text: str,
    presentation: bool,
    by_units: bool,
) -> SimpleNamespace:
    """The page's figure and what its captions read, built once per (run version, view): the null run comes
    by name and file version, so a recomputed null is drawn again."""
    fits = _data.tradeoff(run, band, pool)
    fit = fit_row(fits, layer=layer)
    points = _state.with_word_colour(
        _data.band_points(run, layer, band, pool), _state.word_units(run) if by_units else None
    )
    drawn, total = downsample(points, MAX_POINTS)
    hl, missing = find_tokens(_data.token_table(run, layer, pool), list(queries))
    null_run = _data.open_run(null_name) if null_name else None
    null_points = downsample(_data.band_points(null_run, layer, band, pool), MAX_POINTS)[0] if null_run else None
    ln = _data.layernorm(run, band)
    ln_row = ln.set_index("layer").loc[layer] if ln is not None and layer in set(ln["layer"]) else None
    iv = _data.intervals(run, band, pool)
    siv = iv[(iv["quantity"] == "slope") & (iv["layer"] == layer)]
    fig = tradeoff_scatter(
        drawn,
        fit,
        highlight=hl,
        total=total,
        presentation=presentation,
        q_pred=float(ln_row["q_pred"]) if ln_row is not None else None,
        color_by=_state.WORD_COLOUR if by_units else None,
        color_title="|T<sub>w</sub>|",
        null_points=null_points,
        null_label=null_text or "Gaussian null",
        slope_interval=(float(siv["low"].iloc[0]), float(siv["high"].iloc[0])) if len(siv) else None,
        title=f"{run.name} · layer {layer} · {len(points):,} token types with "
        f"{10 ** band[0]:,.0f} ≤ n_t ≤ {10 ** band[1]:,.0f}",
    )
    return SimpleNamespace(
        fig=fig, fits=fits, fit=fit, points=points, drawn=len(drawn), total=total, hl=hl, missing=missing, ln_row=ln_row
    )


try:
    sc = _scene(
        run,
        layer,
        band,
        pool,
        tuple(queries),
        null_run.name if null_run else None,
        tuple(null_run.version) if null_run else None,
        null_label or "",
        v.presentation,
        colours is not None,
    )
    fits, fit, points, total, hl, missing, ln_row = sc.fits, sc.fit, sc.points, sc.total, sc.hl, sc.missing, sc.ln_row
except Exception as err:
    _chrome.show_error(err)
    st.stop()

m1, m2, m3, m4 = st.columns(4)
m1.metric("token types in band", f"{len(points):,}")
m2.metric("slope (V on M)", fmt(fit["slope"]) if fit else "–")
m3.metric("R²", fmt(fit["r2"]) if fit else "–")
m4.metric("C.V. of Q(X_t)", fmt(fit["cv_q"], 4) if fit else "–")
if ln_row is not None:
    measured = number(ln_row["q_types_mean"], ".4g", why="no token type in the band at this layer")
    ratio = number(ln_row["measured_over_predicted"], ".3f")
    st.caption(
        f"App. I: layer {layer} is the output of `{ln_row['module']}`; LayerNorm predicts Q(X_t) ≈ ‖γ‖² + ‖β‖² "
        f"= {number(ln_row['q_pred'], '.4g')} (dotted line V = ‖γ‖² + ‖β‖² − M); measured mean {measured}"
        + (f" ({ratio}×)." if ratio != MISSING else ".")
        if ln_row["module"]
        else f"App. I: layer {layer} is not the output of a normalization (a Pre-LN block), so LayerNorm makes no "
        "prediction of Q here."
    )
if total > sc.drawn:
    st.warning(
        f"Showing a uniform random sample of {sc.drawn:,} of {total:,} token types to keep the "
        "WebGL scatter responsive; the regression uses all of them.",
        icon=":material/filter_alt:",
    )

event = _chrome.chart(
    sc.fig,
    key="tradeoff",
    data=points[["token_id", "token", "n", "q", "m", "v"]],
    name=f"{run.name}_tradeoff_layer{layer}",
    lasso=True,
)
_chrome.open_on_click(event, key="tradeoff_click")  # one click on a point: its Token view
_explore.selection_bar(run, _explore.selected_tokens(event), key="tradeoff_sel", here="tradeoff")

if queries:
    st.subheader("Highlighted tokens")
    if missing:
        st.caption("not in this run: " + ", ".join(f"`{m}`" for m in missing))
    if len(hl):
        shown = hl[["token", "token_id", "n", "q", "m", "v"]].copy()
        shown.insert(3, "in band", in_band(shown["n"], *band_counts(band)))
        st.dataframe(
            shown,
            hide_index=True,
            width="stretch",
            key="highlight_table",
            column_config={
                "q": st.column_config.NumberColumn("Q(X_t)", format="%.4g"),
                "m": st.column_config.NumberColumn("M(X_t)", format="%.4g"),
                "v": st.column_config.NumberColumn("V(X_t)", format="%.4g"),
                "n": st.column_config.NumberColumn("n_t", format="%d"),
            },
        )

with (fits_box := _chrome.lazy_expander("Per-layer fits (the data of Fig. 4)", key="tradeoff_fits")):
    if fits_box.open:
        st.dataframe(fits, hide_index=True, width="stretch")

_state.sync_url("tradeoff")
