"""Dashboard plumbing, part 1: the data directory and the cached reads. The list of runs is read
again when the runs folder changes; a run is opened once per file version, and every read of it
(its statistics, an analysis table for a band, a layer's points...) is a reader cached per (run file,
version, arguments) by ``per_run_version`` (``views/_run_cache.py``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import streamlit as st

from normvar_core.datadir import DataDir, resolve_data_dir
from normvar_core.runs import reader
from normvar_core.runs.reader import file_version
from normvar_core.runs.siblings import position0_sibling as _sibling_of
from normvar_core.stats import analyses
from normvar_core.viz.selection import tradeoff_points
from normvar_core.viz.viewstate import band_counts
from views._run_cache import per_run_version


# ============================================================================ data dir
def data_dir() -> Path:
    """``--data-dir`` after ``--`` on the streamlit command line, else $NORMVAR_DATA, else ./data."""
    if "_data_dir" not in st.session_state:
        parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        parser.add_argument("--data-dir", default=None)
        ns, _ = parser.parse_known_args(sys.argv[1:])
        st.session_state["_data_dir"] = str(resolve_data_dir(ns.data_dir))
    return Path(st.session_state["_data_dir"])


# ============================================================================ the runs
def _version(path) -> tuple:
    try:
        return file_version(path)
    except OSError:
        return ()


@st.cache_resource(show_spinner=False, max_entries=16)
def _listing(root: str, signature: tuple, damaged: bool) -> pd.DataFrame:
    if not damaged:
        return reader.list_runs(root)
    runs = reader.list_runs(root, include_damaged=True)
    return runs[runs["status"] == "damaged"][["name", "path", "problem"]].reset_index(drop=True)


def _listed(damaged: bool) -> pd.DataFrame:
    dd = DataDir(data_dir())
    return _listing(str(dd.root), tuple((p.name, _version(p)) for p in dd.published_runs()), damaged)


def runs_table() -> pd.DataFrame:
    """Published runs (``reader.list_runs``), re-read only when a run file in the runs folder changes."""
    return _listed(False)


def damaged_runs() -> pd.DataFrame:
    """Run files that fail the integrity check (name, path, problem): listed on Runs, never selected."""
    return _listed(True)


@st.cache_resource(show_spinner=False, max_entries=12)
def _open_run(path: str, version: tuple):
    return reader.open_run(path)


def open_run(name: str | None):
    """The published run ``name`` (opened once per file version), or None."""
    if not name:
        return None
    runs = runs_table()
    hit = runs.loc[runs["name"] == name]
    if hit.empty:
        return None
    path = str(hit.iloc[0]["path"])
    return _open_run(path, _version(path))


def opened_runs(names) -> dict:
    """{name: Run} of the published runs among ``names``, in order (runs gone meanwhile are left out):
    the runs a page overlays."""
    runs = {name: open_run(name) for name in names}
    return {name: r for name, r in runs.items() if r is not None}


def position0_sibling(run):
    """``runs.siblings.position0_sibling`` among the published runs: the run with the same options but
    ``exclude_position0`` flipped, or None."""
    return _sibling_of(run, (open_run(name) for name in runs_table()["name"] if name != run.name))


# ============================================================================ cached reads of one run
@per_run_version(48)
def stats(run):
    """The run's TokenStats (means loaded once per file version)."""
    return run.stats()


@per_run_version(16)
def pooled_stats(run):
    """(TokenStats, keys) with the types that share a key pooled exactly (fn. 7: "##ing" with "ing",
    "Ġthe" with "the"; ``analyses.merge_by_key``)."""
    tokens = run.tokens()["token"].astype(str)
    return analyses.merge_by_key(stats(run), [analyses.strip_prefix(t) for t in tokens])


def _stats_of(run, pool: bool):
    return pooled_stats(run)[0] if pool else stats(run)


@per_run_version(256)
def tradeoff(run, band, pool: bool = False) -> pd.DataFrame:
    """``analyses.tradeoff`` per layer (C.V. of Q, slope, intercept, R^2) for the band (log10 n_t);
    ``pool``: over the pooled sub-word variants (fn. 7)."""
    return analyses.tradeoff(_stats_of(run, pool), *band_counts(band))


@per_run_version(256)
def decomposition(run, band, pool: bool = False) -> pd.DataFrame:
    """``analyses.decomposition`` (Q = M + V_W + V_B per layer, eqs. 8–15) for the band."""
    return analyses.decomposition(_stats_of(run, pool), *band_counts(band))


@per_run_version(256)
def frequency_regressions(run, band, pool: bool = False) -> pd.DataFrame:
    """``analyses.frequency_regressions`` (log10(1 + Z) on log10 n_t, App. F) for the band."""
    return analyses.frequency_regressions(_stats_of(run, pool), *band_counts(band))


