"""Exploration helpers shared by Trade-off, Token clouds and Token: the linked selection (a box or
lasso on a scatter gives a token list the other pages take), nearest types by cosine
(``stats.neighbours``), the tokenizer-normalised lookup (``stats.lookup``) and "your own sentence"
(the worker task ``sentence``). Torch never loads here: the tokenizer is read from its files."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pandas as pd
import streamlit as st

from normvar_core.datadir import DataDir
from normvar_core.destination import write_atomic
from normvar_core.errors import NormvarError
from normvar_core.stats.neighbours import nearest_types
from normvar_core.viz.selection import cloud_handoff, event_points, point_texts
from views import _chrome, _data, _state
from views._run_cache import per_run_version


# ============================================================================ linked selection
def selected_tokens(event) -> list[str]:
    """The distinct tokens (point texts) of a plotly selection event, in selection order (points of another
    shape left out: ``selection.point_texts``)."""
    return point_texts(event_points(event))


OCCURRENCE_BOX = "occurrence_selection"
"""session_state: {"run", "layer", "predicate"} of the Occurrences page's box, while it has one (the Token page
shows the type's contexts inside it)."""


def _sampled_ids(run) -> dict[str, int]:
    have = _data.sampled_tokens(run)
    return dict(zip(have["token"].astype(str), have["token_id"].astype(int)))


def _take(run, tokens: list[str], target: str, section: str | None = None) -> None:
    """on_click: hand the selection to another page (through the view, so links keep it); ``section``: the
    tab it opens there (the Occurrences box's contexts are in the Token page's Contexts tab)."""
    v = _state.view()
    if target == "tradeoff":
        v.tokens = tokens[:HIGHLIGHT_MAX]
        st.session_state["w_tokens"] = ",".join(v.tokens)
    elif target == "clouds":
        v.cloud, note = cloud_handoff(tokens, _sampled_ids(run))
        st.session_state["w_cloud_tokens"] = list(v.cloud)
        st.session_state["_clouds_note"] = (list(v.cloud), note)  # Token clouds says how much of it it draws
    elif target == "token":
        v.token = tokens[0]
        st.session_state["w_token"] = tokens[0]
        v.section = section
        st.session_state[_chrome.SECTION_OF] = target
        st.session_state.pop("w_section_token", None)  # the view's section, not the tab last open there
    st.session_state["_explore_go"] = target


PAGES = {"tradeoff": "views/tradeoff.py", "clouds": "views/clouds.py", "token": "views/token.py"}
HIGHLIGHT_MAX = 50  # Trade-off highlights at most this many types (each one a labelled point)
KEPT = "_explore_selection"
"""session_state: {bar key: (run name, tokens)}, the last selection of each selection bar, kept until the user
clears it (the chart's own selection is gone once the page is left)."""


def _clear(key: str) -> None:
    st.session_state.get(KEPT, {}).pop(key, None)


def kept_selection(run, tokens: list[str], key: str) -> list[str]:
    """``tokens`` when the chart has a selection (remembered), else the one remembered for this bar and run."""
    kept = st.session_state.setdefault(KEPT, {})
    if tokens:
        kept[key] = (run.name, list(tokens))
        return tokens
    name, old = kept.get(key, (None, []))
    return list(old) if name == run.name else []


def selection_bar(run, tokens: list[str], *, key: str, here: str) -> None:
    """Under a scatter with box/lasso selection: the selected tokens (kept until cleared) and buttons that hand
    them to the other pages (Trade-off's highlights, Token clouds' tokens, the Token view of a type picked
    among them), each saying how many of them it takes."""
    go = st.session_state.pop("_explore_go", None)
    if go and go != here:
        st.switch_page(PAGES[go])
    tokens = kept_selection(run, tokens, key)
    if not tokens:
        st.caption("Click a point, or drag a box or lasso (the chart's toolbar) to select token types.")
        return
    shown = ", ".join(f"`{t}`" for t in tokens[:40]) + (" …" if len(tokens) > 40 else "")
    st.markdown(f"**Selection: {len(tokens)} token type{'s' if len(tokens) != 1 else ''}** — {shown}")
    row = st.container(horizontal=True, gap="small")
    n_high = min(len(tokens), HIGHLIGHT_MAX)
    row.button(
        "Highlight on Trade-off"
        if n_high == len(tokens)
        else f"Highlight the first {n_high} of {len(tokens)} on Trade-off",
        key=f"{key}_to_tradeoff",
        on_click=_take,
        args=(run, tokens, "tradeoff"),
        icon=":material/scatter_plot:",
        help=f"the highlighted tokens (at most {HIGHLIGHT_MAX}, in selection order; also in the URL: ?tokens=)",
    )
    n_cloud = len(cloud_handoff(tokens, _sampled_ids(run))[0])
    row.button(
        "Show in Token clouds" if n_cloud == len(tokens) else f"Show {n_cloud} of {len(tokens)} in Token clouds",
        key=f"{key}_to_clouds",
        on_click=_take,
        args=(run, tokens, "clouds"),
        icon=":material/bubble_chart:",
        disabled=n_cloud == 0,
        help="the selected types with stored samples (at most 50)",
    )
    row.button("Clear selection", key=f"{key}_clear", on_click=_clear, args=(key,), icon=":material/close:")
    pick = st.container(horizontal=True, gap="small", vertical_alignment="bottom")
    one = pick.selectbox(f"Type to open in Token (any of the {len(tokens)})", tokens, key=f"{key}_token_pick")
    pick.button(
        "Open in Token",
        key=f"{key}_to_token",
        on_click=_take,
        args=(run, [one], "token", "contexts" if here == "occurrences" else None),
        icon=":material/search:",
    )


