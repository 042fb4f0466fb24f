"""The slides of a report: a registry of builders (``REGISTRY``, listed by import), each taking the report's runs
and returning a Slide or None when the runs lack what it needs. ``figure_slide``, the generic one, draws a figure of
``viz.page_figures`` with its own builder (IsoScore's), so a new figure's slide is a line of the registry.

A Slide holds a plotly figure in the presentation theme at 16:9, a one-line takeaway computed from the
numbers, and speaker notes with the exact values."""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import pandas as pd
import plotly.graph_objects as go

from normvar_core.constants import STUDY_BAND
from normvar_core.stats import analyses
from normvar_core.stats import layer_geometry as G
from normvar_core.stats import twonn_context
from normvar_core.viz.cloud_figures import clouds_figure
from normvar_core.viz.decomposition_figures import decomposition_bars, decomposition_compare
from normvar_core.viz.page_figures import DECIMATION, ISOSCORE, Figure, holds
from normvar_core.viz.frequency_figures import frequency_scatter
from normvar_core.viz.selection import fit_row, tradeoff_points
from normvar_core.viz.tradeoff_figures import layers_figure, tradeoff_scatter
from normvar_core.viz import geometry_figures as GF
from normvar_core.viz.clouds import pca_cloud
from normvar_core.viz.figure_export import SLIDE_SIZE
from normvar_core.viz.viewstate import default_layer

WIDTH, HEIGHT = SLIDE_SIZE  # 16:9


@dataclass
class Slide:
    title: str
    takeaway: str
    notes: str
    figure: go.Figure | None = None
    lines: list[str] = field(default_factory=list)   # a text slide (the title slide)
    deck: str = ""
    """The deck's name (the title slide carries it: the report's runs): the PPTX and PDF title metadata."""
    _png: bytes | None = field(default=None, repr=False)

    def png(self) -> bytes:
        """The figure as a 16:9 PNG (kaleido), rendered once and shared by the PPTX and PDF writers."""
        if self._png is None:
            from normvar_core.viz.figure_export import to_image

            self._png = to_image(self.figure, "png", width=WIDTH, height=HEIGHT - 120, scale=1.25)
        return self._png


def _fit(fig: go.Figure) -> go.Figure:
    fig.update_layout(width=WIDTH, height=HEIGHT - 120, title=None)
    return fig


def _table_notes(df: pd.DataFrame, cols: list[str]) -> str:
    return df[cols].to_string(index=False, float_format=lambda x: f"{x:.6g}")


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
    """" Claim <id>: holds (value [interval])" for the slides' takeaways (issue 26)."""
    from normvar_core.stats.findings import cell

    parts = []
    for cid in ids:
        cells = [f"{r.name}: {cell(run_findings(r)[cid])}" if len(runs) > 1 else cell(run_findings(r)[cid]) for r in runs]
        parts.append(f"claim {cid} — " + "; ".join(cells))
    return " · " + " · ".join(parts) if parts else ""


def findings_slide(runs) -> Slide:
    """The verdict table: one row per claim, one column per run (``stats.findings``)."""
    from normvar_core.stats.findings import CLAIMS, cell

    colors = {"holds": "#d9f2d9", "fails": "#f8d7d7", "cannot tell": "#fff3cd", "untestable": "#eeeeee"}
    per = {r.name: run_findings(r) for r in runs}
    header = ["claim (seed)"] + list(per)
    first = [f"{c.id} ({c.seed}): {c.wording}" for c in CLAIMS]
    cols = [first] + [[cell(fs[c.id]) for c in CLAIMS] for fs in per.values()]
    fills = [["#ffffff"] * len(CLAIMS)] + [[colors[fs[c.id].verdict] for c in CLAIMS] for fs in per.values()]
    # sized for the slide (1920 x 960 under the heading): rows share the height, text at 22 px
    row_h = int(min(110, (HEIGHT - 120 - 80) / max(len(CLAIMS), 1)))
    fig = go.Figure(go.Table(columnwidth=[3] + [2] * len(per),
                             header=dict(values=header, align="left", font=dict(size=24), fill_color="#dddddd", height=60),
                             cells=dict(values=cols, align="left", font=dict(size=22), fill_color=fills, height=row_h)))
    fig.update_layout(margin=dict(l=20, r=20, t=20, b=20))
    counts = [f"{n}: {sum(f.verdict == 'holds' for f in fs.values())} hold, "
              f"{sum(f.verdict == 'fails' for f in fs.values())} fail, "
              f"{sum(f.verdict == 'cannot tell' for f in fs.values())} cannot tell, "
              f"{sum(f.verdict == 'untestable' for f in fs.values())} untestable" for n, fs in per.items()]
    notes = "\n\n".join(f"{n}\n" + "\n".join(f"{f.id}: {f.verdict} — {f.why}" for f in fs.values())
                         for n, fs in per.items())
    return Slide("Findings: each claim of the studies tested on this run", "; ".join(counts), notes, _fit(fig))


