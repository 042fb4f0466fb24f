"""The slides of a report: a registry of builders (``REGISTRY``, listed by import), each taking the report's runs
and returning a Slide or None when the runs lack what it needs. ``figure_slide``, the generic one, draws a figure of
``viz.page_figures`` with its own builder (IsoScore's), so a new figure's slide is a line of the registry
(``figure_slides``: with a slide for each figure drawn ``below`` it in its tab); ``declared_slides`` gives one slide per
curve that the runs'
measures declare (``runs.declared``, carried by the run file), with no line at all. A builder may return a list of
slides.

A Slide holds a plotly figure in the presentation theme at 16:9 (the dashboard page's figure of the same builder,
through ``figure_export.on_slide``; a comparison's per-run figures side by side, ``figure_export.side_by_side``),
text lines or a table of text, a one-line takeaway computed from the numbers (a value a run lacks is "—", with the
reason), and speaker notes with the exact values."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

import plotly.graph_objects as go

from normvar_core.constants import STUDY_BAND
from normvar_core.report.drawn_reads import cloud_read, frequency_read
from normvar_core.report.figure_reads import READS, per_layer, table_notes
from normvar_core.report.run_figures import (
    MISSING,
    cloud_figure,
    frequency_figure,
    no_band_types,
    num,
    peak,
    tradeoff_figure,
)
from normvar_core.stats import analyses, twonn_context
from normvar_core.stats import layer_geometry as G
from normvar_core.viz import geometry_figures as GF
from normvar_core.viz.decomposition_figures import decomposition_bars, decomposition_compare
from normvar_core.viz.depth import default_layer
from normvar_core.viz.figure_export import SLIDE_SIZE, on_slide, side_by_side
from normvar_core.viz.page_figures import DECIMATION, ISOSCORE, OVERLAP, SCALES, Figure, declared_figures, holds
from normvar_core.viz.tradeoff_figures import layers_figure

WIDTH, HEIGHT = SLIDE_SIZE  # 16:9
FIGURE_SIZE = (WIDTH, HEIGHT - 120)
"""A figure's size on a slide: the slide less its heading."""


VERDICT_FILLS = {"holds": "#d9f2d9", "fails": "#f8d7d7", "cannot tell": "#fff3cd", "untestable": "#eeeeee"}


@dataclass(frozen=True)
class Table:
    """A table of text (the findings): its header, rows of cells and each cell's fill colour."""

    header: list[str]
    rows: list[list[str]]
    fills: list[list[str]]


@dataclass
class Slide:
    title: str
    takeaway: str
    notes: str
    figure: go.Figure | None = None
    lines: list[str] = field(default_factory=list)  # a text slide (the title slide)
    table: Table | None = None  # a table slide (the findings)
    deck: str = ""
    """The deck's name (the title slide carries it: the report's runs): the PPTX and PDF title metadata."""
    _png: bytes | None = field(default=None, repr=False)
    _pdf: bytes | None = field(default=None, repr=False)

    def png(self) -> bytes:
        """The figure as a 16:9 PNG (kaleido), rendered once and shared by the PPTX and PDF writers."""
        if self._png is None:
            from normvar_core.viz.figure_export import to_image

            self._png = to_image(self.figure, "png", width=FIGURE_SIZE[0], height=FIGURE_SIZE[1], scale=1.25)
        return self._png

    def pdf(self) -> bytes:
        """The figure as a one-page vector PDF (kaleido: its text is text), for the PDF deck; rendered once."""
        if self._pdf is None:
            from normvar_core.viz.figure_export import to_image

            self._pdf = to_image(self.figure, "pdf", width=FIGURE_SIZE[0], height=FIGURE_SIZE[1])
        return self._pdf


def _fit(fig: go.Figure) -> go.Figure:
    """The slide's figure: the page's, at the size under the heading (``figure_export.on_slide``)."""
    return on_slide(fig, *FIGURE_SIZE)


def _depth(run) -> int:
    return run.num_hidden_states