# ============================================================================ nearest types
def neighbours(run, layer: int, query, k: int, exclude: int | None = None) -> pd.DataFrame:
    """The ``k`` types nearest to ``query`` by cosine at ``layer``, with their n, Q, M, V there."""
    st_ = _data.stats(run)
    li = st_.layer(layer)
    nn = nearest_types(st_.mean[li], st_.token_ids, query, k, exclude=exclude)
    table = _data.token_table(run, layer)
    return nn.merge(table[["token_id", "token", "n", "q", "m", "v"]], on="token_id", how="left")


NN_COLUMNS = {
    "cosine": st.column_config.NumberColumn("cosine", format="%.4f"),
    "q": st.column_config.NumberColumn("Q(X_t)", format="%.4g"),
    "m": st.column_config.NumberColumn("M(X_t)", format="%.4g"),
    "v": st.column_config.NumberColumn("V(X_t)", format="%.4g"),
    "n": st.column_config.NumberColumn("n_t", format="%d"),
}


# ============================================================================ lookup
@st.cache_resource(show_spinner=False, max_entries=8)
def tokenizer_files(model: str, data_dir: str):
    """The run's tokenizer, read from its files (``pipeline.tokenizer_files``; no torch)."""
    from normvar_core.pipeline.models.tokenizer_files import for_model

    return for_model(model, data_dir)


def tokenizer_of(run):
    return tokenizer_files(str(run.meta.get("model") or ""), str(_data.data_dir()))


# ============================================================================ t-SNE
def tsne_file(run, layer: int, cache: Path) -> Path:
    """Where the map of (run file version, layer, seed, t-SNE settings) is kept under the data dir's
    ``cache``: tsne/<run>/<digest>-layer<L>.parquet."""
    from normvar_core.viz import clouds

    key = repr((tuple(run.version), clouds.TSNE_SEED, clouds.TSNE_PCA_DIMS, clouds.TSNE_ITERATIONS))
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache / "tsne" / re.sub(r"[^A-Za-z0-9._-]+", "_", run.name) / f"{digest}-layer{int(layer)}.parquet"


def stored_tsne(run, layer: int, cache: Path | None) -> pd.DataFrame:
    """``viz.clouds.tsne_map`` of all the run's sampled embeddings at ``layer``, read from ``tsne_file``
    when there, else computed and written there as Parquet (atomic rename; the maps of the run's older
    versions are removed). ``cache`` None (a data dir without a writable cache): computed only."""
    from normvar_core.viz.clouds import tsne_map

    path = tsne_file(run, layer, cache) if cache is not None else None
    if path is not None and path.is_file():
        try:
            return pd.read_parquet(path)
        except Exception:
            pass
    tmap = tsne_map(run.samples(int(layer)))
    if path is None:
        return tmap
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob("*-layer*.parquet"):
            if old.name.split("-")[0] != path.name.split("-")[0]:
                old.unlink(missing_ok=True)
        write_atomic(path, lambda tmp: tmap.to_parquet(tmp, index=False))
    except (OSError, NormvarError):  # a cache that cannot be written: the map is still shown
        pass
    return tmap


@per_run_version(16)
def tsne(run, layer: int) -> pd.DataFrame:
    """The seeded t-SNE map of the run's sampled embeddings at ``layer``, computed once per run file
    version and layer: in memory for every session, and on disk in the data dir's cache/tsne/ so that a
    restarted dashboard reads it back (``stored_tsne``)."""
    try:
        cache = DataDir.at(_data.data_dir()).cache
    except NormvarError:
        cache = None
    return stored_tsne(run, layer, cache)


__all__ = [
    "selected_tokens",
    "selection_bar",
    "neighbours",
    "NN_COLUMNS",
    "tokenizer_of",
    "tsne_file",
    "stored_tsne",
    "tsne",
]
