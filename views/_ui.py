"""Shared Streamlit plumbing for the dashboard pages (not a page itself).

* the data directory (``streamlit run app.py -- --data-dir D``, else $NORMVAR_DATA, else ./data);
* cached reads: a run is opened once per (path, mtime) and every analysis table is cached per
  (run path, mtime, band) — ``st.cache_resource`` (shared, never pickled or copied; treat as read-only);
* the view state (run, layer, band, highlighted tokens, presentation) kept in ``st.session_state``
  and mirrored into the URL's query parameters (``normvar_core.viz.viewstate``);
* widgets bound to that state, figure rendering and the PNG/SVG/CSV download row.

Pages only call the library and draw; everything statistical lives in ``normvar_core``.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import streamlit as st

from normvar_core.viz import figures

from normvar_core.viz import viewstate
from normvar_core.datadir import DataDir, resolve_data_dir
from normvar_core.errors import NormvarError
from normvar_core.viz.viewstate import ViewState

# ============================================================================ data dir
def data_dir() -> Path:
    """``--data-dir`` after ``--`` on the streamlit command line, else $NORMVAR_DATA, else ./data."""
    if "_data_dir" not in st.session_state:
        parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        parser.add_argument("--data-dir", default=None)
        ns, _ = parser.parse_known_args(sys.argv[1:])
        st.session_state["_data_dir"] = str(resolve_data_dir(ns.data_dir))
    return Path(st.session_state["_data_dir"])


# ============================================================================ cached reads
def _mtime(path: str | Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


@st.cache_resource(show_spinner=False, max_entries=16)
def _list_runs(root: str, signature: tuple) -> pd.DataFrame:
    from normvar_core.runs import runfile

    return runfile.list_runs(root)


def runs_table() -> pd.DataFrame:
    """Published runs (``runfile.list_runs``), re-read only when the runs folder changes."""
    dd = DataDir(data_dir())
    sig = tuple((p.name, _mtime(p)) for p in dd.published_runs())
    return _list_runs(str(dd.root), sig)


@st.cache_resource(show_spinner=False, max_entries=12)
def _open_run(path: str, mtime: int):
    from normvar_core.runs import runfile

    return runfile.open_run(path)


def open_run(name: str | None):
    """The published run ``name`` (cached per file version), or None."""
    if not name:
        return None
    runs = runs_table()
    hit = runs.loc[runs["name"] == name]
    if hit.empty:
        return None
    path = str(hit.iloc[0]["path"])
    return _open_run(path, _mtime(path))


def _key(run) -> tuple[str, int]:
    return (str(run.path), _mtime(run.path))


@st.cache_resource(show_spinner=False, max_entries=48)
def _stats(path: str, mtime: int):
    return _open_run(path, mtime).stats()


def stats(run):
    """The run's TokenStats (means loaded once per file version)."""
    return _stats(*_key(run))


@st.cache_resource(show_spinner=False, max_entries=256)
def _analysis(kind: str, path: str, mtime: int, n_min: float, n_max: float):
    from normvar_core.stats import analyses

    fn = getattr(analyses, kind)
    return fn(_stats(path, mtime), n_min, n_max)


def tradeoff(run, band) -> pd.DataFrame:
    """``analyses.tradeoff`` per layer (C.V. of Q, slope, intercept, R^2) for the band."""
    return _analysis("tradeoff", *_key(run), *viewstate.band_counts(band))


def decomposition(run, band) -> pd.DataFrame:
    return _analysis("decomposition", *_key(run), *viewstate.band_counts(band))


def frequency_regressions(run, band) -> pd.DataFrame:
    return _analysis("frequency_regressions", *_key(run), *viewstate.band_counts(band))


@st.cache_resource(show_spinner=False, max_entries=128)
def _histograms(path: str, mtime: int, layer: int, bins: int, n_min: float, n_max: float):
    from normvar_core.stats import analyses

    return analyses.histograms(_stats(path, mtime), layer, bins=bins, n_min=n_min, n_max=n_max)


def histograms(run, layer: int, band, bins: int = 50) -> pd.DataFrame:
    return _histograms(*_key(run), int(layer), int(bins), *viewstate.band_counts(band))


@st.cache_resource(show_spinner=False, max_entries=256)
def _token_table(path: str, mtime: int, layer: int) -> pd.DataFrame:
    return _open_run(path, mtime).token_table(layer)


def token_table(run, layer: int) -> pd.DataFrame:
    return _token_table(*_key(run), int(layer))


@st.cache_resource(show_spinner=False, max_entries=256)
def _points(path: str, mtime: int, layer: int, n_min: float, n_max: float) -> pd.DataFrame:
    return figures.tradeoff_points(_token_table(path, mtime, layer), n_min, n_max)