def reproduce(run) -> str:
    """The ``normvar compute`` command that reproduces the run (from its stored RunConfig)."""
    from normvar_core.config import RunConfig

    opts = dict(run.meta.get("options") or {})
    default = RunConfig()
    parts = ["normvar", "compute"]
    for k, v in sorted(opts.items()):
        if not hasattr(default, k) or v == getattr(default, k) or (k == "layers" and v is None):
            continue
        flag = "--" + k.replace("_", "-")
        if isinstance(v, bool):
            parts.append(flag if v else f"--no-{k.replace('_', '-')}")
        elif isinstance(v, list):
            parts += [flag, ",".join(map(str, v))]
        else:
            parts += [flag, str(v)]
    return " ".join(shlex.quote(p) for p in parts)


# ----------------------------------------------------------------------------- builders
_FINDINGS: dict = {}


def run_findings(run) -> dict:
    """{claim id: Finding} of a run (``stats.findings``), computed once per run file per process."""
    from normvar_core.stats.findings import findings

    key = (str(run.path), run.version)
    if key not in _FINDINGS:
        _FINDINGS[key] = {f.id: f for f in findings(run)}
    return _FINDINGS[key]


def verdicts(runs, *ids: str) -> str:
    """ " Claim <id>: holds (value [interval])" for the slides' takeaways."""
    from normvar_core.stats.findings import cell

    parts = []
    for cid in ids:
        cells = [
            f"{r.name}: {cell(run_findings(r)[cid])}" if len(runs) > 1 else cell(run_findings(r)[cid]) for r in runs
        ]
        parts.append(f"claim {cid} — " + "; ".join(cells))
    return " · " + " · ".join(parts) if parts else ""


def findings_slide(runs) -> Slide:
    """The verdict table: one row per claim, one column per run (``stats.findings``), as text that each writer
    wraps (and continues on a further slide when it runs past one)."""
    from normvar_core.stats.findings import CLAIMS, cell

    per = {r.name: run_findings(r) for r in runs}
    header = ["claim (seed)"] + list(per)
    rows = [[f"{c.id} ({c.seed}): {c.wording}"] + [cell(fs[c.id]) for fs in per.values()] for c in CLAIMS]
    fills = [["#ffffff"] + [VERDICT_FILLS[fs[c.id].verdict] for fs in per.values()] for c in CLAIMS]
    counts = [
        f"{n}: {sum(f.verdict == 'holds' for f in fs.values())} hold, "
        f"{sum(f.verdict == 'fails' for f in fs.values())} fail, "
        f"{sum(f.verdict == 'cannot tell' for f in fs.values())} cannot tell, "
        f"{sum(f.verdict == 'untestable' for f in fs.values())} untestable"
        for n, fs in per.items()
    ]
    notes = "\n\n".join(
        f"{n}\n" + "\n".join(f"{f.id}: {f.verdict} — {f.why}" for f in fs.values()) for n, fs in per.items()
    )
    where = "these runs" if len(runs) > 1 else "this run"
    return Slide(
        f"Findings: each claim of the studies tested on {where}",
        "; ".join(counts),
        notes,
        table=Table(header, rows, fills),
    )


def title_slide(runs) -> Slide:
    lines = []
    for run in runs:
        m = run.meta
        lines += [
            f"{run.name}: {m.get('model')}"
            + (f" @ {m['revision']}" if m.get("revision") else "")
            + f" ({m.get('architecture')}, {m.get('norm_placement')}-{m.get('norm_type')}, "
            f"{m.get('num_layers')} layers × {m.get('dim')} d)",
            f"corpus {m.get('corpus_name')}: {int(m.get('n_sentences') or 0):,} sentences; "
            f"|X| = {int(m.get('n_embeddings') or 0):,} per layer, |T| = {int(m.get('n_types') or 0):,}; "
            f"{m.get('created_at')}",
            f"reproduce: {reproduce(run)}",
        ]
    title = "Norm of the mean vs. variance of contextualized embeddings"
    return Slide(
        title, "Exact statistics over every embedding (normvar)", "\n".join(lines), lines=lines, deck=deck_name(runs)
    )


def deck_name(runs) -> str:
    """The report's name: its run, or its runs joined by " vs "."""
    return " vs ".join(r.name for r in runs)


