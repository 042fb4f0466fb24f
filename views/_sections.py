"""A page's figure tabs: each ``Figure`` that ``viz.page_figures`` lists for the page is a tab, in that order. A
tab the page draws itself is passed in ``own`` ({figure key: draw()}); any other is drawn here by the figure's
builder with the generic arguments (``builder(curves, *, relative, num_hidden_states, presentation, bands,
null_curves, null_of)``) on the first table it reads, for every overlaid run that holds what it reads
(``page_figures.holds``); runs without it are named with the fix (recompute), so an old run file opens and says why
the section is empty. The curves that the overlaid runs' measures declare for the page (``runs.declared``, carried
by the run file) follow the page's own figures in one further tab, ``MORE`` (``more_curves``: a row of their names
chooses the one drawn, the same generic way), so that the tab strip holds every tab in view however many curves the
runs' measures declare."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
import streamlit as st

from normvar_core.viz.page_figures import Figure, declared_figures, figures, holds
from views._chrome import chart, draw_sections
from views._data import table
from views._state import view

MORE = "More curves"
"""The label of the tab that holds the curves the runs' measures declare for a page (``more_curves``)."""


@dataclass
class Overlay:
    """What a page overlays: label -> opened run (``runs``) and Gaussian null run (``nulls``, ``null_of``: the
    run each null was drawn from), the runs' stored intervals (``bands``: label -> table), the axis."""

    runs: dict
    nulls: dict = field(default_factory=dict)
    null_of: dict = field(default_factory=dict)
    bands: dict = field(default_factory=dict)
    relative: bool = True
    presentation: bool = False
    name: str = "figure"


def generic(f: Figure, ov: Overlay) -> None:
    """Figure ``f`` over the overlaid runs that hold it, with its CSV; the others named with the fix; then the
    figures ``f.below`` the same way."""
    _one(f, ov)
    for g in f.below:
        _one(g, ov)


def _one(f: Figure, ov: Overlay) -> None:
    have = {label: r for label, r in ov.runs.items() if holds(r, f)}
    lacking = [label for label in ov.runs if label not in have]
    if not have:
        st.info(
            f"No run here has {f.measure}: {', '.join(lacking)} {'was' if len(lacking) == 1 else 'were'} computed "
            f"before normvar measured it, or without what it needs. Recompute (New run, or `normvar compute ... "
            f"--overwrite`) to see this section.",
            icon=":material/info:",
        )
        return
    curves = {label: table(r, f.tables[0]) for label, r in have.items()}
    nulls = {label: table(r, f.tables[0]) for label, r in ov.nulls.items() if holds(r, f)}
    fig = f.builder(
        curves,
        relative=ov.relative,
        presentation=ov.presentation,
        num_hidden_states={label: r.num_hidden_states for label, r in {**have, **ov.nulls}.items()},
        bands={label: ov.bands[label] for label in have if label in ov.bands},
        null_curves=nulls,
        null_of=ov.null_of,
    )
    data = pd.concat([df.assign(run=label) for label, df in {**curves, **nulls}.items()], ignore_index=True)
    chart(fig, key=f.key, data=data, name=f"{ov.name}_{f.key}")
    if lacking:
        st.caption(
            f"Without {f.measure} (computed before normvar measured it: recompute to include): " + ", ".join(lacking)
        )


def more_curves(
    page: str, figs: tuple[Figure, ...], draw_one: Callable[[Figure], None]
) -> dict[str, tuple[str, Callable[[], None]]]:
    """Figures of the generic builder (``figs``: the curves that the runs' measures declare; on Compare also the ID
    across scales and the neighbourhood overlap) as one tab, ``{slug: (MORE, draw)}`` ({} without any):
    inside it a row of their titles (a horizontal radio, wrapped, so every name is in view) chooses the curve that
    ``draw_one`` draws. The slug is the chosen curve's key, so the link (``?section=<key>``) opens the tab on that
    curve; the choice is kept while another tab is open."""
    if not figs:
        return {}
    v, key = view(), f"w_curve_{page}"
    titles = {f.section: f for f in figs}
    keys = {f.key: f.section for f in figs}
    held = next((t for t in (st.session_state.get(key), st.session_state.get(f"_{key}")) if t in titles), None)
    chosen = held or keys.get(v.section or "") or figs[0].section
    st.session_state[key] = chosen

    def draw() -> None:
        got = st.radio("Curve", list(titles), key=key, horizontal=True, label_visibility="collapsed")
        st.session_state[f"_{key}"] = got
        v.section = titles[got].key  # the link names the curve drawn
        draw_one(titles[got])

    return {titles[chosen].key: (MORE, draw)}


def draw(
    page: str,
    own: dict[str, Callable[[], None]],
    overlay: Overlay | None = None,
    *,
    extra: dict[str, tuple[str, Callable[[], None]]] | None = None,
) -> str:
    """The page's figures (``page_figures.figures``) as tabs, each under its label (only the open one computed,
    ``_chrome.draw_sections``): the page's own ``draw()`` for the keys in ``own``, the generic figure over
    ``overlay`` for the rest; then the curves the overlaid runs declare in one tab (``more_curves``); then the
    page's further tabs (``extra``: ``{slug: (title, draw)}``, e.g. a table). Returns the open key."""
    tabs = {}
    for f in figures(page):
        if f.key not in own and overlay is None:
            raise ValueError(f"page {page!r} draws no {f.key!r}, which it lists, and has no overlay for it")
        tabs[f.key] = (f.label, own[f.key] if f.key in own else (lambda f=f: generic(f, overlay)))
    if overlay is not None:
        declared = declared_figures(page, overlay.runs.values())
        tabs.update(more_curves(page, declared, lambda f: generic(f, overlay)))
    return draw_sections(page, {**tabs, **(extra or {})})


__all__ = ["MORE", "Overlay", "generic", "more_curves", "draw"]
