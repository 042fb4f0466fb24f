"""Dashboard plumbing, part 2: the view state (run, layer, band, highlighted tokens, presentation)
kept in ``st.session_state`` and mirrored into the URL's query parameters, and the widgets bound to it."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import streamlit as st

from normvar_core.runs.null import nulls_of
from normvar_core.viz import depth, viewstate
from normvar_core.viz.overlay import null_label, runs_in_order
from normvar_core.viz.viewstate import ViewState
from views._data import open_run, runs_table, table


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
    if st.session_state.pop("_sections_of", None) != page:  # a page without sections keeps none in its link
        v.section = None
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
    names = runs_in_order(runs)
    where = st.sidebar if sidebar else st
    if not names:
        where.info("No published run yet.")
        v.run = None
        return
    labels = {r["name"]: f"{r['name']}  ·  {r['model']}" for _, r in runs.iterrows()}
    last = last_run()
    bind("w_run", v.run if v.run in names else last if last in names else names[0], lambda x: x in names)
    v.run = where.selectbox(
        "Run",
        names,
        key="w_run",
        format_func=lambda n: labels.get(n, n),
        help="published runs, newest first; each Gaussian null under its run. A link names "
        "its run; a tab opened without one shows the run this browser used last",
    )
    with where:
        remember_run(v.run)


LAST_RUN_COOKIE = "normvar_run"


def last_run() -> str | None:
    """The run this browser used last (the cookie :func:`remember_run` sets), for a tab opened without ``?run=``;
    Streamlit reads a session's cookies once, when its tab connects."""
    raw = st.context.cookies.get(LAST_RUN_COOKIE)
    return unquote(raw) if raw else None


def remember_run(name: str) -> None:
    """Set the browser's last-run cookie (a year, this site only) to ``name``."""
    cookie = f"{LAST_RUN_COOKIE}={quote(name, safe='')}; path=/; max-age=31536000; SameSite=Strict"
    st.html(f"<script>document.cookie = {json.dumps(cookie)};</script>", unsafe_allow_javascript=True)


def layer_slider(run, label: str = "Layer", key: str = "w_layer") -> int:
    """Layer slider over the run's stored hidden-state indices (0 = input embeddings)."""
    v = view()
    layers = [int(x) for x in run.layers]
    bind(key, depth.nearest_layer(layers, v.layer), lambda x: x in layers)
    if len(layers) == 1:
        st.caption(f"Layer {layers[0]} (the only stored layer)")
        v.layer = layers[0]
        return layers[0]
    layer = st.select_slider(
        label,
        options=layers,
        key=key,
        help=f"hidden-state index: 0 = input embeddings, {run.num_hidden_states - 1} = last layer",
    )
    v.layer = int(layer)
    return int(layer)


def band_slider(run=None, key: str = "w_band") -> tuple[float, float]:
    """Frequency band in log10 n_t (default 1..5, i.e. 10 <= n_t <= 1e5 as in the study)."""
    v = view()
    top = 5.0
    if run is not None:
        try:
            top = max(5.0, float(runs_max_log10n(run)))
        except Exception:
            pass
    lo, hi = v.band
    bind(key, (min(lo, top), min(hi, top)), lambda x: isinstance(x, tuple) and len(x) == 2)
    band = st.slider(
        "Frequency band: log₁₀ nₜ",
        min_value=0.0,
        max_value=top,
        step=0.1,
        key=key,
        help="only token types with 10^lo ≤ n_t ≤ 10^hi enter the regressions and figures "
        "(the study: 1 ≤ log₁₀ n_t ≤ 5)",
    )
    band = (round(float(band[0]), 2), round(float(band[1]), 2))
    v.band = band
    return band


def runs_max_log10n(run) -> float:
    fh = run.frequency_hist()
    if len(fh) and "log10_n_right" in fh:
        return math.ceil(float(fh["log10_n_right"].max()))
    return 5.0


def tokens_input(key: str = "w_tokens", label: str = "Highlight tokens") -> list[str]:
    v = view()
    bind(key, viewstate.format_tokens(v.tokens))
    raw = st.text_input(
        label,
        key=key,
        placeholder="e.g. the, once, winked",
        help="comma-separated; '##ing', 'Ġing' and 'ing' are the same token (footnote 7)",
    )
    v.tokens = viewstate.parse_tokens(raw)
    return v.tokens


