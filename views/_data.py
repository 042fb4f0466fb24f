"""Dashboard plumbing, part 1: the data directory and cached reads. A run is opened once per (path,
mtime) and every analysis table is cached per (run path, mtime, band) with ``st.cache_resource``
(shared, never pickled or copied; treat as read-only)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from normvar_core.datadir import DataDir, resolve_data_dir
from normvar_core.viz import figures, viewstate


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


@st.cache_resource(show_spinner=False, max_entries=16)
def _damaged(root: str, signature: tuple) -> pd.DataFrame:
    from normvar_core.runs import runfile

    runs = runfile.list_runs(root, include_damaged=True)
    return runs[runs["status"] == "damaged"][["name", "path", "problem"]].reset_index(drop=True)


def damaged_runs() -> pd.DataFrame:
    """Run files that fail the integrity check (name, path, problem): listed on Runs, never selected."""
    dd = DataDir(data_dir())
    sig = tuple((p.name, _mtime(p)) for p in dd.published_runs())
    return _damaged(str(dd.root), sig)


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


@st.cache_resource(show_spinner=False, max_entries=16)
def _pooled(path: str, mtime: int):
    """(TokenStats, keys) with the types that share a key pooled exactly (fn. 7: "##ing" with "ing",
    "Ġthe" with "the"; ``analyses.merge_by_key``)."""
    from normvar_core.stats.analyses import merge_by_key, strip_prefix

    tokens = _open_run(path, mtime).tokens()["token"].astype(str)
    return merge_by_key(_stats(path, mtime), [strip_prefix(t) for t in tokens])


def _stats_of(path: str, mtime: int, pool: bool):
    return _pooled(path, mtime)[0] if pool else _stats(path, mtime)


@st.cache_resource(show_spinner=False, max_entries=256)
def _analysis(kind: str, path: str, mtime: int, n_min: float, n_max: float, pool: bool = False):
    from normvar_core.stats import analyses

    fn = getattr(analyses, kind)
    return fn(_stats_of(path, mtime, pool), n_min, n_max)


def tradeoff(run, band, pool: bool = False) -> pd.DataFrame:
    """``analyses.tradeoff`` per layer (C.V. of Q, slope, intercept, R^2) for the band; ``pool``:
    over the pooled sub-word variants (fn. 7)."""
    return _analysis("tradeoff", *_key(run), *viewstate.band_counts(band), bool(pool))


@st.cache_resource(show_spinner=False, max_entries=64)
def _intervals(path: str, mtime: int, n_min: float, n_max: float, pool: bool):
    from normvar_core.stats.intervals import run_intervals

    return run_intervals(_open_run(path, mtime), (n_min, n_max), stats=_stats_of(path, mtime, pool) if pool else None)


def intervals(run, band, pool: bool = False) -> pd.DataFrame:
    """``stats.intervals.run_intervals``: the run file's intervals for the study's band, else the
    bootstrap over the band's (pooled) types now (issue 26: bands on Layers, Trade-off, Geometry)."""
    return _intervals(*_key(run), *viewstate.band_counts(band), bool(pool))


def decomposition(run, band, pool: bool = False) -> pd.DataFrame:
    return _analysis("decomposition", *_key(run), *viewstate.band_counts(band), bool(pool))


def frequency_regressions(run, band, pool: bool = False) -> pd.DataFrame:
    return _analysis("frequency_regressions", *_key(run), *viewstate.band_counts(band), bool(pool))


@st.cache_resource(show_spinner=False, max_entries=64)
def _highdim(path: str, mtime: int, n_min: float, n_max: float) -> pd.DataFrame:
    from normvar_core.stats.highdim import highdim_table

    run = _open_run(path, mtime)
    geo = run.table("layer_geometry") if run.has("layer_geometry") else None
    return highdim_table(run.layer_stats(), geo, _stats(path, mtime), n_min, n_max)


def highdim(run, band) -> pd.DataFrame:
    """``stats.highdim.highdim_table`` (seed 003's checks per layer) for the band."""
    return _highdim(*_key(run), *viewstate.band_counts(band)).copy()


def layernorm(run, band) -> pd.DataFrame | None:
    """App. I per layer (``stats.layernorm.layernorm_table``), or None for runs without ``norm_params``."""
    if not run.has("norm_params"):
        return None
    from normvar_core.stats.layernorm import layernorm_table

    return layernorm_table(table(run, "norm_params"), stats(run), *viewstate.band_counts(band))