def title_slide(runs) -> Slide:
    lines = []
    for run in runs:
        m = run.meta
        lines += [f"{run.name}: {m.get('model')}" + (f" @ {m['revision']}" if m.get("revision") else "")
                  + f" ({m.get('architecture')}, {m.get('norm_placement')}-{m.get('norm_type')}, "
                  f"{m.get('num_layers')} layers × {m.get('dim')} d)",
                  f"corpus {m.get('corpus_name')}: {int(m.get('n_sentences') or 0):,} sentences; "
                  f"|X| = {int(m.get('n_embeddings') or 0):,} per layer, |T| = {int(m.get('n_types') or 0):,}; "
                  f"{m.get('created_at')}",
                  f"reproduce: {reproduce(run)}"]
    title = "Norm of the mean vs. variance of contextualized embeddings"
    return Slide(title, "Exact statistics over every embedding (normvar)", "\n".join(lines), lines=lines,
                 deck=deck_name(runs))


def deck_name(runs) -> str:
    """The report's name: its run, or its runs joined by " vs "."""
    return " vs ".join(r.name for r in runs)


def tradeoff_slide(runs) -> Slide | None:
    run = runs[0]
    tr = analyses.tradeoff(run.stats(), *STUDY_BAND)
    if tr["r2"].isna().all():
        return None
    best = tr.loc[tr["r2"].idxmax()]
    layer = int(best["layer"])
    points = tradeoff_points(run.token_table(layer), *STUDY_BAND)
    from normvar_core.stats.intervals import run_intervals

    iv = run_intervals(run)
    siv = iv[(iv["quantity"] == "slope") & (iv["layer"] == layer)]
    fig = tradeoff_scatter(points, fit_row(tr, layer=layer), presentation=True,
                           slope_interval=(float(siv["low"].iloc[0]), float(siv["high"].iloc[0]))
                           if len(siv) else None)
    take = (f"At layer {layer}, where R² peaks, V(X_t) falls with M(X_t): slope {best['slope']:.2f}, "
            f"R² {best['r2']:.2f} over {int(best['n_types']):,} types" + verdicts([run], "tradeoff_slope"))
    return Slide(f"{run.name}: the M–V trade-off (Fig. 2)", take,
                 _table_notes(tr, ["layer", "n_types", "cv_q", "slope", "intercept", "r2"]), _fit(fig))


def layers_slide(runs) -> Slide | None:
    curves = {r.name: analyses.tradeoff(r.stats(), *STUDY_BAND) for r in runs}
    rel = len(runs) > 1
    from normvar_core.stats.intervals import run_intervals

    fig = layers_figure(curves, relative=rel, num_hidden_states={r.name: _depth(r) for r in runs},
                        presentation=True, bands={r.name: run_intervals(r) for r in runs})
    parts, notes = [], []
    for name, tr in curves.items():
        m = tr.loc[tr["cv_q"].idxmin()]
        parts.append(f"{name}: C.V. of Q is smallest at layer {int(m['layer'])} ({m['cv_q']:.3f}), where the "
                     f"slope of V on M is {m['slope']:.2f}, R² {m['r2']:.2f}")
        notes.append(f"{name}\n" + _table_notes(tr, ["layer", "cv_q", "slope", "r2"]))
    return Slide("Where the trade-off is strongest (Fig. 4)" + (" — relative depth" if rel else ""),
                 "; ".join(parts) + verdicts(runs, "cv_min_intermediate"), "\n\n".join(notes), _fit(fig))


