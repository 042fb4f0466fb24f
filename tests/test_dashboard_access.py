"""A dashboard safe to share, through the real CLI and Streamlit's AppTest:
`up`/`dashboard` beyond loopback without a token are refused in one line (exit 2, nothing started), `--no-token`
prints a warning, Streamlit's own start-up lines never reach the terminal, the token travels in the server's
environment (not its argv); in the app, a token gates every page (no run name before it), the right token (URL or
sign-in field) opens the session and leaves the URL (at the HTTP layer: tests/test_dashboard_gate.py), and --read-only
drops the New-run page, cancel and every job
submission. tests/test_dashboard_share_browser.py drives `up --host 0.0.0.0 --token T` in a real browser."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from browser_helpers import free_port
from dashboard_run import RUN, RUN2
from dashboard_server import serve_until_ready, stop

from normvar_core.service import dashboard_access as access

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


def cli(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ if env is None else env, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "normvar_core.service.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )


# ============================================================================ the CLI
@pytest.mark.subprocess
@pytest.mark.parametrize("command", ["up", "dashboard"])
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "lab-server.example"])
def test_beyond_loopback_without_a_token_is_refused(tmp_path, command, host):
    env = {k: v for k, v in os.environ.items() if k != access.TOKEN_ENV}
    out = cli(command, "--host", host, "--data-dir", str(tmp_path / "d"), env=env)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("normvar: error: ")
        and "--token" in lines[0]
        and "--no-token" in lines[0]
    )
    assert out.stdout == "" and not (tmp_path / "d").exists()  # refused before anything was started


@pytest.mark.subprocess
def test_contradictions_and_bad_tokens_are_refused(tmp_path):
    d = str(tmp_path / "d")
    for args, env_token, part in (
        (["--no-token", "--token", "x"], None, "contradict"),
        (["--no-token"], "x", "contradict"),
        (["--token", "a b"], None, "spaces"),
    ):
        env = {k: v for k, v in os.environ.items() if k != access.TOKEN_ENV}
        if env_token:
            env[access.TOKEN_ENV] = env_token
        out = cli("dashboard", "--host", "0.0.0.0", *args, "--data-dir", d, env=env)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and part in out.stderr, out.stderr


def streamlit_children(proc: subprocess.Popen) -> list[int]:
    kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    return [int(k) for k in kids if "streamlit" in Path(f"/proc/{k}/cmdline").read_bytes().decode(errors="replace")]


@pytest.mark.subprocess
def test_no_token_warns_and_streamlit_chatter_is_not_shown(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != access.TOKEN_ENV}
    proc, first = serve_until_ready(
        ["dashboard", "--host", "0.0.0.0", "--no-token", "--port", str(free_port()), "--data-dir", str(tmp_path)], env
    )
    out, err = stop(proc)
    names = {socket.gethostname(), socket.getfqdn()} - {"localhost"}  # the address others reach: the host's name
    assert any(first.startswith(f"normvar: dashboard at http://{n}:") for n in names), first
    assert "?token=" not in first and "?auth=" not in first
    assert err.splitlines()[0].startswith("normvar: warning: --no-token: anyone who can reach port")
    for chatter in (
        "You can now view",
        "Network URL",
        "Local URL",
        "Did not auto detect",
        "docs.streamlit.io",
        "Uvicorn",
        "Stopping",
    ):
        assert chatter not in out + err, out + err
    assert all(line.startswith("normvar: ") for line in (first + out + err).splitlines() if line.strip())


@pytest.mark.subprocess
def test_the_token_reaches_the_server_in_its_environment_not_its_argv(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != access.TOKEN_ENV}
    proc, first = serve_until_ready(
        ["dashboard", "--token", "--port", str(free_port()), "--data-dir", str(tmp_path)], env
    )
    try:
        assert "/?auth=" in first
        token = first.split("/?auth=", 1)[1].split()[0]
        assert len(token) >= 32
        (kid,) = streamlit_children(proc)
        assert token not in Path(f"/proc/{kid}/cmdline").read_bytes().decode()
        environ = dict(
            kv.split("=", 1) for kv in Path(f"/proc/{kid}/environ").read_bytes().decode().split("\0") if "=" in kv
        )
        assert environ[access.TOKEN_ENV] == token
    finally:
        stop(proc)


def test_read_only_takes_no_upload():
    from normvar_core.service.commands_app import streamlit_command

    for read_only, cap in ((False, "201"), (True, "0")):  # Streamlit refuses any upload body over 0 MB
        cmd = streamlit_command(Path("/d"), 8501, read_only=read_only)
        assert cmd[cmd.index("--server.maxUploadSize") + 1] == cap


def test_access_rules():
    assert access.is_loopback("localhost") and access.is_loopback("127.0.0.1") and access.is_loopback("127.3.4.5")
    assert access.is_loopback("::1") and access.is_loopback("[::1]")
    assert not any(map(access.is_loopback, ("0.0.0.0", "::", "", "192.168.1.4", "lab-server")))
    assert access.resolve_access("localhost", None, False, False, None).token is None
    assert access.resolve_access("127.0.0.1", None, False, False, "env-T").token == "env-T"  # loopback too
    assert access.resolve_access("0.0.0.0", "T", False, False, "env-T").token == "T"  # --token wins
    gen = access.resolve_access("0.0.0.0", "", False, True, None)
    assert gen.generated and gen.read_only and len(gen.token) >= 32
    assert gen.token != access.resolve_access("0.0.0.0", "", False, True, None).token
    assert access.resolve_access("0.0.0.0", "", False, False, "env-T") == access.Access(
        "env-T", False, False
    )  # Docker's CMD


# ============================================================================ the app
@pytest.fixture(scope="module")
def data(data_dir) -> Path:
    return data_dir


def everything(at) -> str:
    """Every element the script sent, main area and sidebar (markdown, captions, labels, options, tables,
    JSON), as protobuf text, and the paths of the pages its navigation registered."""

    def walk(node):
        if getattr(node, "proto", None) is not None:
            yield str(node.proto)
        for child in getattr(node, "children", {}).values():
            yield from walk(child)

    return "\n".join([*walk(at._tree), *pages(at)])


def pages(at) -> list[str]:
    return [str(info.get("url_pathname", "")) for info in at._registered_pages.values()]


@pytest.fixture
def gated(data, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("NORMVAR_DATA", str(data))
    monkeypatch.setenv(access.TOKEN_ENV, "T-0123")
    return AppTest.from_file(APP, default_timeout=90)


@pytest.mark.parametrize(
    "query", [{}, {"token": "wrong"}, {"page": "tradeoff", "run": RUN}, {"token": "T-0123"}, {"auth": "T-0123"}]
)
def test_without_the_cookie_no_page_and_no_run(gated, query):
    """Signing in is the HTTP gate's (tests/test_dashboard_gate.py): the script, reached without its cookie, shows
    one line and nothing of the runs, whatever the query holds, and leaves the query alone (?token= is a type)."""
    gated.query_params.update(query)
    gated.run()
    assert not gated.exception
    text = everything(gated)
    assert RUN not in text and RUN2 not in text and "tradeoff" not in pages(gated)
    assert not gated.text_input and [w.value for w in gated.warning] == [
        "This dashboard is shared with a token: reload the page to sign in."
    ]
    assert dict(gated.query_params) == {k: str(v) for k, v in query.items()}


def test_read_only_has_no_form_no_cancel_no_submission(tmp_path, data, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from normvar_core.config import RunConfig
    from normvar_core.service.jobs import JobStore

    d = tmp_path / "d"
    shutil.copytree(data, d)
    JobStore(d).submit(RunConfig(model="minilm", max_sentences=5, name="waiting"))  # queued: a Cancel button
    monkeypatch.setenv("NORMVAR_DATA", str(d))
    monkeypatch.delenv(access.TOKEN_ENV, raising=False)
    for read_only in ("", "1"):
        monkeypatch.setenv(access.READ_ONLY_ENV, read_only)
        at = AppTest.from_file(APP, default_timeout=90)
        at.query_params.update({"run": RUN})
        at.run()
        assert not at.exception and RUN in everything(at)
        keys = {b.key for b in at.button}
        assert any(k and k.startswith("cancel_") for k in keys) != bool(read_only)
        assert ("w_null_go" in keys) != bool(read_only) and ("w_report_run" in keys) != bool(read_only)
        assert ("new-run" in pages(at)) != bool(read_only) and "tradeoff" in pages(at)
        at.switch_page("views/token.py").run()
        own = [t.label for t in at.tabs if t.label == "Your own sentence"]  # a tab that queues jobs
        assert bool(own) != bool(read_only)
        if own:
            at.session_state["w_section_token"] = own[0]
            at.run()
            assert not at.exception and "w_own_go" in {b.key for b in at.button}
        at.switch_page("views/training.py").run()  # no sweep yet: its button opens New run
        assert not at.exception and ("w_training_sweep" in {b.key for b in at.button}) != bool(read_only)