@per_run_version(64)
def intervals(run, band, pool: bool = False) -> pd.DataFrame:
    """``stats.intervals.run_intervals``: the run file's intervals for the study's band, else the
    bootstrap over the band's (pooled) types now (bands on Layers, Trade-off, Geometry)."""
    from normvar_core.stats.intervals import run_intervals

    return run_intervals(run, band_counts(band), stats=_stats_of(run, pool) if pool else None)


@per_run_version(64, copy=True)
def highdim(run, band) -> pd.DataFrame:
    """``stats.highdim.highdim_table`` (seed 003's checks per layer) for the band."""
    from normvar_core.stats.highdim import highdim_table

    geo = run.table("layer_geometry") if run.has("layer_geometry") else None
    return highdim_table(run.layer_stats(), geo, stats(run), *band_counts(band))


def layernorm(run, band) -> pd.DataFrame | None:
    """App. I per layer (``stats.layernorm.layernorm_table``), or None for runs without ``norm_params``."""
    if not run.has("norm_params"):
        return None
    from normvar_core.stats.layernorm import layernorm_table

    return layernorm_table(table(run, "norm_params"), stats(run), *band_counts(band))


def layernorm_attribution(run) -> pd.DataFrame | None:
    """Where App. I fails, per norm-output layer (``stats.layernorm.layernorm_attribution``), or None
    for runs without ``norm_affine`` (older runs) or ``dim_stats`` (geometry off)."""
    if not (run.has("norm_affine") and run.has("dim_stats") and run.has("norm_params")):
        return None
    from normvar_core.stats.layernorm import layernorm_attribution as attribution

    return attribution(table(run, "norm_affine"), table(run, "dim_stats"), table(run, "norm_params"))


@per_run_version(128)
def histograms(run, layer: int, band, bins: int = 50, pool: bool = False) -> pd.DataFrame:
    """``analyses.histograms`` of Q, M, V at ``layer`` over the band's types (Fig. 14–16)."""
    n_min, n_max = band_counts(band)
    return analyses.histograms(_stats_of(run, pool), int(layer), bins=int(bins), n_min=n_min, n_max=n_max)


@per_run_version(256)
def token_table(run, layer: int, pool: bool = False) -> pd.DataFrame:
    """The types of ``layer`` (token_id, token, n, q, m, v); ``pool``: the pooled sub-word variants,
    whose token_id is the index of their key (not a vocabulary id)."""
    if pool:
        merged, keys = pooled_stats(run)
        return analyses.token_table(merged, int(layer), tokens=keys)
    return run.token_table(int(layer))


@per_run_version(256)
def band_points(run, layer: int, band, pool: bool = False) -> pd.DataFrame:
    """Token types of ``layer`` inside the band (token_id, token, n, q, m, v, log10_n); ``pool``: see
    ``token_table``."""
    return tradeoff_points(token_table(run, layer, pool), *band_counts(band))


@per_run_version(32)
def app_a_tokens(run) -> tuple[int, ...]:
    """App. A's token selection (``analyses.select_tokens``) for the run."""
    names = run.tokens()["token"].astype(str).tolist()
    return tuple(int(t) for t in analyses.select_tokens(stats(run), names))


@per_run_version(32)
def cloud_tokens(run) -> tuple[int, ...]:
    """The types the Token clouds page draws by default (``viz.clouds.cloud_tokens``, as the deck's slide does)."""
    from normvar_core.viz.clouds import cloud_tokens as default_tokens

    return tuple(default_tokens(run))


@per_run_version(64)
def cloud(run, layer: int, ids):
    """``viz.clouds.pca_cloud`` of the sampled embeddings of the types ``ids`` at ``layer``."""
    from normvar_core.viz import clouds

    samples = run.samples(int(layer), sorted(int(i) for i in ids))
    tt = token_table(run, layer)
    n = dict(zip(tt["token_id"].astype(int), tt["n"].astype(int)))
    return clouds.pca_cloud(samples, n, sentences=run.sentences(samples["sentence_id"].tolist()))


@per_run_version(32)
def sampled_tokens(run) -> pd.DataFrame:
    """The types with stored samples (token_id, token, count)."""
    return run.sampled_tokens()


@per_run_version(16, spinner="Testing the claims (1,000 bootstrap resamples)…")
def findings(run) -> tuple:
    """``stats.findings.findings``: each claim of seeds 002–004 tested on the run (its number, interval
    and verdict)."""
    from normvar_core.stats.findings import findings as test_claims

    return tuple(test_claims(run))


@per_run_version(64, copy=True)
def table(run, name: str) -> pd.DataFrame:
    """Any table of the run (a measure's), read once per file version."""
    return run.table(name)


__all__ = [
    "data_dir",
    "runs_table",
    "damaged_runs",
    "open_run",
    "opened_runs",
    "position0_sibling",
    "stats",
    "pooled_stats",
    "tradeoff",
    "intervals",
    "decomposition",
    "frequency_regressions",
    "highdim",
    "layernorm",
    "layernorm_attribution",
    "histograms",
    "token_table",
    "band_points",
    "app_a_tokens",
    "cloud_tokens",
    "cloud",
    "sampled_tokens",
    "findings",
    "table",
]