def runs_to_overlay(label: str, key: str, relative_key: str, relative_default: bool) -> tuple[list[str], bool]:
    """The runs overlaid on a per-layer figure (a multiselect; the sidebar's run always first) and the
    relative-depth toggle (x = layer / (hidden states − 1), so models of different depth line up).
    Both live in the view (``?overlay=`` and ``?rel=``), so a shared link restores them."""
    v = view()
    names = runs_in_order(runs_table())
    c1, c2 = st.columns([3, 1])
    with c1:
        bind(
            key,
            [v.run] + [n for n in v.overlay if n in names and n != v.run],
            lambda x: isinstance(x, list) and all(n in names for n in x),
        )
        chosen = st.multiselect(
            label,
            names,
            key=key,
            help="the sidebar's run is always included; real runs first, each Gaussian null under its run",
        )
    with c2:
        bind(relative_key, relative_default if v.relative is None else v.relative)
        relative = st.toggle(
            "Relative depth", key=relative_key, help="x = layer / (number of layers): models of different depth line up"
        )
    v.overlay = [n for n in chosen if n != v.run]
    v.relative = None if relative == relative_default else bool(relative)
    return [v.run] + v.overlay, relative


WORD_COLOUR = "n_subtokens"


def word_colour(run, key: str = "w_word_colour") -> dict | None:
    """Word runs (App. J): "Colour by |T_w|" — the study's Fig. 22 artifact (words with the same number of
    tokens cluster in shallow layers). Returns {token_id: |T_w|} when on, else None."""
    if run.meta.get("unit") != "word" or not run.has("word_units"):
        return None
    bind(key, True)
    if not st.toggle(
        "Colour words by |T_w|",
        key=key,
        help="App. J, Fig. 22: the number of tokens of each word; in shallow layers words with the same |T_w| cluster",
    ):
        return None
    return word_units(run)


def word_units(run) -> dict:
    """{token_id: |T_w|} of a word run (App. J)."""
    units = table(run, "word_units")
    return dict(zip(units["token_id"].astype(int), units["n_subtokens"].astype(float)))


def with_word_colour(df, colours: dict | None):
    """``df`` with the |T_w| column (``WORD_COLOUR``) when ``colours`` is given."""
    if colours is None or df is None or not len(df):
        return df
    return df.assign(**{WORD_COLOUR: df["token_id"].map(colours).astype(float)})


def pool_toggle(key: str = "w_pool") -> bool:
    """The study's footnote-7 pooling: "##ing" with "ing", "Ġthe" with "the" (exact, ``merge_by_key``)."""
    v = view()
    bind(key, v.pool)
    v.pool = bool(
        st.toggle(
            "Pool sub-word variants",
            key=key,
            help='fn. 7: pool the types that differ only by a sub-word marker ("##ing" with '
            '"ing", "Ġthe" with "the"), exactly: pooled n, mean and variance',
        )
    )
    return v.pool


def null_picker(run, key: str = "w_null"):
    """The Gaussian null (seed 003) overlaid on this page's figures: a selectbox over the published null
    runs of ``run`` (shared by every page and kept in the URL as ``?null=``). Returns (label, Run) or
    (None, None)."""
    v = view()
    nulls = nulls_of(runs_table(), run.name)
    options = ["none"] + nulls
    bind(key, v.null if v.null in nulls else "none", lambda x: x in options)
    pick = st.selectbox(
        "Gaussian null (high-dimensional baseline)",
        options,
        key=key,
        help="overlay what plain Gaussians with the same token counts give (dashed grey, a grey "
        "cloud behind scatters). Draw one with the button on Runs or `normvar null RUN`.",
    )
    v.null = None if pick == "none" else pick
    nr = open_run(pick) if v.null else None
    return (null_label(nr.meta), nr) if nr is not None else (None, None)


# ============================================================================ a page's header row
@dataclass
class Controls:
    """What the header row of a run page set: the layer, the band (log10 n_t), the pooling toggle, the
    Gaussian null (label and Run, or None), and the columns left for the page's own widgets."""

    layer: int | None = None
    band: tuple[float, float] | None = None
    pool: bool = False
    null_label: str | None = None
    null_run: Any = None
    extra: list = field(default_factory=list)


def page_controls(
    run, *, layer: bool = False, band: bool = False, pool: bool = False, null: bool = False, extra: Sequence[float] = ()
) -> Controls:
    """The header row the run pages share, the widgets asked for in this order, each in a column of
    width 2: the layer slider, the band slider with the pooling toggle under it, the Gaussian-null
    picker; then columns of the widths ``extra`` for the page's own widgets (``Controls.extra``)."""
    widths = [2] * (int(layer) + int(band or pool) + int(null)) + list(extra)
    cols = iter(st.columns(widths))
    out = Controls()
    if layer:
        with next(cols):
            out.layer = layer_slider(run)
    if band or pool:
        with next(cols):
            out.band = band_slider(run) if band else None
            out.pool = pool_toggle() if pool else False
    if null:
        with next(cols):
            out.null_label, out.null_run = null_picker(run)
    out.extra = list(cols)
    return out


__all__ = [
    "Controls",
    "page_controls",
    "WORD_COLOUR",
    "word_colour",
    "word_units",
    "with_word_colour",
    "pool_toggle",
    "runs_to_overlay",
    "null_picker",
    "view",
    "sync_url",
    "bind",
    "run_selector",
    "layer_slider",
    "band_slider",
    "runs_max_log10n",
    "tokens_input",
]