def decomposition_slide(runs) -> Slide | None:
    if len(runs) > 1:
        decs = {r.name: analyses.decomposition(r.stats(), *STUDY_BAND) for r in runs}
        fig = decomposition_compare(decs, relative=True, num_hidden_states={r.name: _depth(r) for r in runs},
                                    presentation=True)
        take = "; ".join(f"{n}: V_W/V grows from {d['v_w_over_v'].iloc[0]:.2f} to {d['v_w_over_v'].iloc[-1]:.2f}"
                         for n, d in decs.items())
        notes = "\n\n".join(f"{n}\n" + _table_notes(d, ["layer", "m_over_q", "v_w_over_q", "v_b_over_q", "v_w_over_v"])
                            for n, d in decs.items())
        return Slide("Q = M + V_W + V_B across depth (Fig. 5, 6)", take + verdicts(runs, "vw_share_grows", "m_grows_vb_shrinks"),
                     notes, _fit(fig))
    run = runs[0]
    dec = analyses.decomposition(run.stats(), *STUDY_BAND)
    fig = decomposition_bars(dec, presentation=True)
    take = (f"V_W/V grows from {dec['v_w_over_v'].iloc[0]:.2f} (layer {int(dec['layer'].iloc[0])}) to "
            f"{dec['v_w_over_v'].iloc[-1]:.2f} (layer {int(dec['layer'].iloc[-1])}); M/Q peaks at "
            f"{dec['m_over_q'].max():.2f} (layer {int(dec.loc[dec['m_over_q'].idxmax(), 'layer'])})")
    notes = _table_notes(dec, ["layer", "q", "m", "v_w", "v_b", "m_over_q", "v_w_over_v"])
    take += verdicts(runs, "vw_share_grows", "m_grows_vb_shrinks")
    return Slide(f"{run.name}: Q = M + V_W + V_B (Fig. 5, 6)", take, notes + _layernorm_notes(run), _fit(fig))


def _layernorm_notes(run) -> str:
    """App. I for the speaker notes: Q(X) over all embeddings against ‖γ‖² + ‖β‖² per norm-output
    layer, and the γ-weighting that explains the gap (``stats.layernorm.layernorm_attribution``)."""
    if not (run.has("norm_affine") and run.has("dim_stats") and run.has("norm_params")):
        return ""
    from normvar_core.stats.layernorm import layernorm_attribution

    att = layernorm_attribution(run.table("norm_affine"), run.table("dim_stats"), run.table("norm_params"))
    if not len(att):
        return ""
    return ("\n\nApp. I — LayerNorm's prediction ‖γ‖² + ‖β‖² (q_pred) against Q(X) over all embeddings; "
            "gamma_weighting = Σγ²E z²/‖γ‖², top_z_share = z's energy in its 5 largest coordinates\n"
            + _table_notes(att, ["layer", "q_all", "q_pred", "q_over_pred", "gamma_weighting", "top_z_share",
                                 "top_gamma_sq_ratio"]))


def frequency_slide(runs) -> Slide | None:
    run = runs[0]
    regs = analyses.frequency_regressions(run.stats(), *STUDY_BAND)
    layer = default_layer(run.layers)
    fig = frequency_scatter(tradeoff_points(run.token_table(layer), *STUDY_BAND), regs, layer=layer,
                            presentation=True)
    r = regs[regs["layer"] == layer].set_index("quantity")
    take = (f"At layer {layer}, against log₁₀ n_t: M falls (slope {r.loc['M', 'slope']:.3f}), V rises "
            f"({r.loc['V', 'slope']:.3f}), Q stays nearly flat ({r.loc['Q', 'slope']:.3f})")
    return Slide(f"{run.name}: frequency (Fig. 7)", take, _table_notes(regs, ["layer", "quantity", "slope", "r2"]),
                 _fit(fig))


def clouds_slide(runs) -> Slide | None:
    run = runs[0]
    if not run.has("samples"):
        return None
    layer = default_layer(run.layers)
    sampled = run.sampled_tokens()
    have = set(sampled["token_id"].astype(int))
    ids = [int(i) for i in analyses.select_tokens(run.stats(), run.tokens()["token"].tolist()) if int(i) in have]
    ids = ids[:10] or sampled["token_id"].astype(int).head(10).tolist()
    tt = run.token_table(layer)
    cloud = pca_cloud(run.samples(layer, ids), dict(zip(tt["token_id"].astype(int), tt["n"].astype(int))))
    # laid out at the slide's size: the labels are placed in pixels (no overlaps, drawn above the points)
    fig = clouds_figure(cloud.coords, explained=cloud.explained, presentation=True, width=WIDTH,
                        height=HEIGHT - 120, token_order=[str(t) for t in tt.set_index("token_id").loc[ids, "token"]])
    rows = tt[tt["token_id"].isin(ids)].sort_values("n")
    take = (f"Rare tokens sit away from the origin (M large), frequent ones around it (V large): "
            f"{rows['token'].iloc[0]!s} (n={int(rows['n'].iloc[0])}) M/Q={rows['m'].iloc[0] / rows['q'].iloc[0]:.2f} vs "
            f"{rows['token'].iloc[-1]!s} (n={int(rows['n'].iloc[-1])}) M/Q={rows['m'].iloc[-1] / rows['q'].iloc[-1]:.2f}")
    return Slide(f"{run.name}: token clouds at layer {layer} (Fig. 1)", take,
                 _table_notes(rows, ["token", "n", "q", "m", "v"]), _fit(fig))