def tradeoff_slide(runs) -> Slide | None:
    """Fig. 2 of each run at the layer where its R² peaks: the Trade-off page's figure, side by side."""
    figs, takes, notes, missing = {}, [], [], []
    for run in runs:
        tr = analyses.tradeoff(run.stats(), *STUDY_BAND)
        best = peak(tr, "r2")
        if best is None:
            missing.append(no_band_types(run))
            continue
        layer = int(best["layer"])
        figs[f"{run.name} · layer {layer}"] = tradeoff_figure(run, layer, tr)
        takes.append(
            f"{_who(runs, run)}at layer {layer}, where R² peaks, V(X_t) falls with M(X_t): slope "
            f"{num(best['slope'])}, R² {num(best['r2'])} over {int(best['n_types']):,} types"
        )
        notes.append(_who(runs, run) + "\n" + table_notes(tr, ["layer", "n_types", "cv_q", "slope", "intercept", "r2"]))
    title = _titled(runs, "the M–V trade-off (Fig. 2)")
    if not figs:
        return missing_slide(title, missing)
    have = [r for r in runs if any(k.startswith(f"{r.name} · ") for k in figs)]
    take = "; ".join(takes + missing) + verdicts(have, "tradeoff_slope")
    return Slide(title, _sentence(runs, take), "\n\n".join(notes), _fit(side_by_side(figs, size=FIGURE_SIZE)))


def layers_slide(runs) -> Slide | None:
    curves = {r.name: analyses.tradeoff(r.stats(), *STUDY_BAND) for r in runs}
    missing = [no_band_types(r) for r in runs if peak(curves[r.name], "cv_q") is None]
    have = [r for r in runs if peak(curves[r.name], "cv_q") is not None]
    rel = len(runs) > 1
    title = (
        _titled(runs, "where the trade-off is strongest (Fig. 4)")
        if rel
        else "Where the trade-off is strongest (Fig. 4)"
    )
    if not have:
        return missing_slide(title, missing)
    from normvar_core.stats.intervals import run_intervals

    fig = layers_figure(
        {r.name: curves[r.name] for r in have},
        relative=rel,
        num_hidden_states={r.name: _depth(r) for r in have},
        presentation=True,
        bands={r.name: run_intervals(r) for r in have},
    )
    parts, notes = [], []
    for r in have:
        tr = curves[r.name]
        m = peak(tr, "cv_q", smallest=True)
        parts.append(
            f"{r.name}: C.V. of Q is smallest at layer {int(m['layer'])} ({num(m['cv_q'], '.3f')}), where "  # type: ignore[index]  # m is set on this branch
            f"the slope of V on M is {num(m['slope'])}, R² {num(m['r2'])}"  # type: ignore[index]
        )
        notes.append(f"{r.name}\n" + table_notes(tr, ["layer", "cv_q", "slope", "r2"]))
    return Slide(
        title, "; ".join(parts + missing) + verdicts(have, "cv_min_intermediate"), "\n\n".join(notes), _fit(fig)
    )


def decomposition_slide(runs) -> Slide | None:
    decs = {r.name: analyses.decomposition(r.stats(), *STUDY_BAND) for r in runs}
    have = [r for r in runs if peak(decs[r.name], "m_over_q") is not None]
    missing = [no_band_types(r) for r in runs if r not in have]
    title = _titled(runs, "Q = M + V_W + V_B across depth (Fig. 5, 6)")
    if not have:
        return missing_slide(title, missing)
    claims = verdicts(have, "vw_share_grows", "m_grows_vb_shrinks")
    if len(runs) > 1:
        fig = decomposition_compare(
            {r.name: decs[r.name] for r in have},
            relative=True,
            num_hidden_states={r.name: _depth(r) for r in have},
            presentation=True,
        )
        take = "; ".join(
            [
                f"{r.name}: V_W/V grows from {num(decs[r.name]['v_w_over_v'].iloc[0])} to "
                f"{num(decs[r.name]['v_w_over_v'].iloc[-1])}"
                for r in have
            ]
            + missing
        )
        notes = "\n\n".join(
            f"{r.name}\n" + table_notes(decs[r.name], ["layer", "m_over_q", "v_w_over_q", "v_b_over_q", "v_w_over_v"])
            for r in have
        )
        return Slide(title, take + claims, notes, _fit(fig))
    run, dec = runs[0], decs[runs[0].name]
    fig = decomposition_bars(dec, presentation=True)
    top = peak(dec, "m_over_q")
    take = (
        f"V_W/V grows from {num(dec['v_w_over_v'].iloc[0])} (layer {int(dec['layer'].iloc[0])}) to "
        f"{num(dec['v_w_over_v'].iloc[-1])} (layer {int(dec['layer'].iloc[-1])}); M/Q peaks at "
        f"{num(top['m_over_q'])} (layer {int(top['layer'])})"  # type: ignore[index]  # top is set on this branch
    )
    notes = table_notes(dec, ["layer", "q", "m", "v_w", "v_b", "m_over_q", "v_w_over_v"])
    return Slide(title, take + claims, notes + _layernorm_notes(run), _fit(fig))