def band_points(run, layer: int, band) -> pd.DataFrame:
    """Token types of ``layer`` inside the band (token_id, token, n, q, m, v, log10_n)."""
    return _points(*_key(run), int(layer), *viewstate.band_counts(band))


@st.cache_resource(show_spinner=False, max_entries=32)
def _app_a_tokens(path: str, mtime: int) -> tuple[int, ...]:
    from normvar_core.stats import analyses

    run = _open_run(path, mtime)
    st_ = _stats(path, mtime)
    names = run.tokens()["token"].astype(str).tolist()
    return tuple(int(t) for t in analyses.select_tokens(st_, names))


def app_a_tokens(run) -> tuple[int, ...]:
    """App. A's token selection (``analyses.select_tokens``) for the run."""
    return _app_a_tokens(*_key(run))


@st.cache_resource(show_spinner=False, max_entries=64)
def _cloud(path: str, mtime: int, layer: int, ids: tuple[int, ...]):
    from normvar_core.viz import clouds

    run = _open_run(path, mtime)
    samples = run.samples(layer, list(ids))
    tt = _token_table(path, mtime, layer)
    n = dict(zip(tt["token_id"].astype(int), tt["n"].astype(int)))
    return clouds.pca_cloud(samples, n)


def cloud(run, layer: int, ids) -> Any:
    return _cloud(*_key(run), int(layer), tuple(sorted(int(i) for i in ids)))


@st.cache_resource(show_spinner=False, max_entries=32)
def _sampled(path: str, mtime: int) -> pd.DataFrame:
    return _open_run(path, mtime).sampled_tokens()


def sampled_tokens(run) -> pd.DataFrame:
    return _sampled(*_key(run))


@st.cache_resource(show_spinner=False, max_entries=64)
def _table(path: str, mtime: int, name: str) -> pd.DataFrame:
    return _open_run(path, mtime).table(name)


def table(run, name: str) -> pd.DataFrame:
    """Any table of the run (an accumulator's), read once per file version."""
    return _table(*_key(run), name).copy()


def require(run, what: str, label: str) -> None:
    """Stop the page with a message naming the fix when the run lacks ``what`` (an accumulator)."""
    if not run.has(what):
        st.info(f"Run **{run.name}** has no {label}: it was computed before normvar measured it, or with it "
                f"switched off. Recompute it (New run, or `normvar compute ... --overwrite`) to see this page.",
                icon=":material/info:")
        st.stop()


def num_hidden_states(run) -> int:
    """Hidden states of the model (blocks + the input embeddings) for the relative-depth axis."""
    n = run.meta.get("num_layers")
    if n:
        return int(n) + 1
    return max(run.layers) + 1


# ============================================================================ view state
def view() -> ViewState:
    """This session's view, first parsed from the URL's query parameters."""
    if "view" not in st.session_state:
        st.session_state["view"] = ViewState.from_query(st.query_params.to_dict())
    return st.session_state["view"]


def sync_url(page: str) -> None:
    """Write the view into the URL (only the parameters that differ from the defaults)."""
    v = view()
    v.page = page
    want = v.to_query()
    if st.query_params.to_dict() != want:
        st.query_params.from_dict(want)


def bind(key: str, value: Any, valid: Callable[[Any], bool] = lambda _: True) -> None:
    """Seed a widget's session state from the view before it is created (widget state is
    dropped on pages that do not show the widget; the view survives)."""
    current = st.session_state.get(key, None)
    ok = key in st.session_state and valid(current)
    # Re-assigning even an unchanged value matters: a widget with the same key on another page has
    # another element id, and only a value set through the Session State API carries over to it.
    st.session_state[key] = current if ok else value


def run_selector(sidebar: bool = True) -> None:
    """The run picker (sidebar, on every page)."""
    runs = runs_table()
    v = view()
    names = runs["name"].tolist()
    where = st.sidebar if sidebar else st
    if not names:
        where.info("No published run yet.")
        v.run = None
        return
    labels = {r["name"]: f"{r['name']}  ·  {r['model']}" for _, r in runs.iterrows()}
    bind("w_run", v.run if v.run in names else names[0], lambda x: x in names)
    v.run = where.selectbox("Run", names, key="w_run", format_func=lambda n: labels.get(n, n),
                            help="published runs, newest first")


def current_run():
    v = view()
    return open_run(v.run)


def require_run():
    """The selected run, or a friendly message and ``st.stop()``."""
    run = current_run()
    if run is None:
        st.info("No published run yet. Start one on **New run** (or `normvar compute` / `make run`); "
                "it appears here when the worker publishes it.")
        st.page_link("views/runs.py", label="See the job queue on Runs", icon=":material/table:")
        st.stop()
    return run


