"""Token: one token type across the model — n_t, Q/M/V per layer, its path through the trade-off, its
self-similarity, its pooled variants (footnote 7) and the sentences behind it (typical and atypical
uses) and "your own sentence", each in a tab computed only when open. Reachable by URL:
?page=token&run=RUN&token=TOKEN(&section=contexts)."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from normvar_core.stats.analyses import strip_prefix
from normvar_core.stats.contexts import contexts, highlight
from normvar_core.stats.lookup import find_type, split_note, suggest
from normvar_core.viz.explore_figures import add_occurrence, percentile_heatmap
from normvar_core.viz.theme import PALETTE, QCOLORS, apply_theme
from normvar_core.viz.tradeoff_figures import tradeoff_scatter
from views import _access, _chrome, _data, _explore, _state

run, v = _chrome.run_page(
    "Token",
    "One token type across the layers, and the sentences behind its point: the uses nearest "
    "to its mean μ(X_t) (typical) and farthest from it (atypical).",
)
tokens = run.tokens()
if "w_token" not in st.session_state:
    st.session_state["w_token"] = (
        v.token or tokens.sort_values("n", ascending=False)["token"].iloc[min(40, len(tokens) - 1)]
    )
query = st.text_input(
    "Token",
    key="w_token",
    help="as typed: it is normalised as the model's tokenizer does (an uncased model lowercases), "
    "and '##ing', 'Ġthe' and 'the' match without the sub-word marker",
)
tk = _explore.tokenizer_of(run)
normalise = tk.normalise if tk is not None else None
hit = find_type(tokens, query, normalise)


def _pick(tok: str) -> None:
    st.session_state["w_token"] = tok


def _submit() -> None:
    from normvar_core.service.jobs import JobStore

    try:
        st.session_state["own_job"] = JobStore(_data.data_dir()).submit_sentence(
            run.name, st.session_state.get("w_own_text", "")
        )
        st.session_state.pop("own_result", None)
    except Exception as err:
        st.session_state["own_error"] = err


@st.fragment(run_every=1.0)
def _own_status(job_id: str) -> None:
    from normvar_core.service.job import JobState
    from normvar_core.service.jobs import JobStore

    store = JobStore(_data.data_dir())
    job = store.get(job_id)
    if job.state == JobState.DONE and job.run_path:
        st.session_state["own_result"] = job.run_path
        st.session_state.pop("own_job", None)
        st.rerun()
    elif job.state in (JobState.FAILED, JobState.CANCELLED, JobState.DONE):
        st.session_state.pop("own_job", None)
        st.error(f"The sentence job {job.state}: {job.message or 'no result'}", icon=":material/error:")
    elif job.state == JobState.QUEUED and not store.worker_running():
        st.caption("Queued — no worker is running: start one with `normvar worker` (`make run` does).")
    else:
        st.caption(f"Running the model in the worker (job `{job.id}`) …")


def own_sentence(layer: int, heading: bool = True) -> None:
    """Your own sentence (LIT): see the caption. Not in a read-only dashboard: it queues a job."""
    if _access.read_only():
        return
    if heading:
        st.subheader("Your own sentence")
    st.caption(
        "The worker runs the run's model on it; for each of its tokens and layers: the distance ‖x − μ(X_t)‖ to "
        "its type's mean in this run, as a percentile of the type's sampled uses (0 = more typical than every "
        "sampled use, 100 = more atypical), and its point (M(X_t), ‖x − μ(X_t)‖²) on the trade-off — the type's "
        "point (M, V) is the mean of its uses' points."
    )
    c1, c2 = st.columns([5, 1])
    with c1:
        st.text_area(
            "Sentence",
            key="w_own_text",
            height=80,
            max_chars=1000,
            persist_state="page",
            placeholder="e.g. She signed the License with her father's pen.",
        )
    with c2:
        st.write("")
        st.button("Run the model", key="w_own_go", on_click=_submit, type="primary", icon=":material/play_arrow:")
    if "own_error" in st.session_state:
        _chrome.show_error(st.session_state.pop("own_error"))
    if st.session_state.get("own_job"):
        _own_status(st.session_state["own_job"])
    if st.session_state.get("own_result"):
        from normvar_core.service.own_sentence import read_result

        doc = read_result(st.session_state["own_result"])
        if doc.get("run") != run.name:
            st.caption(f"The last sentence was run on **{doc.get('run')}**; run it again for this run.")
        else:
            own = pd.DataFrame(doc["rows"])
            st.markdown(f"**{html.escape(doc['text'])}**")
            st.caption(
                "Blank cells: the type has no sampled uses in this run (samples are kept for App. A's tokens "
                "and the 50 most frequent types), or is not in the run at all."
            )
            _chrome.chart(
                percentile_heatmap(
                    own,
                    presentation=v.presentation,
                    title="Distance to its type's mean μ(X_t): percentile of the type's sampled uses",
                ),
                key="own_heatmap",
                data=own,
                name=f"{run.name}_own_sentence",
            )
            at = own[own["layer"] == layer].reset_index(drop=True)
            ok = at[at["m"].notna()]
            if ok.empty:
                st.info("None of the sentence's tokens is a type of this run.")
            else:
                choices = ok["position"].tolist()
                words = [
                    p
                    for p, t, pc in zip(ok["position"], ok["token"], ok["percentile"])
                    if pd.notna(pc) and not (str(t).startswith(("[", "<")) and str(t).endswith(("]", ">")))
                ]
                first = words[0] if words else choices[0]
                pos = st.selectbox(
                    "Token of the sentence",
                    choices,
                    index=choices.index(first),
                    key="w_own_pos",
                    persist_state="page",
                    format_func=lambda p: f"{p}: {at.loc[at['position'] == p, 'token'].iloc[0]}",
                )
                r = ok[ok["position"] == pos].iloc[0]
                m1, m2, m3, m4 = st.columns(4)
                m1.metric("‖x − μ(X_t)‖", f"{r['distance']:.4g}")
                m2.metric(
                    "percentile",
                    "–" if pd.isna(r["percentile"]) else f"{r['percentile']:.1f}",
                    help=f"among the type's {int(r['n_samples'])} sampled uses at layer {layer}",
                )
                m3.metric("n_t in the run", _chrome.fmt_int(r["n"]))
                m4.metric("‖x − μ‖² vs V(X_t)", f"{r['dist_sq']:.4g} vs {r['v']:.4g}")
                tt = _data.token_table(run, layer)
                occ_fig = tradeoff_scatter(
                    _data.band_points(run, layer, v.band),
                    None,
                    highlight=tt[tt["token_id"] == int(r["token_id"])],
                    presentation=v.presentation,
                    colorbar=False,
                    height=460,
                    aspect=1.4,
                    title=f"'{r['token']}' of your sentence on the trade-off at layer {layer}",
                )
                add_occurrence(occ_fig, float(r["m"]), float(r["dist_sq"]), float(r["v"]), str(r["token"]))
                _chrome.chart(occ_fig, key="own_tradeoff", data=at, name=f"{run.name}_own_sentence_layer{layer}")
                st.dataframe(
                    at[["position", "token", "n", "n_samples", "distance", "percentile", "m", "v", "dist_sq"]],
                    hide_index=True,
                    width="stretch",
                    key="own_table",
                )


if hit.empty:
    st.info(
        f"No token {query!r} in run **{run.name}**"
        + (
            f" (normalised by the tokenizer: {normalise(query.strip())!r})."
            if normalise and normalise(query.strip()) != query.strip()
            else "."
        )
    )
    pieces = [p for p in (tk.pieces(query.strip()) if tk is not None else [])]
    have = set(tokens["token"].astype(str))
    if len(pieces) > 1:
        st.markdown(f"The tokenizer splits it into {split_note(pieces)}; these types are in the run:")
        row_p = st.container(horizontal=True, gap="small")
        for j, p in enumerate(dict.fromkeys(p for p in pieces if p in have)):
            row_p.button(p, key=f"w_piece_{j}", on_click=_pick, args=(p,), type="secondary")
    sug = suggest(tokens, query, normalise, k=10)
    if len(sug):
        st.markdown("Nearest types by prefix and edit distance:")
        row_s = st.container(horizontal=True, gap="small")
        for j, r in enumerate(sug.itertuples()):
            row_s.button(f"{r.token} (n={int(r.n):,})", key=f"w_suggest_{j}", on_click=_pick, args=(str(r.token),))
    own_sentence(_state.layer_slider(run))
    _state.sync_url("token")
    st.stop()
row = hit.sort_values("n", ascending=False).iloc[0]
tid, tok = int(row["token_id"]), str(row["token"])
v.token = tok
if tok != query.strip():
    st.caption(f"{query.strip()!r} is the run's type {tok!r} (as the tokenizer normalises it).")
st_ = _data.stats(run)
col = int(np.searchsorted(st_.token_ids, tid))
layers = list(run.layers)
qmv = pd.DataFrame({"layer": layers, "Q": st_.q[:, col], "M": st_.m[:, col], "V": st_.v[:, col]})

c = st.columns(4)
c[0].metric("token", tok)
c[1].metric("n_t", _chrome.fmt_int(row["n"]))
c[2].metric("layers", len(layers))
c[3].metric("M/Q at the middle layer", f"{qmv['M'].iloc[len(layers) // 2] / qmv['Q'].iloc[len(layers) // 2]:.3f}")
layer = _state.layer_slider(run)
li = st_.layer(layer)


def qmv_tab() -> None:
    fig = go.Figure()
    for k in ("Q", "M", "V"):
        fig.add_trace(
            go.Scatter(
                x=qmv["layer"], y=qmv[k], mode="lines+markers", name=f"{k}(X_t)", line=dict(color=QCOLORS[k], width=2.5)
            )
        )
    fig.update_layout(title=f"{tok}: Q, M, V across layers", xaxis_title="layer", height=380)
    apply_theme(fig, v.presentation)
    _chrome.chart(fig, key="token_qmv", data=qmv, name=f"{run.name}_{tok}_qmv")
    if run.has("selfsim"):
        ss = _data.table(run, "token_selfsim")
        ss = ss[ss["token_id"] == tid].sort_values("layer")
        st.caption(
            "Self-similarity (mean cosine between occurrences) per layer: "
            + ", ".join(
                f"{int(r.layer)}: {r.self_similarity:.3f}"
                for r in ss.itertuples()
                if r.self_similarity == r.self_similarity
            )
        )


def path_tab() -> None:
    path = go.Figure(
        go.Scatter(
            x=qmv["M"],
            y=qmv["V"],
            mode="lines+markers+text",
            text=[str(l) for l in layers],
            textposition="top center",
            line=dict(color=PALETTE[0]),
            name=tok,
            hovertemplate="layer %{text}<br>M = %{x:.4g}<br>V = %{y:.4g}<extra></extra>",
        )
    )
    path.update_layout(
        title=f"{tok}: its point in the trade-off (M, V) at each layer",
        xaxis_title="M(X_t)",
        yaxis_title="V(X_t)",
        height=380,
    )
    apply_theme(path, v.presentation)
    _chrome.chart(path, key="token_path", data=qmv, name=f"{run.name}_{tok}_tradeoff_path")


def neighbours_tab() -> None:
    c1, c2 = st.columns([2, 3])
    with c1:
        k = st.slider(
            "k",
            3,
            30,
            10,
            key="w_token_k",
            persist_state="page",
            help="the k types whose mean μ(X_s) has the largest cosine with μ(X_t) at this layer "
            "(TensorBoard Projector's nearest points)",
        )
        nn = _explore.neighbours(run, layer, st_.mean[li, col], k, exclude=tid)
        st.dataframe(
            nn[["rank", "token", "cosine", "n", "m", "v"]],
            hide_index=True,
            width="stretch",
            key="token_nn",
            column_config=_explore.NN_COLUMNS,
        )
    with c2:
        me = _data.token_table(run, layer)
        me = me[me["token_id"] == tid]
        nn_fig = tradeoff_scatter(
            _data.band_points(run, layer, v.band),
            None,
            highlight=pd.concat([me, nn.drop(columns=["rank", "cosine"])], ignore_index=True),
            presentation=v.presentation,
            colorbar=False,
            height=460,
            aspect=1.4,
            title=f"{tok} and its {k} nearest types at layer {layer}",
        )
        _chrome.chart(nn_fig, key="token_nn_fig", data=nn, name=f"{run.name}_{tok}_neighbours_layer{layer}")


def show_contexts(part: pd.DataFrame) -> None:
    for r in part.itertuples():
        text = (
            highlight(html.escape(r.sentence), -1, -1)
            if r.char_start < 0
            else (
                html.escape(r.sentence[: r.char_start])
                + "<mark><b>"
                + html.escape(r.sentence[r.char_start : r.char_end])
                + "</b></mark>"
                + html.escape(r.sentence[r.char_end :])
            )
        )
        # st.html, not st.markdown: corpus text is shown as it is (an image link stays text)
        st.html(f"<div><small>‖x − μ‖ = {r.distance:.3f} · cos = {r.cosine:+.3f}</small><br>{text}</div>")


def contexts_tab() -> None:
    """The sampled uses nearest to and farthest from μ(X_t), and those inside the Occurrences page's box."""
    if not run.has_contexts:
        st.info("This run was computed before samples kept their sentences: recompute it to read the contexts.")
    elif tid not in set(_data.sampled_tokens(run)["token_id"].astype(int)):
        st.info(
            f"No sampled contexts for {tok!r}: contexts are kept for App. A's tokens and the 50 most frequent types."
        )
    else:
        smp = run.samples(layer, [tid])
        ctx = contexts(smp, st_.mean[li, col], run.sentences(smp["sentence_id"].tolist()))
        k = min(8, len(ctx))
        c1, c2 = st.columns(2)
        with c1:
            st.markdown(f"**Most typical** at layer {layer} (nearest to μ(X_t))")
            show_contexts(ctx.head(k))
        with c2:
            st.markdown(f"**Most atypical** at layer {layer} (farthest from μ(X_t))")
            show_contexts(ctx.tail(k).iloc[::-1])
        with (box := _chrome.lazy_expander(f"All {len(ctx)} sampled contexts", key="token_all_contexts")):
            if box.open:
                st.dataframe(
                    ctx.drop(columns=["char_start", "char_end"]), hide_index=True, width="stretch", key="token_contexts"
                )
    occ = st.session_state.get(_explore.OCCURRENCE_BOX)
    if occ and occ.get("run") == run.name:  # the Occurrences page's box: this type's uses inside it
        from normvar_core.runs.occurrence_queries import selected_contexts

        inside = selected_contexts(run, occ["predicate"], token_id=tid, limit=50)
        with st.expander(
            f"{len(inside)}{'+' if len(inside) == 50 else ''} contexts of {tok!r} inside the "
            f"Occurrences box (layer {occ['layer']})",
            expanded=bool(len(inside)),
        ):
            st.code(occ["predicate"], language="sql")
            st.dataframe(inside, hide_index=True, width="stretch", key="token_occ_contexts")


def variants_tab() -> None:
    tt = _data.token_table(run, layer)
    st.markdown(f"**Pooled variants** (footnote 7: {', '.join(map(repr, variants['token']))}) at layer {layer}")
    st.dataframe(tt[tt["token_id"].isin(variants["token_id"])], hide_index=True, width="stretch", key="token_variants")


variants = tokens[[strip_prefix(t) == strip_prefix(tok) for t in tokens["token"]]]
tabs = {
    "qmv": ("Q, M, V per layer", qmv_tab),
    "path": ("Trade-off path (M, V)", path_tab),
    "neighbours": ("Nearest types", neighbours_tab),
    "contexts": ("Contexts", contexts_tab),
}
if len(variants) > 1:
    tabs["variants"] = ("Pooled variants (fn. 7)", variants_tab)
if not _access.read_only():  # it queues a job
    tabs["own"] = ("Your own sentence", lambda: own_sentence(layer, heading=False))
_chrome.draw_sections("token", tabs)  # only the open tab is computed and drawn
_state.sync_url("token")
