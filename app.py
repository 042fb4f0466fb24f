"""normvar dashboard: every figure of "Norm of Mean Contextualized Embeddings Determines their
Variance" (Yamagiwa & Shimodaira), live, for any run in the data directory.

    streamlit run app.py -- --data-dir D        # or NORMVAR_DATA=D; default ./data
    normvar dashboard / normvar up              # the same, via the CLI

A link restores the view: /tradeoff?run=NAME&layer=3&band=1,5&tokens=the,once&present=1
(``page=tradeoff`` works too). Pages live in views/ (not pages/: a pages/ folder switches Streamlit to its v1
multipage mode, which runs a page without app.py when a link opens it directly); shared plumbing in
views/_data.py (data access), views/_state.py (view state and widgets) and views/_chrome.py (page chrome).
"""

from __future__ import annotations

import streamlit as st


@st.cache_resource
def favicon():
    """The tab icon, drawn here: a Material or emoji icon makes the browser fetch it from fonts.gstatic.com."""
    from PIL import Image, ImageDraw

    img = Image.new("RGBA", (64, 64), (0, 0, 0, 0))
    draw = ImageDraw.Draw(img)
    draw.line([(8, 6), (8, 56), (60, 56)], fill=(49, 51, 63, 255), width=5)
    for x, y, c in (
        (20, 42, (31, 119, 180)),
        (31, 30, (255, 127, 14)),
        (44, 36, (31, 119, 180)),
        (50, 16, (214, 39, 40)),
    ):
        draw.ellipse([x - 6, y - 6, x + 6, y + 6], fill=(*c, 255))
    return img


st.set_page_config(page_title="normvar", page_icon=favicon(), layout="wide", initial_sidebar_state="expanded")

from views import _access  # noqa: E402  -- after set_page_config, Streamlit's first call

# The gate comes before anything else: with a token set ($NORMVAR_TOKEN, `normvar up --token`), sign-in happens
# at the HTTP layer (normvar_core/service/gate.py); a session without its cookie sees no navigation, no sidebar,
# no run (views/_access.py).
_access.gate()

from normvar_core.viz.pages import DEFAULT_PAGE  # noqa: E402  -- after the gate: nothing loads before sign-in
from normvar_core.viz.pages import PAGES as REGISTRY  # noqa: E402  -- after the gate
from views import _chrome, _data, _state  # noqa: E402  -- after the gate

READ_ONLY_HIDDEN = ("new-run",)  # --read-only: no form, no upload
PAGES = {
    p.key: st.Page(
        f"views/{p.file}",
        title=p.title,
        icon=f":material/{p.icon}:",
        default=p.key == DEFAULT_PAGE,
        **({} if p.key == DEFAULT_PAGE else {"url_path": p.key}),
    )
    for p in REGISTRY
    if not (_access.read_only() and p.key in READ_ONLY_HIDDEN)
}
groups: dict[str, list] = {}
for p in REGISTRY:
    if p.key in PAGES:
        groups.setdefault(p.group, []).append(PAGES[p.key])
nav = st.navigation(groups, expanded=True)  # every page listed: Compare and New run not behind "View N more"

view = _state.view()
# A shared link may name its page as ?page=... : honour it once per session.
if not st.session_state.get("_page_routed"):
    st.session_state["_page_routed"] = True
    target = PAGES.get(view.page or "")
    if target is not None and target.url_path != nav.url_path:
        st.switch_page(target, query_params=view.to_query())

with st.sidebar:
    st.markdown("### normvar")
    st.caption("Q(X_t) = M(X_t) + V(X_t): norm of the mean vs. variance of contextualized embeddings")
    _state.run_selector()
    _state.bind("w_present", view.presentation)
    view.presentation = st.toggle(
        "Presentation mode", key="w_present", help="large fonts and a clean white background, for a lab meeting"
    )
    st.caption(f"Data: `{_data.data_dir()}`")

_chrome.apply_presentation_css()
nav.run()