def layer_slider(run, label: str = "Layer", key: str = "w_layer") -> int:
    """Layer slider over the run's stored hidden-state indices (0 = input embeddings)."""
    v = view()
    layers = [int(x) for x in run.layers]
    bind(key, viewstate.nearest_layer(layers, v.layer), lambda x: x in layers)
    if len(layers) == 1:
        st.caption(f"Layer {layers[0]} (the only stored layer)")
        v.layer = layers[0]
        return layers[0]
    layer = st.select_slider(label, options=layers, key=key,
                             help="hidden-state index: 0 = input embeddings, "
                                  f"{num_hidden_states(run) - 1} = last layer")
    v.layer = int(layer)
    return int(layer)


def band_slider(run=None, key: str = "w_band") -> tuple[float, float]:
    """Frequency band in log10 n_t (default 1..5, i.e. 10 <= n_t <= 1e5 as in the study)."""
    v = view()
    top = 5.0
    if run is not None:
        try:
            top = max(5.0, float(runs_max_log10n(run)))
        except Exception:  # noqa: BLE001
            pass
    lo, hi = v.band
    bind(key, (min(lo, top), min(hi, top)), lambda x: isinstance(x, tuple) and len(x) == 2)
    band = st.slider("Frequency band: log₁₀ n_t", min_value=0.0, max_value=top, step=0.1, key=key,
                     help="only token types with 10^lo ≤ n_t ≤ 10^hi enter the regressions and figures "
                          "(the study: 1 ≤ log₁₀ n_t ≤ 5)")
    band = (round(float(band[0]), 2), round(float(band[1]), 2))
    v.band = band
    return band


def runs_max_log10n(run) -> float:
    import math

    fh = run.frequency_hist()
    if len(fh) and "log10_n_right" in fh:
        return math.ceil(float(fh["log10_n_right"].max()))
    return 5.0


def tokens_input(key: str = "w_tokens", label: str = "Highlight tokens") -> list[str]:
    v = view()
    bind(key, viewstate.format_tokens(v.tokens))
    raw = st.text_input(label, key=key, placeholder="e.g. the, once, winked",
                        help="comma-separated; '##ing', 'Ġing' and 'ing' are the same token (footnote 7)")
    v.tokens = viewstate.parse_tokens(raw)
    return v.tokens


# ============================================================================ page chrome
def page_header(title: str, caption: str | None = None) -> None:
    st.title(title)
    if caption:
        st.caption(caption)


def apply_presentation_css() -> None:
    if view().presentation:
        st.markdown(
            """<style>
            [data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li,
            [data-testid="stCaptionContainer"], [data-testid="stWidgetLabel"] p {font-size: 1.2rem !important;}
            [data-testid="stMetricValue"] {font-size: 2.8rem !important;}
            [data-testid="stMetricLabel"] p {font-size: 1.15rem !important;}
            .stApp h1 {font-size: 2.8rem !important;} .stApp h2 {font-size: 2.0rem !important;}
            </style>""",
            unsafe_allow_html=True,
        )


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(s)).strip("_")[:120] or "figure"


def chart(fig, *, key: str, data: pd.DataFrame | None = None, name: str | None = None,
          downloads: bool = True) -> None:
    """Draw a plotly figure and, under it, PNG / SVG (kaleido, generated on click) and CSV downloads."""
    st.plotly_chart(fig, width="stretch", theme=None, key=key,
                    config={"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}})
    if downloads:
        download_row(fig, data=data, name=name or key, key=key)


def download_row(fig, *, data: pd.DataFrame | None, name: str, key: str) -> None:
    """PNG / SVG through kaleido and the figure's data as CSV; all generated only when clicked
    (deferred downloads), so they never slow a rerun."""
    base = _safe(name)
    row = st.container(horizontal=True, gap="small")
    common = dict(on_click="ignore", width="content", type="tertiary")
    row.download_button("PNG", data=lambda: figures.to_image(fig, "png"), file_name=f"{base}.png",
                        mime="image/png", key=f"dl_png_{key}", icon=":material/image:", **common)
    row.download_button("SVG", data=lambda: figures.to_image(fig, "svg"), file_name=f"{base}.svg",
                        mime="image/svg+xml", key=f"dl_svg_{key}", icon=":material/draw:", **common)
    csv = (lambda: figures.to_csv(data)) if data is not None else (lambda: figures.to_csv(figures.figure_data(fig)))
    row.download_button("CSV", data=csv, file_name=f"{base}.csv", mime="text/csv", key=f"dl_csv_{key}",
                        icon=":material/table:", **common)


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
