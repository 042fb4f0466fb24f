"""Sub-commands of the dashboard: ``up`` and ``dashboard``.

``normvar up``         start the background worker (a subprocess), submit the default run if the data
                       directory has no run published and none queued, then serve the dashboard
                       (``streamlit run views/_server.py``: app.py as Streamlit's ASGI app) and print its URL. Ctrl-C
                       stops both.
``normvar dashboard``  only serve the dashboard.

The default run is MiniLM × the shipped novels, limited to ``DEFAULT_MAX_SENTENCES`` sentences so it
computes in a few minutes on 2 CPU cores, with every registered measure on (``measures.every_measure_on``: the
defaults of ``compute``, ``submit`` and the New-run form — the neighbourhoods and the layer linearity included —
and the opt-in ones too), so that every page has its figures; compute the full corpus with
``normvar submit --model minilm --name minilm__novels_en_full``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from normvar_core.config import RunConfig
from normvar_core.datadir import DataDir, shipped
from normvar_core.errors import NormvarError
from normvar_core.numbers import PORT, UPLOAD_MB, Number, env_number
from normvar_core.service.job import ACTIVE

APP = shipped("dashboard", "app.py")  # the checkout's app.py, or the installed package's copy of it
# what `streamlit run` serves: app.py as an ASGI app whose pages opened by URL probe no missing path (views/_server.py)
SERVER = shipped("dashboard", "views/_server.py")
# Streamlit reads .streamlit/config.toml only from the working directory: the shipped file is passed as flags
STREAMLIT_CONFIG = shipped("dashboard", ".streamlit/config.toml")
DEFAULT_MAX_SENTENCES = 5000
DEFAULT_RUN_NAME = "minilm__novels_en"


def default_config() -> RunConfig:
    """The run ``normvar up`` submits on an empty data directory (documented in the README): every registered
    measure on (``measures.every_measure_on``: the opt-in ones too)."""
    from normvar_core.pipeline.measures import every_measure_on

    return every_measure_on(
        RunConfig(model="minilm", corpus="", name=DEFAULT_RUN_NAME, max_sentences=DEFAULT_MAX_SENTENCES)
    )


def register(sub) -> None:
    from normvar_core.service.args import add_data_dir

    for name, helptext in (
        ("up", "start the worker and the dashboard; submit the default run if none exists"),
        ("dashboard", "serve the Streamlit dashboard only"),
    ):
        p = sub.add_parser(name, help=helptext, description=helptext)
        add_data_dir(p)
        p.add_argument(
            "--port",
            type=Number("--port", **PORT),
            default=None,
            help="port to serve on (default $NORMVAR_PORT or 8501; 0: any free one)",
        )
        p.add_argument(
            "--host",
            default=os.environ.get("NORMVAR_HOST", "localhost"),
            help="address to listen on (0.0.0.0 in a container)",
        )
        p.add_argument(
            "--max-upload-mb",
            type=Number("--max-upload-mb", **UPLOAD_MB),
            default=None,
            help="corpus upload cap in MB (default $NORMVAR_MAX_UPLOAD_MB or 200)",
        )
        p.add_argument(
            "--token",
            nargs="?",
            const="",
            default=None,
            metavar="TOKEN",
            help="every browser must give a token (default $NORMVAR_TOKEN; --token alone: that, else a "
            "generated one, printed in the URL); needed beyond loopback. --token TOKEN shows it to "
            "every user in `ps`: prefer --token-file or $NORMVAR_TOKEN",
        )
        p.add_argument(
            "--token-file",
            default=None,
            metavar="FILE",
            help="read the token from the first line of FILE (kept out of the command line)",
        )
        p.add_argument(
            "--sign-out-all",
            action="store_true",
            help="forget every browser that signed in before (each signs in again with the token)",
        )
        p.add_argument(
            "--no-token",
            action="store_true",
            help="serve beyond loopback without a token (anyone who reaches the port sees every run)",
        )
        p.add_argument(
            "--read-only",
            action="store_true",
            help="serve the runs without the New-run page, uploads, cancel or job submissions",
        )
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
    return [
        x
        for section, opts in conf.items()
        for key, value in opts.items()
        for x in (f"--{section}.{key}", str(value).lower() if isinstance(value, bool) else str(value))
    ]


def streamlit_command(
    data_dir: Path, port: int, host: str = "localhost", max_upload_mb: float | None = None, read_only: bool = False
) -> list[str]:
    from normvar_core.service.jobs import max_upload_bytes

    cap_mb = max(1, int(max_upload_bytes(max_upload_mb) // 2**20))
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(SERVER),
        *config_flags(),
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--server.address",
        host,
        "--server.maxUploadSize",
        str(0 if read_only else cap_mb + 1),
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        "--theme.base",
        "light",
        "--",
        "--data-dir",
        str(data_dir),
    ]


EVERY_ADDRESS = ("0.0.0.0", "::", "")
READY_TIMEOUT_S = 120


def _url(host: str, port: int) -> str:
    """The address others can reach: the machine's name when bound to every address, else the host given."""
    from normvar_core.service.dashboard_access import is_loopback

    name = host
    if host in EVERY_ADDRESS:
        fqdn = socket.getfqdn()
        name = fqdn if fqdn and not is_loopback(fqdn) else (socket.gethostname() or "localhost")
    return f"http://{f'[{name}]' if ':' in name else name}:{port}"