def _layernorm_notes(run) -> str:
    """App. I for the speaker notes: Q(X) over all embeddings against ‖γ‖² + ‖β‖² per norm-output
    layer, and the γ-weighting that explains the gap (``stats.layernorm.layernorm_attribution``)."""
    if not (run.has("norm_affine") and run.has("dim_stats") and run.has("norm_params")):
        return ""
    from normvar_core.stats.layernorm import layernorm_attribution

    att = layernorm_attribution(run.table("norm_affine"), run.table("dim_stats"), run.table("norm_params"))
    if not len(att):
        return ""
    return (
        "\n\nApp. I — LayerNorm's prediction ‖γ‖² + ‖β‖² against Q(X) over all embeddings; "
        "γ-weighting = Σγ²E z²/‖γ‖², top-5 share = z's energy in its 5 largest coordinates\n"
        + table_notes(
            att, ["layer", "q_all", "q_pred", "q_over_pred", "gamma_weighting", "top_z_share", "top_gamma_sq_ratio"]
        )
    )


def frequency_slide(runs) -> Slide | None:
    """Fig. 7 of each run at its middle layer: the Frequency page's scatter, one row per run; the takeaway reads the
    drawn types by rank (``drawn_reads.frequency_read``: Spearman's ρ per panel, the word following its sign)."""
    figs, takes, notes, missing = {}, [], [], []
    for run in runs:
        regs = analyses.frequency_regressions(run.stats(), *STUDY_BAND)
        layer = default_layer(run.layers)
        r = regs[regs["layer"] == layer].set_index("quantity")
        if not {"M", "V", "Q"} <= set(r.index) or r["slope"].isna().all():
            missing.append(no_band_types(run))
            continue
        figs[f"{run.name} · layer {layer}"], points = frequency_figure(run, layer, regs)
        clause, read = frequency_read(points, regs, layer)
        takes.append(f"{_who(runs, run)}at layer {layer}, {clause}")
        notes.append(
            _who(runs, run)
            + f"\nat layer {layer}, Spearman's ρ against n_t over the drawn types, and the drawn line's slope of "
            f"log₁₀(1 + Z) on log₁₀ n_t\n"
            + table_notes(read, ["quantity", "types", "spearman_rho", "slope"])
            + "\n\nevery layer's fitted line\n"
            + table_notes(regs, ["layer", "quantity", "slope", "r2"])
        )
    title = _titled(runs, "frequency (Fig. 7)")
    if not figs:
        return missing_slide(title, missing)
    take = "; ".join(takes + missing)
    return Slide(
        title, _sentence(runs, take), "\n\n".join(notes), _fit(side_by_side(figs, rows=True, size=FIGURE_SIZE))
    )