def geometry_slide(runs) -> Slide | None:
    have = [r for r in runs if r.has("geometry")]
    if not have:
        return None
    curves = {r.name: r.table("layer_geometry") for r in have}
    fig = GF.geometry_profiles(curves, relative=True, num_hidden_states={r.name: _depth(r) for r in have},
                               presentation=True, bands={r.name: r.table("intervals") for r in have if r.has("intervals")})
    take = "; ".join(f"{n}: anisotropy peaks at {g['anisotropy'].max():.3f} (layer {int(g.loc[g['anisotropy'].idxmax(), 'layer'])}), "
                     f"TwoNN ID {g['twonn_id'].min():.1f}–{g['twonn_id'].max():.1f} ({G.sample_text(g)})"
                     for n, g in curves.items())
    differ = G.samples_differ({n: G.recorded_sample(g) for n, g in curves.items()})
    take += f". {differ}" if differ else ""
    for n, g in curves.items():  # the context bias of a small corpus, in words
        if said := twonn_context.context_sentence(g):
            take += f". {n}: {said}"
    if differ := twonn_context.shares_differ(curves):
        take += f" {differ}"
    cols = ["layer", "anisotropy", "anisotropy_batch_mean", "participation_ratio", "mean_cosine", "twonn_id",
            "twonn_id_std", "twonn_id_cross", "same_sentence_nn"]
    notes = "\n\n".join(f"{n}\n" + _table_notes(g, [c for c in cols if c in g]) for n, g in curves.items())
    return Slide("Layer geometry (seed 004, Fig. 1)", take + verdicts(have, "anisotropy_profile", "id_profile"),
                 notes, _fit(fig))


def figure_slide(f: Figure, claims: tuple[str, ...], runs) -> Slide | None:
    """The generic slide of a figure of ``viz.page_figures``: its builder over the runs that hold what it reads
    (``page_figures.holds``; relative depth, split-half bands from ``intervals``), a takeaway per run (each of its
    columns' range over the layers, with the layer of its largest value) plus the verdicts of ``claims``, and the
    per-layer values in the notes."""
    have = [r for r in runs if holds(r, f)]
    if not have:
        return None
    cols = list(f.columns)
    curves = {r.name: r.table(f.tables[0]).sort_values("layer") for r in have}
    fig = f.builder(curves, relative=True, num_hidden_states={r.name: _depth(r) for r in have},
                    presentation=True, bands={r.name: r.table("intervals") for r in have if r.has("intervals")},
                    null_curves={}, null_of={})
    take = "; ".join(f"{n}: " + ", ".join(_column_range(t, c) for c in cols) for n, t in curves.items())
    notes = "\n\n".join(f"{n}\n" + _table_notes(t, ["layer", *cols]) for n, t in curves.items())
    return Slide(f.section, take + verdicts(have, *claims), notes, _fit(fig))


def _column_range(t, c: str) -> str:
    """"isoscore 0.126–0.241 (largest at layer 6)" over a run's layers; "isoscore undefined" when no layer has a
    value (a degenerate covariance gives NaN)."""
    v = t[c].dropna()
    if not len(v):
        return f"{c} undefined"
    return f"{c} {v.min():.3f}–{v.max():.3f} (largest at layer {int(t.loc[v.idxmax(), 'layer'])})"


REGISTRY: list[Callable] = [findings_slide, title_slide, tradeoff_slide, layers_slide, decomposition_slide,
                            frequency_slide, clouds_slide, geometry_slide,
                            partial(figure_slide, ISOSCORE, ("isoscore_low",)),
                            partial(figure_slide, DECIMATION, ("id_profile",))]
"""The deck, in order: the findings, the title, then one slide per figure (the figure's page order: Trade-off,
Layers, Decomposition, Frequency, Token clouds, Geometry's profiles, IsoScore and TwoNN's decimation)."""


def build_slides(runs) -> list[Slide]:
    """Every registered slide the runs support, in order."""
    out = []
    for builder in REGISTRY:
        s = builder(runs)
        if s is not None:
            out.append(s)
    return out


__all__ = ["Slide", "REGISTRY", "build_slides", "figure_slide", "deck_name", "findings_slide", "run_findings", "verdicts", "reproduce",
           "WIDTH", "HEIGHT"]
