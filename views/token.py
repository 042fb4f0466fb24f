"""Token: one token type across the model — n_t, Q/M/V per layer, its path through the trade-off, its
self-similarity, its pooled variants (footnote 7) and the sentences behind it (typical and atypical
uses). Reachable by URL: ?page=token&run=RUN&token=TOKEN."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from normvar_core.stats.analyses import strip_prefix
from normvar_core.stats.contexts import contexts, highlight
from normvar_core.viz.viewstate import PALETTE, QCOLORS, apply_theme
from views import _ui

_ui.page_header("Token", "One token type across the layers, and the sentences behind its point: the uses nearest "
                "to its mean μ(X_t) (typical) and farthest from it (atypical).")
run = _ui.require_run()
v = _ui.view()
tokens = run.tokens()
if "w_token" not in st.session_state:
    st.session_state["w_token"] = v.token or tokens.sort_values("n", ascending=False)["token"].iloc[min(40, len(tokens) - 1)]
query = st.text_input("Token", key="w_token", help="as the tokenizer writes it ('##ing', 'Ġthe') or without the prefix")
hit = tokens[tokens["token"] == query]
if hit.empty:
    hit = tokens[[strip_prefix(t) == strip_prefix(query) for t in tokens["token"]]]
if hit.empty:
    st.info(f"No token {query!r} in run **{run.name}**.")
    st.stop()
row = hit.sort_values("n", ascending=False).iloc[0]
tid, tok = int(row["token_id"]), str(row["token"])
v.token = tok
st_ = _ui.stats(run)
col = int(np.searchsorted(st_.token_ids, tid))
layers = list(run.layers)
qmv = pd.DataFrame({"layer": layers, "Q": st_.q[:, col], "M": st_.m[:, col], "V": st_.v[:, col]})

c = st.columns(4)
c[0].metric("token", tok)
c[1].metric("n_t", _ui.fmt_int(row["n"]))
c[2].metric("layers", len(layers))
c[3].metric("M/Q at the middle layer", f"{qmv['M'].iloc[len(layers) // 2] / qmv['Q'].iloc[len(layers) // 2]:.3f}")

fig = go.Figure()
for k in ("Q", "M", "V"):
    fig.add_trace(go.Scatter(x=qmv["layer"], y=qmv[k], mode="lines+markers", name=f"{k}(X_t)",
                             line=dict(color=QCOLORS[k], width=2.5)))
fig.update_layout(title=f"{tok}: Q, M, V across layers", xaxis_title="layer", height=380)
apply_theme(fig, v.presentation)
path = go.Figure(go.Scatter(x=qmv["M"], y=qmv["V"], mode="lines+markers+text", text=[str(l) for l in layers],
                            textposition="top center", line=dict(color=PALETTE[0]), name=tok,
                            hovertemplate="layer %{text}<br>M = %{x:.4g}<br>V = %{y:.4g}<extra></extra>"))
path.update_layout(title=f"{tok}: its point in the trade-off (M, V) at each layer", xaxis_title="M(X_t)",
                   yaxis_title="V(X_t)", height=380)
apply_theme(path, v.presentation)
c1, c2 = st.columns(2)
with c1:
    _ui.chart(fig, key="token_qmv", data=qmv, name=f"{run.name}_{tok}_qmv")
with c2:
    _ui.chart(path, key="token_path", data=qmv, name=f"{run.name}_{tok}_tradeoff_path")

if run.has("selfsim"):
    ss = _ui.table(run, "token_selfsim")
    ss = ss[ss["token_id"] == tid].sort_values("layer")
    st.caption("Self-similarity (mean cosine between occurrences) per layer: "
               + ", ".join(f"{int(r.layer)}: {r.self_similarity:.3f}" for r in ss.itertuples() if r.self_similarity == r.self_similarity))

variants = tokens[[strip_prefix(t) == strip_prefix(tok) for t in tokens["token"]]]
if len(variants) > 1:
    layer_v = _ui.layer_slider(run, key="w_token_layer_v", label="Layer (variants)")
    tt = _ui.token_table(run, layer_v)
    st.markdown(f"**Pooled variants** (footnote 7: {', '.join(map(repr, variants['token']))}) at layer {layer_v}")
    st.dataframe(tt[tt["token_id"].isin(variants["token_id"])], hide_index=True, width="stretch", key="token_variants")

st.subheader("Contexts")
if not run.has_contexts:
    st.info("This run was computed before samples kept their sentences: recompute it to read the contexts.")
elif tid not in set(_ui.sampled_tokens(run)["token_id"].astype(int)):
    st.info(f"No sampled contexts for {tok!r}: contexts are kept for App. A's tokens and the 50 most frequent types.")
else:
    layer = _ui.layer_slider(run)
    li = st_.layer(layer)
    smp = run.samples(layer, [tid])
    ctx = contexts(smp, st_.mean[li, col], run.sentences(smp["sentence_id"].tolist()))
    k = min(8, len(ctx))

    def show(part: pd.DataFrame) -> None:
        for r in part.itertuples():
            text = highlight(html.escape(r.sentence), -1, -1) if r.char_start < 0 else (
                html.escape(r.sentence[:r.char_start]) + "<mark><b>" + html.escape(r.sentence[r.char_start:r.char_end])
                + "</b></mark>" + html.escape(r.sentence[r.char_end:]))
            # st.html, not st.markdown: corpus text is shown as it is (an image link stays text)
            st.html(f"<div><small>‖x − μ‖ = {r.distance:.3f} · cos = {r.cosine:+.3f}</small><br>{text}</div>")

    c1, c2 = st.columns(2)
    with c1:
        st.markdown(f"**Most typical** at layer {layer} (nearest to μ(X_t))")
        show(ctx.head(k))
    with c2:
        st.markdown(f"**Most atypical** at layer {layer} (farthest from μ(X_t))")
        show(ctx.tail(k).iloc[::-1])
    with st.expander(f"All {len(ctx)} sampled contexts"):
        st.dataframe(ctx.drop(columns=["char_start", "char_end"]), hide_index=True, width="stretch", key="token_contexts")
_ui.sync_url("token")