def layernorm_attribution(run) -> pd.DataFrame | None:
    """Where App. I fails, per norm-output layer (``stats.layernorm.layernorm_attribution``), or None
    for runs without ``norm_affine`` (older runs) or ``dim_stats`` (geometry off)."""
    if not (run.has("norm_affine") and run.has("dim_stats") and run.has("norm_params")):
        return None
    from normvar_core.stats.layernorm import layernorm_attribution as attribution

    return attribution(table(run, "norm_affine"), table(run, "dim_stats"), table(run, "norm_params"))


@st.cache_resource(show_spinner=False, max_entries=128)
def _histograms(path: str, mtime: int, layer: int, bins: int, n_min: float, n_max: float, pool: bool = False):
    from normvar_core.stats import analyses

    return analyses.histograms(_stats_of(path, mtime, pool), layer, bins=bins, n_min=n_min, n_max=n_max)


def histograms(run, layer: int, band, bins: int = 50, pool: bool = False) -> pd.DataFrame:
    return _histograms(*_key(run), int(layer), int(bins), *viewstate.band_counts(band), bool(pool))


@st.cache_resource(show_spinner=False, max_entries=256)
def _token_table(path: str, mtime: int, layer: int, pool: bool = False) -> pd.DataFrame:
    if pool:
        from normvar_core.stats.analyses import token_table as pooled_table

        merged, keys = _pooled(path, mtime)
        return pooled_table(merged, layer, tokens=keys)
    return _open_run(path, mtime).token_table(layer)


def token_table(run, layer: int, pool: bool = False) -> pd.DataFrame:
    """The types of ``layer`` (token_id, token, n, q, m, v); ``pool``: the pooled sub-word variants,
    whose token_id is the index of their key (not a vocabulary id)."""
    return _token_table(*_key(run), int(layer), bool(pool))


@st.cache_resource(show_spinner=False, max_entries=256)
def _points(path: str, mtime: int, layer: int, n_min: float, n_max: float, pool: bool = False) -> pd.DataFrame:
    return figures.tradeoff_points(_token_table(path, mtime, layer, pool), n_min, n_max)


def band_points(run, layer: int, band, pool: bool = False) -> pd.DataFrame:
    """Token types of ``layer`` inside the band (token_id, token, n, q, m, v, log10_n); ``pool``: see
    ``token_table``."""
    return _points(*_key(run), int(layer), *viewstate.band_counts(band), bool(pool))


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
    return clouds.pca_cloud(samples, n, sentences=run.sentences(samples["sentence_id"].tolist()))


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
        reason = run.skipped(what)
        if reason:
            st.info(f"Run **{run.name}** has no {label}: {reason}.", icon=":material/info:")
            st.stop()
        st.info(f"Run **{run.name}** has no {label}: it was computed before normvar measured it, or with it "
                f"switched off. Recompute it (New run, or `normvar compute ... --overwrite`) to see this page.",
                icon=":material/info:")
        st.stop()


_NOT_COMPARED = ("name", "exclude_position0")


def position0_sibling(run):
    """The published run computed with the same options as ``run`` except ``exclude_position0``
    flipped (the same model, corpus and sample, with or without each sentence's first position), or None."""
    mine = dict(run.meta.get("options") or {})
    if not mine:
        return None
    want = {k: v for k, v in mine.items() if k not in _NOT_COMPARED}
    flipped = not bool(mine.get("exclude_position0"))
    for name in runs_table()["name"]:
        other = open_run(name) if name != run.name else None
        opts = dict(other.meta.get("options") or {}) if other is not None else {}
        if (opts and bool(opts.get("exclude_position0")) == flipped
                and {k: v for k, v in opts.items() if k not in _NOT_COMPARED} == want):
            return other
    return None


def num_hidden_states(run) -> int:
    """Hidden states of the model (blocks + the input embeddings) for the relative-depth axis."""
    n = run.meta.get("num_layers")
    if n:
        return int(n) + 1
    return max(run.layers) + 1



__all__ = ['data_dir', 'runs_table', 'damaged_runs', 'open_run', 'stats', 'tradeoff', 'intervals', 'decomposition', 'frequency_regressions', 'highdim', 'layernorm', 'layernorm_attribution', 'histograms', 'token_table', 'band_points', 'app_a_tokens', 'cloud', 'sampled_tokens', 'table', 'require', 'num_hidden_states', 'position0_sibling']
