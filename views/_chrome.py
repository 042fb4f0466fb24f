"""Dashboard plumbing, part 3: page chrome — a page's head (title, the selected run or a message), the
presentation style, figures with their PNG/SVG/CSV downloads, and errors shown as one line with the fix.
The plumbing's modules import downwards only: ``_run_cache`` < ``_data`` < ``_state`` < ``_chrome``."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import streamlit as st

from normvar_core.errors import NormvarError
from normvar_core.viz.figure_export import decades_only, export_image, figure_data, to_csv
from normvar_core.viz.selection import event_points, point_texts
from views._data import data_dir, open_run
from views._state import bind, view


# ============================================================================ a page's head
def page_header(title: str, caption: str | None = None) -> None:
    st.title(title)
    if caption:
        st.caption(caption)


def current_run():
    return open_run(view().run)


def require_run():
    """The selected run, or a friendly message and ``st.stop()``."""
    run = current_run()
    if run is None:
        st.info(
            "No published run yet. Start one on **New run** (or `normvar compute` / `make run`); "
            "it appears here when the worker publishes it."
        )
        st.page_link("views/runs.py", label="See the job queue on Runs", icon=":material/table:")
        st.stop()
    st.caption(f"Run **{run.name}**", help="the run this page shows: pick another in the sidebar")
    unknown_token_warning(run)
    return run


def require(run, what: str, label: str) -> None:
    """Stop the page with a message naming the fix when the run lacks ``what`` (a measure)."""
    if not run.has(what):
        reason = run.skipped(what)
        if reason:
            st.info(f"Run **{run.name}** has no {label}: {reason}.", icon=":material/info:")
            st.stop()
        st.info(
            f"Run **{run.name}** has no {label}: it was computed before normvar measured it, or with it "
            f"switched off. Recompute it (New run, or `normvar compute ... --overwrite`) to see this page.",
            icon=":material/info:",
        )
        st.stop()


def run_page(title: str, caption: str | None = None, *, needs: tuple[str, str] | None = None):
    """The head of every page about the selected run: title and caption, the run (or a message and
    ``st.stop()``), and with ``needs=(measure, label)`` a stop naming the fix when the run lacks
    it. Returns (run, view)."""
    page_header(title, caption)
    run = require_run()
    if needs is not None:
        require(run, *needs)
    return run, view()


# ============================================================================ sections drawn when opened
SECTION_OF = "_section_of"
"""Session key: the page whose tab ``view().section`` names (None until a page with tabs has run: a link's)."""


def sections(page: str, labels: dict[str, str]) -> tuple[str, Any]:
    """A page's figures as tabs, ``{slug: label}``, the first one the page's main figure; only the open tab
    is computed and drawn (``st.tabs(on_change="rerun")``), so a page costs its first figure, not all of
    them. The open one is in the link (``?section=slug``). Returns (the open slug, its container)."""
    v = view()
    slugs = list(labels)
    key = f"w_section_{page}"
    if st.session_state.get(SECTION_OF, page) != page:  # the open tab of another page (Compare's "ratios" is
        v.section = None  # not Decomposition's): this page opens on its first
    bind(key, labels.get(v.section or "", labels[slugs[0]]), lambda x: x in labels.values())
    tabs = st.tabs(list(labels.values()), key=key, on_change="rerun")
    slug, box = next(((s, t) for s, t in zip(slugs, tabs) if t.open), (slugs[0], tabs[0]))
    v.section = None if slug == slugs[0] else slug
    st.session_state["_sections_of"] = st.session_state[SECTION_OF] = page
    return slug, box


def draw_sections(page: str, tabs: dict[str, tuple[str, Any]]) -> str:
    """:func:`sections` with one function per tab, ``{slug: (label, draw)}``: only the open tab's ``draw()``
    runs, inside its tab, an error in it shown as one line with the fix. Returns the open slug."""
    slug, box = sections(page, {s: label for s, (label, _) in tabs.items()})
    with box:
        try:
            tabs[slug][1]()
        except Exception as err:
            show_error(err)
    return slug


def lazy_expander(label: str, *, key: str):
    """An expander whose content the page computes and sends only while it is open (a table under a figure
    costs nothing until asked for). Use as ``with (box := lazy_expander(...)): if box.open: ...``."""
    return st.expander(label, key=key, on_change="rerun")


NO_TRUNCATION_CSS = """
    [data-testid="stMetricLabel"] *, [data-testid="stMetricValue"] *, [data-testid="stSidebarNavLink"] span {
        white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
        overflow-wrap: anywhere;}
"""
"""Metric labels and values, and the page names in the sidebar, wrap instead of ending in "…"."""

PRESENTATION_CSS = """
    [data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li,
    [data-testid="stCaptionContainer"], [data-testid="stWidgetLabel"] p {font-size: 1.2rem !important;}
    [data-testid="stMetricValue"], [data-testid="stMetricValue"] [data-testid="stMarkdownContainer"] p
        {font-size: 2.8rem !important; line-height: 1.15 !important;}
    [data-testid="stMetricLabel"], [data-testid="stMetricLabel"] [data-testid="stMarkdownContainer"] p
        {font-size: 1.25rem !important;}
    .stApp h1 {font-size: 2.8rem !important;} .stApp h2 {font-size: 2.0rem !important;}
"""
"""Presentation mode: larger text, and the metrics' numbers larger still (their value is a markdown
paragraph, so the metric rules must out-rank the paragraph rule above them)."""


def apply_presentation_css() -> None:
    css = NO_TRUNCATION_CSS + (PRESENTATION_CSS if view().presentation else "")
    st.markdown(f"<style>{css}</style>", unsafe_allow_html=True)


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(s)).strip("_")[:120] or "figure"