def serving_port(given: int | None) -> int:
    """``--port``, else ``$NORMVAR_PORT`` (checked here, so a bad value never stops another command), else 8501;
    a refusal names the one that was given (``numbers.Number``)."""
    if given is not None:
        return given
    return int(env_number("NORMVAR_PORT", 8501, **PORT))  # kind=int: already an int


def check_serving(host: str, port: int, max_upload_mb: float | None) -> int:
    """The port to serve on, after checking the flags in one line each (exit 2): a port in 1–65535 (0: a free
    one, chosen here so the URL names it), a host that resolves, the port free on it, a finite positive cap."""
    if max_upload_mb is None:  # the variable the server would read: checked before it starts
        env_number("NORMVAR_MAX_UPLOAD_MB", None, **UPLOAD_MB)
    else:
        Number("--max-upload-mb", **UPLOAD_MB)(max_upload_mb)
    Number("--port", **PORT)(port)
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as err:
        raise NormvarError(
            f"--host {host!r} is not an address of this machine ({err})",
            fix="give localhost, 0.0.0.0 or one of this machine's names or addresses",
        ) from None
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: a TIME_WAIT port is free
        try:
            s.bind(addr)
        except OSError as err:
            raise NormvarError(
                f"cannot serve on {host}:{port}: {err.strerror or err}",
                fix="pick another --port (a free one, or 0 for any), or stop what listens there",
            ) from None
        return s.getsockname()[1]


def wait_ready(server: subprocess.Popen, host: str, port: int, timeout: float = READY_TIMEOUT_S) -> bool:
    """True once the server accepts connections (on 127.0.0.1/::1 when it listens on every address or on
    loopback, else on its own address), False if it exits first."""
    from normvar_core.service.dashboard_access import is_loopback

    targets = ("127.0.0.1", "::1") if host in EVERY_ADDRESS or is_loopback(host) else (host,)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.poll() is None:
        for local in targets:
            try:
                with socket.create_connection((local, port), timeout=1):
                    return True
            except OSError:
                pass
        time.sleep(0.2)
    return server.poll() is None


def maybe_submit_default(data_dir: Path) -> str | None:
    """Submit the default run if nothing is published and nothing is queued or running."""
    from normvar_core.runs.reader import list_runs
    from normvar_core.service.jobs import JobStore

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
    from normvar_core.service import dashboard_access

    dashboard_access.trusted_proxies(os.environ.get(dashboard_access.TRUSTED_PROXIES_ENV))  # one line if bad
    token = dashboard_access.token_option(args.token, args.token_file)
    access = dashboard_access.resolve_access(
        args.host, token, args.no_token, args.read_only, os.environ.get(dashboard_access.TOKEN_ENV)
    )
    args.port = check_serving(args.host, serving_port(args.port), args.max_upload_mb)
    for line in dashboard_access.warning_lines(
        args.host, args.port, access, token_in_argv=args.token not in (None, "")
    ):
        print(line, file=sys.stderr, flush=True)
    dd = DataDir.at(args.data_dir)
    root = dd.root
    dd.runs  # noqa: B018  -- the property creates the folder
    dd.queue  # noqa: B018  -- the property creates the folder
    if args.sign_out_all:
        from normvar_core.service.gate_state import sign_out_all

        sign_out_all(root)
        print("normvar: every browser that signed in before must give the token again", file=sys.stderr, flush=True)
    env = _env(args.max_upload_mb)
    procs: list[subprocess.Popen] = []

    def _terminate(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _terminate)
    try:
        if with_worker:
            from normvar_core.service.jobs import JobStore

            if JobStore(root).worker_running():
                print(f"normvar: a worker is already running on {root}; not starting another", flush=True)
            else:
                no_token = dashboard_access.child_env(
                    env, dashboard_access.Access(None, False, False)
                )  # the worker never needs it
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "normvar_core.service.cli", "worker", "--data-dir", str(root)],
                        env=no_token,
                    )
                )
            if not args.no_default_run:
                job = maybe_submit_default(root)
                if job:
                    print(
                        f"normvar: no run yet: submitted the default run {DEFAULT_RUN_NAME!r} "
                        f"(MiniLM × shipped novels, first {DEFAULT_MAX_SENTENCES} sentences) as job {job}; "
                        "its progress shows on the Runs page",
                        flush=True,
                    )
        server = subprocess.Popen(
            streamlit_command(root, args.port, args.host, args.max_upload_mb, access.read_only),
            env=dashboard_access.child_env(env, access),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        procs.append(server)
        dashboard_access.relay(server.stdout)  # type: ignore[arg-type]  # stdout=PIPE
        if not wait_ready(server, args.host, args.port):
            server.wait()
            print(
                f"normvar: the dashboard did not start (status {server.returncode}); its lines are above",
                file=sys.stderr,
                flush=True,
            )
            return 2
        mode = ", read-only" if access.read_only else ""
        print(
            f"normvar: dashboard at {dashboard_access.url_line(_url(args.host, args.port), access)}"
            f"  (data dir {root}{mode}; "
            "Ctrl-C stops)",
            flush=True,
        )
        while True:
            for p in procs:
                if p.poll() is not None:
                    print(
                        f"normvar: {'worker' if p is not procs[-1] else 'dashboard'} exited with status {p.returncode}",
                        file=sys.stderr,
                        flush=True,
                    )
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
