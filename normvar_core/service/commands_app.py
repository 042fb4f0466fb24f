"""Sub-commands of the dashboard: ``up`` and ``dashboard``.

``normvar up``         start the background worker (a subprocess), submit the default run if the data
                       directory has no run published and none queued, then serve the dashboard
                       (``streamlit run views/_server.py``: app.py as Streamlit's ASGI app) and print its URL. Ctrl-C stops both.
``normvar dashboard``  only serve the dashboard.

The default run is MiniLM × the shipped novels, limited to ``DEFAULT_MAX_SENTENCES`` sentences so it
computes in a few minutes on 2 CPU cores; compute the full corpus with
``normvar submit --model minilm --name minilm__novels_en_full``.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from normvar_core.config import RunConfig
from normvar_core.service.job import ACTIVE
from normvar_core.datadir import DataDir, shipped

APP = shipped("dashboard", "app.py")  # the checkout's app.py, or the installed package's copy of it
# what `streamlit run` serves: app.py as an ASGI app whose pages opened by URL probe no missing path (views/_server.py)
SERVER = shipped("dashboard", "views/_server.py")
# Streamlit reads .streamlit/config.toml only from the working directory: the shipped file is passed as flags
STREAMLIT_CONFIG = shipped("dashboard", ".streamlit/config.toml")
DEFAULT_MAX_SENTENCES = 5000
DEFAULT_RUN_NAME = "minilm__novels_en"


def default_config() -> RunConfig:
    """The run ``normvar up`` submits on an empty data directory (documented in the README)."""
    return RunConfig(model="minilm", corpus="", name=DEFAULT_RUN_NAME, max_sentences=DEFAULT_MAX_SENTENCES)


def register(sub) -> None:
    from normvar_core.service.args import add_data_dir

    for name, helptext in (("up", "start the worker and the dashboard; submit the default run if none exists"),
                           ("dashboard", "serve the Streamlit dashboard only")):
        p = sub.add_parser(name, help=helptext, description=helptext)
        add_data_dir(p)
        p.add_argument("--port", type=int, default=int(os.environ.get("NORMVAR_PORT", 8501)))
        p.add_argument("--host", default=os.environ.get("NORMVAR_HOST", "localhost"),
                       help="address to listen on (0.0.0.0 in a container)")
        p.add_argument("--max-upload-mb", type=float, default=None,
                       help="corpus upload cap in MB (default $NORMVAR_MAX_UPLOAD_MB or 200)")
        p.add_argument("--token", nargs="?", const="", default=None, metavar="TOKEN",
                       help="every browser must give this token (default $NORMVAR_TOKEN; --token alone: that, else a "
                            "generated one, printed in the URL); needed beyond loopback")
        p.add_argument("--no-token", action="store_true",
                       help="serve beyond loopback without a token (anyone who reaches the port sees every run)")
        p.add_argument("--read-only", action="store_true",
                       help="serve the runs without the New-run page, uploads, cancel or job submissions")
        if name == "up":
            p.add_argument("--no-default-run", action="store_true", help="do not submit the default run")
            p.set_defaults(func=cmd_up)
        else:
            p.set_defaults(func=cmd_dashboard)


def config_flags(path: Path = STREAMLIT_CONFIG) -> list[str]:
    """``[section] key = value`` of the shipped .streamlit/config.toml as ``--section.key value`` flags, so
    the dashboard looks the same when started from any directory (flags given later override these)."""
    import tomllib

    with open(path, "rb") as fh:
        conf = tomllib.load(fh)
    return [x for section, opts in conf.items() for key, value in opts.items()
            for x in (f"--{section}.{key}", str(value).lower() if isinstance(value, bool) else str(value))]


def streamlit_command(data_dir: Path, port: int, host: str = "localhost", max_upload_mb: float | None = None,
                      read_only: bool = False) -> list[str]:
    from normvar_core.service.jobs import max_upload_bytes

    cap_mb = max(1, int(max_upload_bytes(max_upload_mb) // 2**20))
    return [sys.executable, "-m", "streamlit", "run", str(SERVER), *config_flags(),
            "--server.headless", "true", "--server.port", str(port), "--server.address", host,
            "--server.maxUploadSize", str(0 if read_only else cap_mb + 1), "--server.fileWatcherType", "none",
            "--browser.gatherUsageStats", "false", "--theme.base", "light",
            "--", "--data-dir", str(data_dir)]


def _url(host: str, port: int) -> str:
    return f"http://{'localhost' if host in ('0.0.0.0', '::', '') else host}:{port}"


def maybe_submit_default(data_dir: Path) -> str | None:
    """Submit the default run if nothing is published and nothing is queued or running."""
    from normvar_core.service.jobs import JobStore
    from normvar_core.runs.reader import list_runs

    if len(list_runs(data_dir)):
        return None
    store = JobStore(data_dir)
    if store.list(limit=None, states=tuple(ACTIVE)):
        return None
    return store.submit(default_config())


def _env(max_upload_mb: float | None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    if max_upload_mb is not None:
        env["NORMVAR_MAX_UPLOAD_MB"] = str(max_upload_mb)
    return env


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 15
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()


def _serve(args: argparse.Namespace, with_worker: bool) -> int:
    from normvar_core.service import dashboard_access as acc

    access = acc.resolve_access(args.host, args.token, args.no_token, args.read_only, os.environ.get(acc.TOKEN_ENV))
    for line in acc.warning_lines(args.host, args.port, access):
        print(line, file=sys.stderr, flush=True)
    dd = DataDir.at(args.data_dir)
    root = dd.root
    dd.runs  # noqa: B018 - create the folders
    env = _env(args.max_upload_mb)
    procs: list[subprocess.Popen] = []

    def _terminate(signum, frame):  # noqa: ARG001 - SIGTERM (docker stop, kill): clean up the children
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _terminate)
    try:
        if with_worker:
            from normvar_core.service.jobs import JobStore

            if JobStore(root).worker_running():
                print(f"normvar: a worker is already running on {root}; not starting another", flush=True)
            else:
                no_token = acc.child_env(env, acc.Access(None, False, False))  # the worker never needs it
                procs.append(subprocess.Popen([sys.executable, "-m", "normvar_core.service.cli", "worker",
                                               "--data-dir", str(root)], env=no_token))
            if not args.no_default_run:
                job = maybe_submit_default(root)
                if job:
                    print(f"normvar: no run yet: submitted the default run {DEFAULT_RUN_NAME!r} "
                          f"(MiniLM × shipped novels, first {DEFAULT_MAX_SENTENCES} sentences) as job {job}; "
                          "its progress shows on the Runs page", flush=True)
        server = subprocess.Popen(streamlit_command(root, args.port, args.host, args.max_upload_mb, access.read_only),
                                  env=acc.child_env(env, access), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        procs.append(server)
        acc.relay(server.stdout)
        mode = ", read-only" if access.read_only else ""
        print(f"normvar: dashboard at {acc.url_line(_url(args.host, args.port), access)}  (data dir {root}{mode}; "
              "Ctrl-C stops)", flush=True)
        while True:
            for p in procs:
                if p.poll() is not None:
                    print(f"normvar: {'worker' if p is not procs[-1] else 'dashboard'} exited "
                          f"with status {p.returncode}", file=sys.stderr, flush=True)
                    return int(p.returncode or 0) or (1 if p is procs[-1] else 0)
            time.sleep(0.5)
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(procs)


def cmd_up(args: argparse.Namespace) -> int:
    return _serve(args, with_worker=True)


def cmd_dashboard(args: argparse.Namespace) -> int:
    args.no_default_run = True
    return _serve(args, with_worker=False)