def chart(
    fig,
    *,
    key: str,
    data: pd.DataFrame | None = None,
    name: str | None = None,
    downloads: bool = True,
    selectable: bool = False,
    lasso: bool = False,
    width: str = "stretch",
):
    """Draw a plotly figure and, under it, PNG / SVG (kaleido, generated on click) and CSV downloads.
    ``selectable``: clicking a point reruns the page; ``lasso``: box and lasso selections too; returns
    the selection event. ``width="content"``: the figure's own width (figures laid out in pixels)."""
    kw = (
        dict(on_select="rerun", selection_mode=("points", "box", "lasso") if lasso else "points")
        if (selectable or lasso)
        else {}
    )
    event = st.plotly_chart(
        decades_only(fig),
        width=width,
        theme=None,
        key=key,
        **kw,
        config={"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}},
    )
    if downloads:
        download_row(fig, data=data, name=name or key, key=key)
    return event


def open_on_click(event, *, key: str) -> list[str]:
    """One click on a single point of a token-type scatter opens its Token view at once (a box or lasso
    selection does not); returns the selected points' tokens."""
    sel = getattr(event, "selection", None) if event is not None else None
    points = event_points(event)  # the points that are dicts; their texts below that are tokens (crafted: left out)
    tokens = point_texts(points)
    boxed = bool(getattr(sel, "box", None) or getattr(sel, "lasso", None))
    if len(tokens) == 1 and len(points) == 1 and not boxed:
        clicked = (tokens[0], points[0].get("curve_number"), points[0].get("point_index"))
        if st.session_state.get(f"_{key}_opened") != clicked:  # not the click that brought us here before
            st.session_state[f"_{key}_opened"] = clicked
            view().token = tokens[0]
            st.session_state["w_token"] = tokens[0]
            st.switch_page("views/token.py")
    return tokens


def download_row(fig, *, data: pd.DataFrame | None, name: str, key: str) -> None:
    """PNG / SVG through kaleido and the figure's data as CSV; all generated only when clicked
    (deferred downloads), so they never slow a rerun."""
    base = _safe(name)
    row = st.container(horizontal=True, gap="small")
    common = dict(on_click="ignore", width="content", type="tertiary")
    slide = view().presentation  # presentation mode: the image is a 16:9 slide
    row.download_button(
        "PNG",
        data=lambda: export_image(fig, "png", presentation=slide),
        file_name=f"{base}.png",
        mime="image/png",
        key=f"dl_png_{key}",
        icon=":material/image:",
        **common,
    )
    row.download_button(
        "SVG",
        data=lambda: export_image(fig, "svg", presentation=slide),
        file_name=f"{base}.svg",
        mime="image/svg+xml",
        key=f"dl_svg_{key}",
        icon=":material/draw:",
        **common,
    )
    csv = (lambda: to_csv(data)) if data is not None else (lambda: to_csv(figure_data(fig)))
    row.download_button(
        "CSV",
        data=csv,
        file_name=f"{base}.csv",
        mime="text/csv",
        key=f"dl_csv_{key}",
        icon=":material/table:",
        **common,
    )


def report_button(runs: list, *, key: str) -> None:
    """'Build report': the worker builds the slide deck (or PDF / self-contained HTML) of ``runs`` as a
    job — it takes tens of seconds — and a download button appears when it is written. Not in a read-only
    dashboard (``normvar up --read-only``): it queues a job."""
    from normvar_core.service.jobs import JobStore
    from views._access import read_only

    if read_only():
        return

    row = st.container(horizontal=True, vertical_alignment="bottom")
    fmt = row.selectbox(
        "Report",
        ["pptx", "pdf", "html"],
        key=f"{key}_fmt",
        width=110,
        help="pptx: slides with speaker notes; pdf: one 16:9 page per slide; html: one file, "
        "interactive figures, opens offline",
    )
    if row.button(
        "Build report",
        key=key,
        icon=":material/slideshow:",
        help="one slide per figure of the study, takeaways computed from the numbers, exact values in "
        "the speaker notes; built by the background worker (also: normvar report RUN ...)",
    ):
        try:
            st.session_state[f"{key}_job"] = JobStore(data_dir()).submit_report([r.name for r in runs], fmt)
        except Exception as err:
            show_error(err)
    job_id = st.session_state.get(f"{key}_job")
    if job_id:
        _report_status(job_id, "_vs_".join(r.name for r in runs), key)


@st.fragment(run_every=1.5)
def _report_status(job_id: str, stem: str, key: str) -> None:
    from pathlib import Path

    from normvar_core.service.job import JobState
    from normvar_core.service.jobs import JobStore

    store = JobStore(data_dir())
    try:
        job = store.get(job_id)
    except Exception as err:
        show_error(err)
        return
    out = Path(job.run_path) if job.run_path else None
    if job.state == JobState.DONE and out is not None and out.is_file():
        st.download_button(
            f"Download the report ({out.suffix[1:]})",
            data=out.read_bytes(),
            file_name=_safe(stem) + out.suffix,
            key=f"{key}_download",
            icon=":material/download:",
            type="primary",
            on_click="ignore",
        )
    elif job.state in (JobState.FAILED, JobState.CANCELLED) or job.state == JobState.DONE:
        st.error(f"The report job {job.state}: {job.message or 'its file is gone'}", icon=":material/error:")
    elif job.state == JobState.QUEUED and not store.worker_running():
        st.caption("Report queued — no worker is running: start one with `normvar worker` (`make run` does).")
    else:
        st.caption(f"Building the report in the worker (job `{job.id}`) …")


def unknown_token_warning(run) -> None:
    """The run row flags a run whose counted positions are mostly the unknown token (a tokenizer that
    does not match the model or the corpus): every page that shows the run says so."""
    notes = run.meta.get("notes") or {}
    if notes.get("unk_flag"):
        st.warning(
            f"{100 * notes.get('unk_share', 0):.1f} % of the counted positions of {run.name} are the unknown "
            "token: the tokenizer probably does not match the model or the corpus, so these statistics "
            "describe [UNK], not the text.",
            icon=":material/warning:",
        )


def show_error(err: Exception) -> None:
    if isinstance(err, NormvarError):
        st.error(f"{err.message}" + (f"  \n**Fix:** {err.fix}" if err.fix else ""), icon=":material/error:")
    else:
        st.exception(err)


def fmt_int(x: Any) -> str:
    try:
        return f"{int(x):,}"
    except (TypeError, ValueError):
        return "–"


__all__ = [
    "current_run",
    "require_run",
    "require",
    "run_page",
    "open_on_click",
    "report_button",
    "unknown_token_warning",
    "page_header",
    "SECTION_OF",
    "sections",
    "draw_sections",
    "lazy_expander",
    "apply_presentation_css",
    "chart",
    "download_row",
    "show_error",
    "fmt_int",
]
