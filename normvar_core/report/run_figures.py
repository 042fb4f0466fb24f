"""The per-run figures of the deck, built as their dashboard pages build them (the page's builder of
``viz.page_figures.FIGURES`` with the page's arguments at the study's band): Trade-off at a layer (with App. I's
LayerNorm line and the slope's bootstrap band), Frequency's scatter and the token clouds; and the one sentence
that says why a run has nothing to draw (a run of one or two sentences has no type in the study's band)."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from normvar_core.constants import STUDY_BAND
from normvar_core.viz.cloud_figures import clouds_figure
from normvar_core.viz.clouds import cloud_tokens, pca_cloud
from normvar_core.viz.frequency_figures import frequency_scatter
from normvar_core.viz.selection import fit_row, tradeoff_points
from normvar_core.viz.tradeoff_figures import tradeoff_scatter

MISSING = "—"
"""How a value that a run does not have is shown (with the reason beside it)."""


def num(x, spec: str = ".2f") -> str:
    """``x`` formatted, or "—" when it is missing (None or NaN)."""
    return MISSING if x is None or not math.isfinite(float(x)) else format(float(x), spec)


def peak(df: pd.DataFrame, col: str, *, smallest: bool = False) -> pd.Series | None:
    """The row of ``df`` where ``col`` is largest (``smallest``: smallest), or None when no row has a value."""
    v = df[col].dropna()
    if not len(v):
        return None
    return df.loc[v.idxmin() if smallest else v.idxmax()]


def no_band_types(run) -> str:
    """Why a run has no per-type statistics to fit or draw: no type in the study's band."""
    n, t = int(run.meta.get("n_sentences") or 0), int(run.meta.get("n_types") or 0)
    return (
        f"{run.name}: {MISSING} (no token type occurs {STUDY_BAND[0]:,.0f} to {STUDY_BAND[1]:,.0f} times, the "
        f"study's band: the run has {n:,} sentence{'s' * (n != 1)} and {t:,} type{'s' * (t != 1)}; compute it "
        f"on a larger corpus)"
    )


def tradeoff_figure(run, layer: int, fits: pd.DataFrame) -> go.Figure:
    """The Trade-off page's figure of ``run`` at ``layer`` (``fits``: ``analyses.tradeoff`` at the study's band)."""
    from normvar_core.stats.intervals import run_intervals

    points = tradeoff_points(run.token_table(layer), *STUDY_BAND)
    iv = run_intervals(run)
    siv = iv[(iv["quantity"] == "slope") & (iv["layer"] == layer)]
    q_pred = None
    if run.has("norm_params"):  # App. I's line, as the page draws it
        from normvar_core.stats.layernorm import layernorm_table

        ln = layernorm_table(run.table("norm_params"), run.stats(), *STUDY_BAND).set_index("layer")
        q_pred = float(ln.loc[layer, "q_pred"]) if layer in ln.index else None
    return tradeoff_scatter(
        points,
        fit_row(fits, layer=layer),
        presentation=True,
        q_pred=q_pred,
        slope_interval=(float(siv["low"].iloc[0]), float(siv["high"].iloc[0])) if len(siv) else None,
    )


def frequency_figure(run, layer: int, regs: pd.DataFrame) -> tuple[go.Figure, pd.DataFrame]:
    """The Frequency page's scatter of ``run`` at ``layer`` (``regs``: ``analyses.frequency_regressions``) and the
    types it draws (``tradeoff_points``: the study's band)."""
    points = tradeoff_points(run.token_table(layer), *STUDY_BAND)
    return frequency_scatter(points, regs, layer=layer, presentation=True), points


def cloud_figure(run, layer: int, *, width: int, height: int) -> tuple[go.Figure, pd.DataFrame, pd.DataFrame] | None:
    """The Token clouds page's figure at ``layer``: the types the page draws by default (``viz.clouds.cloud_tokens``:
    App. A's selection among the sampled types), laid out at ``width`` × ``height`` (the labels are placed in
    pixels; no legend: the labels name the clouds), the drawn points (``clouds.Cloud.coords``) and the tokens' rows
    of the token table; None without samples."""
    ids = cloud_tokens(run)
    if not ids:
        return None
    tt = run.token_table(layer)
    cloud = pca_cloud(run.samples(layer, ids), dict(zip(tt["token_id"].astype(int), tt["n"].astype(int))))
    fig = clouds_figure(
        cloud.coords,
        explained=cloud.explained,
        presentation=True,
        width=width,
        height=height,
        token_order=[str(t) for t in tt.set_index("token_id").loc[ids, "token"]],
    )
    fig.update_layout(showlegend=False)  # each cloud is labelled on the plot; a list of 20 tokens outgrows a slide
    return fig, cloud.coords, tt[tt["token_id"].isin(ids)].sort_values("n")


__all__ = ["MISSING", "num", "peak", "no_band_types", "tradeoff_figure", "frequency_figure", "cloud_figure"]
