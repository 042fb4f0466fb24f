"""Figures of the layer geometry (Razzhigaev et al. 2024 Fig. 1; outlier dimensions), from a run's
``layer_geometry``, ``layer_spectrum``, ``dim_stats``, ``top_activations`` and ``token_selfsim`` tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normvar_core.viz.bands import add_band, band_rows
from normvar_core.viz.labels import tidy_log_axes
from normvar_core.viz.overlay import NULL_COLOR, depth_x, null_line
from normvar_core.viz.theme import COLORSCALE, PALETTE, apply_theme

PANELS = (
    ("anisotropy", "anisotropy λ₁/Σλ (exact)"),
    ("twonn_id", "intrinsic dimension (TwoNN; dash-dot: cross-context)"),
    ("participation_ratio", "participation ratio (Σλ)²/Σλ²"),
    ("mean_cosine", "mean cosine (all pairs)"),
)
#: the panels whose Gaussian null sits an order of magnitude above the real curves (ID ≈ 100, PR ≈ 400)
LOG_PANELS = ("twonn_id", "participation_ratio")
#: log axes print plain powers of ten (1e-6 as 10⁻⁶), never SI prefixes (1µ, 1n)
POWER_TICKS = dict(exponentformat="power", showexponent="all")


def geometry_profiles(
    curves: Mapping[str, pd.DataFrame],
    *,
    relative: bool = True,
    num_hidden_states: Mapping[str, int] | None = None,
    presentation: bool = False,
    title: str | None = None,
    null_curves: Mapping[str, pd.DataFrame] | None = None,
    null_of: Mapping[str, str] | None = None,
    log_y: bool | None = None,
    bands: Mapping[str, pd.DataFrame] | None = None,
) -> go.Figure:
    """Four panels against (relative) depth, one line per run: exact anisotropy with Razzhigaev et al.'s batch
    estimate (± std, dotted), TwoNN ID ± std, participation ratio, mean cosine. ``null_curves``: the
    same tables of Gaussian null runs, dashed — in the colour of their run when ``null_of`` maps the
    null's label to it, else grey. ``log_y`` (default: on when a null is drawn): log y for the ID and
    participation-ratio panels, so a null two orders of magnitude up does not flatten the real curves.
    The x-axis title sits under the bottom row only, so it never meets the lower panels' titles.
    ``bands``: label -> the run's ``stats.intervals`` table: the anisotropy's split-half interval as a band;
    the TwoNN band is mean ± 1.96 std / √batches. Dash-dotted in the TwoNN panel: the cross-context estimate
    (neighbours from other sentences only, ``stats.twonn_context``), where the run file has it."""
    null_curves = dict(null_curves or {})
    log_y = bool(null_curves) if log_y is None else bool(log_y)
    fig = make_subplots(
        rows=2, cols=2, subplot_titles=[t for _, t in PANELS], vertical_spacing=0.2, horizontal_spacing=0.1
    )
    colors: dict[str | None, str] = {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(curves)}
    for label, df in null_curves.items():
        df = df.sort_values("layer")
        x = depth_x(df, relative, (num_hidden_states or {}).get(label))
        color = colors.get((null_of or {}).get(label), NULL_COLOR)
        for k, (key, _) in enumerate(PANELS):
            r, c = divmod(k, 2)
            null_line(fig, x, df[key], label, showlegend=k == 0, what=f"{key} =", row=r + 1, col=c + 1, color=color)
    for label, df in curves.items():
        df = df.sort_values("layer")
        x = depth_x(df, relative, (num_hidden_states or {}).get(label))
        color = colors[label]
        if label in (bands or {}):
            band = band_rows(bands[label], "anisotropy", df["layer"])  # type: ignore[index]  # label in bands
            if band is not None:
                add_band(fig, x, *band, color=color, label=label, what="95 % split-half interval", row=1, col=1)
            if "twonn_batches" in df:
                half = 1.959963984540054 * df["twonn_id_std"] / np.sqrt(df["twonn_batches"].clip(lower=1))
                add_band(
                    fig,
                    x,
                    df["twonn_id"] - half,
                    df["twonn_id"] + half,
                    color=color,
                    label=label,
                    what="95 % interval over TwoNN batches",
                    row=1,
                    col=2,
                )
        for k, (key, _) in enumerate(PANELS):
            r, c = divmod(k, 2)
            err = dict(type="data", array=df["twonn_id_std"], visible=True) if key == "twonn_id" else None
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=df[key],
                    mode="lines+markers",
                    name=label,
                    legendgroup=label,
                    showlegend=k == 0,
                    line=dict(color=color, width=2.5),
                    error_y=err,
                    customdata=df["layer"],
                    hovertemplate=f"{label}<br>layer %{{customdata}}<br>{key} = %{{y:.4g}}<extra></extra>",
                ),
                row=r + 1,
                col=c + 1,
            )
        if {"twonn_id_cross", "same_sentence_nn"} <= set(df) and df["twonn_id_cross"].notna().any():
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=df["twonn_id_cross"],
                    mode="lines+markers",
                    name=f"{label} (TwoNN, cross-context: dash-dot)",
                    legendgroup=label,
                    showlegend=True,
                    line=dict(color=color, width=1.5, dash="dashdot"),
                    marker=dict(size=5, symbol="diamond"),
                    customdata=np.stack([df["layer"], df["same_sentence_nn"] * 100], axis=1),
                    hovertemplate=f"{label}: cross-context TwoNN<br>layer %{{customdata[0]}}<br>%{{y:.4g}}"
                    "<br>same-sentence nearest neighbours %{customdata[1]:.1f} %<extra></extra>",
                ),
                row=1,
                col=2,
            )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=df["anisotropy_batch_mean"],
                mode="lines+markers",
                name=f"{label} (anisotropy, the protocol's batch estimate: dotted)",
                legendgroup=label,
                line=dict(color=color, width=1.5, dash="dot"),
                marker=dict(size=5),
                error_y=dict(type="data", array=df["anisotropy_batch_std"], visible=True),
                customdata=df["layer"],
                hovertemplate=f"{label}: the Razzhigaev et al. 2024 protocol's estimate<br>layer %{{customdata}}"
                "<br>%{y:.4g}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    xtitle = "relative depth" if relative else "layer"
    for c in (1, 2):
        fig.update_xaxes(title_text=xtitle, row=2, col=c)
    if log_y:
        for k, (key, _) in enumerate(PANELS):
            if key in LOG_PANELS:
                r, c = divmod(k, 2)
                fig.update_yaxes(type="log", row=r + 1, col=c + 1, **POWER_TICKS)
    fig.update_layout(
        title=title,
        height=760 if presentation else 660,
        hovermode="closest",
        legend=dict(orientation="h", yanchor="top", y=-0.12, x=0),
        margin=dict(b=140),
    )
    apply_theme(fig, presentation)
    fig.update_layout(margin=dict(b=150 if presentation else 120))
    return tidy_log_axes(fig)


def decimation_figure(
    curves: Mapping[str, pd.DataFrame],
    *,
    relative: bool = True,
    num_hidden_states: Mapping[str, int] | None = None,
    presentation: bool = False,
    bands: Mapping[str, pd.DataFrame] | None = None,
    null_curves: Mapping[str, pd.DataFrame] | None = None,
    null_of: Mapping[str, str] | None = None,
    title: str | None = None,
) -> go.Figure:
    """TwoNN's decimation curve (Facco et al. 2017): the estimate on seeded, nested subsets of each batch of 4,096,
    2,048, 1,024 and 512 points, for up to four evenly spaced layers of each run (``curves``: label -> its
    ``twonn_decimation`` table); solid: Razzhigaev et al.'s estimate, dash-dotted: the cross-context one, ± std over the
    subsets. A curve that stays flat is stable in scale; one that falls with the subset size while the
    cross-context curve stays flat shows the same-sentence neighbours. The generic builder arguments
    (``relative``, ``num_hidden_states``, ``bands``, nulls) are accepted and not used: there is no depth axis."""
    del relative, num_hidden_states, bands, null_curves, null_of
    fig = go.Figure()
    for i, (label, df) in enumerate(curves.items()):
        layers = np.unique(df["layer"].to_numpy(int))
        pick = layers[np.unique(np.linspace(0, len(layers) - 1, min(4, len(layers))).round().astype(int))]
        for j, layer in enumerate(pick):
            rows = df[df["layer"] == layer].sort_values("size")
            color = PALETTE[(i * 4 + j) % len(PALETTE)]
            name = f"{label} · layer {layer}" if len(curves) > 1 else f"layer {layer}"
            for col, dash, what in (
                ("twonn_id", "solid", "Razzhigaev et al. 2024 protocol"),
                ("twonn_id_cross", "dashdot", "cross-context"),
            ):
                fig.add_trace(
                    go.Scatter(
                        x=rows["size"],
                        y=rows[col],
                        mode="lines+markers",
                        name=f"{name} ({what})",
                        legendgroup=name,
                        line=dict(color=color, width=2.5 if dash == "solid" else 1.8, dash=dash),
                        error_y=dict(type="data", array=rows[f"{col}_std"], visible=True),
                        hovertemplate=f"{name}, {what}<br>%{{x}} points: TwoNN %{{y:.4g}}<extra></extra>",
                    )
                )
    sizes = sorted(
        {int(x) for df in curves.values() for x in df["size"]}
    )  # as recorded: a small run's batch is < 4,096
    fig.update_xaxes(
        title_text="points per subset (each TwoNN batch, then 1/2, 1/4, 1/8 of it)",
        type="log",
        tickvals=sizes,
        ticktext=[f"{x:,}" for x in sizes],
    )
    fig.update_yaxes(title_text="intrinsic dimension (TwoNN)")
    fig.update_layout(
        title=title
        or (
            "TwoNN decimation (Facco et al. 2017)<br><sup>solid: the Razzhigaev et al. 2024 protocol's estimate; "
            "dash-dotted: neighbours from other sentences only</sup>"
        ),
        height=560 if presentation else 460,
        hovermode="closest",
        legend=dict(orientation="h", yanchor="top", y=-0.18, x=0),
    )
    apply_theme(fig, presentation)
    fig.update_layout(margin=dict(b=130 if presentation else 110))
    return fig


def spectra_figure(
    spectra: Mapping[str, tuple[pd.DataFrame, int]],
    *,
    presentation: bool = False,
    title: str | None = None,
    nulls: Sequence[str] = (),
    null_of: Mapping[str, str] | None = None,
) -> go.Figure:
    """Covariance spectra of several runs side by side: left the eigenvalues λ_k (log-log, k = 1 the
    largest), right the cumulative share Σ_{j≤k} λ_j / Σλ. ``spectra``: label -> (a run's
    ``layer_spectrum`` table, the layer to draw); labels in ``nulls`` are drawn dashed (in their run's
    colour when ``null_of`` names it, else grey)."""
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=["eigenvalues λₖ", "cumulative share of Σλ"], horizontal_spacing=0.1
    )
    real = [lab for lab in spectra if lab not in set(nulls)]
    colors: dict[str | None, str] = {lab: PALETTE[i % len(PALETTE)] for i, lab in enumerate(real)}
    for lab, (spectrum, layer) in spectra.items():
        s = spectrum[spectrum["layer"] == layer].sort_values("k")
        lam = s["eigenvalue"].to_numpy(dtype=np.float64)
        k = s["k"].to_numpy() + 1
        is_null = lab in set(nulls)
        color = colors.get((null_of or {}).get(lab), NULL_COLOR) if is_null else colors[lab]
        line = dict(color=color, width=2 if is_null else 2.5, dash="dash" if is_null else None)
        name = f"{lab} · layer {layer}"
        fig.add_trace(
            go.Scatter(
                x=k,
                y=np.where(lam > 0, lam, np.nan),
                mode="lines",
                name=name,
                legendgroup=lab,
                line=line,
                hovertemplate=f"{lab}<br>k = %{{x}}<br>λ = %{{y:.4g}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        cum = np.cumsum(lam) / lam.sum() if lam.sum() > 0 else lam
        fig.add_trace(
            go.Scatter(
                x=k,
                y=cum,
                mode="lines",
                name=name,
                legendgroup=lab,
                showlegend=False,
                line=line,
                hovertemplate=f"{lab}<br>k = %{{x}}<br>share = %{{y:.3f}}<extra></extra>",
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(type="log", title_text="k (largest first)", **POWER_TICKS)
    fig.update_yaxes(type="log", title_text="eigenvalue", row=1, col=1, **POWER_TICKS)
    fig.update_yaxes(title_text="share of the trace", range=[0, 1.02], row=1, col=2)
    fig.update_layout(
        title=title or "Covariance spectra",
        height=500 if presentation else 440,
        legend=dict(orientation="h", yanchor="top", y=-0.22, x=0),
    )
    apply_theme(fig, presentation)
    fig.update_layout(margin=dict(b=130 if presentation else 110))
    return tidy_log_axes(fig)


def colour_range(z: np.ndarray, lo_q: float = 1.0) -> tuple[float, float]:
    """The colour scale's (zmin, zmax): from the ``lo_q`` percentile of the finite values (widened to
    include 0, the median dimension) up to their maximum. The bulk sets the bottom, so a few near-zero
    dimensions (log₁₀ ≈ −30) cannot stretch the scale and wash the map into one colour; the top stays
    the largest value, so the outlier dimensions take the top colour."""
    f = z[np.isfinite(z)]
    if not f.size:
        return (0.0, 1.0)
    lo, hi = min(float(np.percentile(f, lo_q)), 0.0), max(float(f.max()), 0.0)
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def ratio_ticks(zmin: float, zmax: float) -> tuple[list[float], list[str]]:
    """Colour-bar ticks of a log₁₀ ratio scale labelled as the ratios themselves (0.5×, 1×, 2×, 10×, ...): a
    dimension below the median reads as a fraction, never as a negative number. 1, 2, 5 per decade while that
    gives at most 8 ticks, else powers of ten."""
    lo, hi = int(np.floor(zmin)) - 1, int(np.ceil(zmax)) + 1
    for steps in ((1, 2, 5), (1,)):
        r = [m * 10.0**e for e in range(lo, hi + 1) for m in steps if zmin <= np.log10(m * 10.0**e) <= zmax]
        if len(r) <= 8:
            break
    return [float(np.log10(x)) for x in r], [f"{x:g}×" for x in r]


def outlier_heatmap(dim_stats: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """log₁₀ of max |h_j| / median_j max |h| per (dimension, layer): the outlier dimensions light up. The
    colour scale spans the bulk of the values (``colour_range``); values beyond it take the end colours
    and keep their true ratio in the hover."""
    piv = dim_stats.pivot(index="layer", columns="dim", values="max_abs").sort_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = piv.to_numpy() / np.median(piv.to_numpy(), axis=1, keepdims=True)
        z = np.log10(ratio)
    zmin, zmax = colour_range(z)
    tickvals, ticktext = ratio_ticks(zmin, zmax)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=piv.columns,
            y=piv.index,
            colorscale=COLORSCALE,
            zmin=zmin,
            zmax=zmax,
            colorbar=dict(title="max |h| ÷ median, log scale", tickvals=tickvals, ticktext=ticktext),
            customdata=ratio,
            hovertemplate="layer %{y}, dim %{x}<br>max|h| / median = %{customdata:.3g}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="dimension")
    fig.update_yaxes(title_text="layer")
    fig.update_layout(
        title=title or "Outlier dimensions: max |h| relative to the layer's median dimension",
        height=460 if presentation else 420,
    )
    return apply_theme(fig, presentation)


def distinct_top(rows: pd.DataFrame) -> pd.DataFrame:
    """A ``top_activations`` table with one row per (token, position, dim), its largest |value| (runs
    written before the measure kept distinct keys repeat a context-free state), re-ranked from 1."""
    if not len(rows):
        return rows
    r = rows.assign(_a=rows["value"].abs()).sort_values(["_a", "sentence_id"], ascending=[False, True])
    r = r.drop_duplicates(["token_id", "position", "dim"]).drop(columns="_a")
    return r.assign(rank=np.arange(1, len(r) + 1))


def shares_figure(outliers: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """Share of Q(X) = E‖x‖² carried by position 0, by the largest dimension and by the top 5."""
    df = outliers.sort_values("layer")
    fig = go.Figure()
    for i, (key, name) in enumerate(
        (
            ("q_share_pos0", "position 0"),
            ("q_share_top1dim", "largest dimension"),
            ("q_share_top5dim", "top 5 dimensions"),
        )
    ):
        fig.add_trace(
            go.Scatter(
                x=df["layer"], y=df[key], mode="lines+markers", name=name, line=dict(color=PALETTE[i], width=2.5)
            )
        )
    fig.update_xaxes(title_text="layer")
    fig.update_yaxes(title_text="share of Q(X)", range=[0, 1.02])
    fig.update_layout(title=title or "Who carries the squared norm", height=420 if presentation else 380)
    return apply_theme(fig, presentation)


def selfsim_scatter(points: pd.DataFrame, *, presentation: bool = False, title: str | None = None) -> go.Figure:
    """Self-similarity of each token type against log10 n_t (Ethayarajh's measure, exact)."""
    df = points.dropna(subset=["self_similarity"])
    fig = go.Figure(
        go.Scattergl(
            x=np.log10(df["n"]),
            y=df["self_similarity"],
            mode="markers",
            marker=dict(size=5, color=PALETTE[0], opacity=0.6),
            text=df.get("token"),
            hovertemplate="%{text}<br>log₁₀ n = %{x:.2f}<br>self-similarity = %{y:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="log₁₀ nₜ")
    fig.update_yaxes(title_text="self-similarity (mean cosine between occurrences)")
    fig.update_layout(title=title or "Self-similarity against frequency", height=440 if presentation else 400)
    return apply_theme(fig, presentation)


__all__ = [
    "colour_range",
    "ratio_ticks",
    "distinct_top",
    "geometry_profiles",
    "spectra_figure",
    "LOG_PANELS",
    "POWER_TICKS",
    "outlier_heatmap",
    "shares_figure",
    "selfsim_scatter",
    "PANELS",
]