def clouds_slide(runs) -> Slide | None:
    """Fig. 1 of each run at its middle layer: the Token clouds page's figure, side by side; the takeaway reads the
    drawn clouds (``drawn_reads.cloud_read``: each cloud's drawn M/Q, medians over the rarer and the more frequent
    half, Spearman's ρ against n_t, the rarest and the most frequent type with their own numbers)."""
    figs, takes, notes = {}, [], []
    for run in runs:
        layer = default_layer(run.layers)
        # laid out at its share of the slide: the labels are placed in pixels (no overlaps, drawn above the points)
        drawn = cloud_figure(run, layer, width=WIDTH // len(runs), height=HEIGHT - 120)
        if drawn is None:
            continue
        fig, coords, rows = drawn
        figs[f"{run.name} · layer {layer}"] = fig
        said, shares = cloud_read(coords)
        takes.append(f"{_who(runs, run)}at layer {layer}, {said}")
        notes.append(
            _who(runs, run)
            + "\nthe drawn clouds: centre ‖c‖, spread (root mean ‖p − c‖²), drawn M/Q = ‖c‖² / mean ‖p‖²\n"
            + table_notes(shares, ["token", "n", "points", "centre", "spread", "share"])
            + "\n\nover every embedding of the type\n"
            + table_notes(rows, ["token", "n", "q", "m", "v"])
        )
    if not figs:
        return None
    title = _titled(runs, "token clouds (Fig. 1)")
    fig = _fit(side_by_side(figs, size=FIGURE_SIZE))
    return Slide(title, _sentence(runs, "; ".join(takes)), "\n\n".join(notes), fig)


def geometry_slide(runs) -> Slide | None:
    have = [r for r in runs if r.has("geometry")]
    if not have:
        return None
    curves = {r.name: r.table("layer_geometry") for r in have}
    fig = GF.geometry_profiles(
        curves,
        relative=True,
        num_hidden_states={r.name: _depth(r) for r in have},
        presentation=True,
        bands={r.name: r.table("intervals") for r in have if r.has("intervals")},
    )
    parts = []
    for n, g in curves.items():
        top = peak(g, "anisotropy")
        where = f" (layer {int(top['layer'])})" if top is not None else ""
        parts.append(
            f"{n}: anisotropy peaks at {num(g['anisotropy'].max(), '.3f')}{where}, TwoNN ID "
            f"{num(g['twonn_id'].min(), '.1f')}–{num(g['twonn_id'].max(), '.1f')} ({G.sample_text(g)})"
        )
    take = "; ".join(parts)
    differ = G.samples_differ({n: G.recorded_sample(g) for n, g in curves.items()})
    take += f". {differ}" if differ else ""
    for n, g in curves.items():  # the context bias of a small corpus, in words
        if said := twonn_context.context_sentence(g):
            take += f". {n}: {said}"
    if differ := twonn_context.shares_differ(curves):
        take += f" {differ}"
    cols = [
        "layer",
        "anisotropy",
        "anisotropy_batch_mean",
        "participation_ratio",
        "mean_cosine",
        "twonn_id",
        "twonn_id_std",
        "twonn_id_cross",
        "same_sentence_nn",
    ]
    notes = "\n\n".join(f"{n}\n" + table_notes(g, [c for c in cols if c in g]) for n, g in curves.items())
    title = "Layer geometry (Razzhigaev et al. 2024 protocol, Fig. 1)" + (" — these runs" if len(runs) > 1 else "")
    return Slide(title, take + verdicts(have, "anisotropy_profile", "id_profile"), notes, _fit(fig))


def _who(runs, run) -> str:
    """ "name: " before a run's part of a comparison's takeaway; nothing for one run."""
    return f"{run.name}: " if len(runs) > 1 else ""


def _sentence(runs, take: str) -> str:
    """One run's takeaway starts with a capital; a comparison's starts with a run's name, as it is spelled."""
    return take if len(runs) > 1 else take[0].upper() + take[1:]


def _titled(runs, what: str) -> str:
    """A per-run slide's title: "<run>: <what>", or "These runs: <what>" for a comparison."""
    return f"{'These runs' if len(runs) > 1 else runs[0].name}: {what}"


def missing_slide(title: str, reasons: list[str]) -> Slide:
    """A slide whose runs have nothing to draw: "—" and why, for each run."""
    return Slide(title, f"{MISSING}: nothing to draw", "\n".join(reasons), lines=list(reasons))


def figure_slide(f: Figure, claims: tuple[str, ...], runs) -> Slide | None:
    """The generic slide of a figure of ``viz.page_figures``: its builder over the runs that hold what it reads
    (``page_figures.holds``; relative depth, split-half bands from ``intervals``), a takeaway per run and the
    values it draws in the notes (``figure_reads.READS``: the figure's own reading, else ``per_layer``'s) plus the
    verdicts
    of ``claims``."""
    have = [r for r in runs if holds(r, f)]
    if not have:
        return None
    curves = {r.name: r.table(f.tables[0]).sort_values("layer") for r in have}
    fig = f.builder(
        curves,
        relative=True,
        num_hidden_states={r.name: _depth(r) for r in have},
        presentation=True,
        bands={r.name: r.table("intervals") for r in have if r.has("intervals")},
        null_curves={},
        null_of={},
    )
    take, notes = READS.get(f, per_layer)(f, curves)
    return Slide(f.section, take + verdicts(have, *claims), notes, _fit(fig))


def figure_slides(f: Figure, claims: tuple[str, ...], runs) -> list[Slide]:
    """What the page's tab of ``f`` shows, as slides: ``figure_slide`` of ``f`` (with the verdicts of ``claims``),
    then one of each figure drawn ``below`` it, each over the runs that hold it, whether or not they hold ``f``
    (as ``views/_sections.generic`` draws the tab)."""
    return [s for g in (f, *f.below) if (s := figure_slide(g, claims if g is f else (), runs)) is not None]


TABLE_CLAIMS: dict[str, tuple[str, ...]] = {"layer_linearity": ("layers_linear",)}
"""The claims whose verdict a declared curve's slide states, by the curve's table."""


def declared_slides(runs) -> list[Slide]:
    """The ``figure_slides`` of each per-layer curve that the runs' measures declare
    (``page_figures.declared_figures``: each once, in the runs' order), over the runs that hold it, with the
    verdicts of the claims its table decides (``TABLE_CLAIMS``)."""
    return [s for f in declared_figures(None, runs) for s in figure_slides(f, TABLE_CLAIMS.get(f.tables[0], ()), runs)]


REGISTRY: list[Callable] = [
    title_slide,
    findings_slide,
    tradeoff_slide,
    layers_slide,
    decomposition_slide,
    frequency_slide,
    clouds_slide,
    geometry_slide,
    partial(figure_slides, ISOSCORE, ("isoscore_low",)),
    partial(figure_slides, SCALES, ()),
    partial(figure_slides, OVERLAP, ("overlap_profile",)),
    partial(figure_slides, DECIMATION, ("id_profile",)),
    declared_slides,
]
"""The deck, in order: the title, the findings, then one slide per figure (the figure's page order: Trade-off,
Layers, Decomposition, Frequency, Token clouds, then the Geometry page's tabs: its profiles, IsoScore, the ID across
scales, the neighbourhood overlap and the overlap against k under it in its tab (``figure_slides`` gives a slide to
each figure a tab draws ``below`` another), TwoNN's decimation), then one per curve that the runs' measures declare."""


TAKEAWAY_MAX = 400
"""The most characters of a figure slide's takeaway (about three lines at its smallest size): a longer one is cut at
a clause and given whole in the notes, so the figure keeps the slide."""


def fit_takeaway(s: Slide) -> Slide:
    """``s`` with the reading of its takeaway cut to at most ``TAKEAWAY_MAX`` characters when it has a figure: a
    longer one is cut after its last whole clause ("; " or ". ") that fits, with "… (in full in the notes)", and the
    notes start with it in full, labelled "Takeaway:". The claims' verdicts (" · claim …", ``verdicts``) stay
    whole after it."""
    body, sep, claims = s.takeaway.partition(" · claim ")
    if s.figure is None or len(body) <= TAKEAWAY_MAX:
        return s
    tail = " … (in full in the notes)"
    head = body[: TAKEAWAY_MAX - len(tail)]
    cut = max(head.rfind("; "), head.rfind(". "), head.rfind(" · "))
    head = head[:cut] if cut > TAKEAWAY_MAX // 3 else head[: head.rfind(" ")]
    return replace(s, takeaway=head + tail + sep + claims, notes=f"Takeaway: {s.takeaway}\n\n{s.notes}")


def build_slides(runs) -> list[Slide]:
    """Every registered slide the runs support, in order (a builder gives a Slide, None, or a list of Slides), each
    figure slide's takeaway fitted (``fit_takeaway``)."""
    out = []
    for builder in REGISTRY:
        s = builder(runs)
        if isinstance(s, list):
            out += s
        elif s is not None:
            out.append(s)
    return [fit_takeaway(s) for s in out]


__all__ = [
    "Slide",
    "Table",
    "VERDICT_FILLS",
    "MISSING",
    "missing_slide",
    "REGISTRY",
    "build_slides",
    "figure_slide",
    "figure_slides",
    "declared_slides",
    "TABLE_CLAIMS",
    "TAKEAWAY_MAX",
    "fit_takeaway",
    "deck_name",
    "findings_slide",
    "run_findings",
    "verdicts",
    "reproduce",
    "WIDTH",
    "HEIGHT",
]
