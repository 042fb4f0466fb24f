"""The dashboard's token at the HTTP layer and the flags of `up`/`dashboard`, through the real CLI, every request
sent to 127.0.0.1 only (the server binds 0.0.0.0; it is never reached through the machine's other addresses).

Without the sign-in cookie: a page answers only the sign-in form, Streamlit's routes (health, host-config,
upload, media, scripts) answer 403 and the websocket handshake is refused; `?auth=TOKEN` and an old link's
`?token=TOKEN` set the cookie and redirect to the same page and parameters; `?token=TYPE` (the Token page's type)
is kept through the sign-in form; a wrong token is refused after a second. With the cookie: everything works.
The cookie is the one the server set (named after its port, a random value per browser), found however other
applications' cookies precede it; sign-in attempts take turns per client address (127.0.0.2, 127.0.0.3: other
loopback addresses as other clients).
Bad flags (port out of range, unknown host, a port in use, a cap of nan or inf) give one line and exit 2, before
any URL; `--port 0` prints the real port."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import itertools
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from browser_helpers import free_port
from dashboard_server import stop

from normvar_core.service import dashboard_access as access
from normvar_core.service import gate_state

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "T-lab-9"
# what another application on 127.0.0.1 may leave in the shared cookie jar, before ours
FOREIGN = ('prefs={"theme": "dark", "n": 2}', "sid=a b c", "flag", "nom=café", 'x="unterminated', "=v", "a=b=c")


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != access.TOKEN_ENV}
    return subprocess.run(
        [sys.executable, "-m", "normvar_core.service.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=dict(env, PYTHONPATH=str(ROOT)),
    )


@pytest.mark.subprocess
def test_bad_serving_flags_give_one_line_before_any_url(tmp_path):
    d = str(tmp_path / "d")
    with socket.socket() as busy:  # a port in use on 127.0.0.1
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = str(busy.getsockname()[1])
        for flags, part in (
            (["--port", "99999"], "--port 99999 is not a whole number from 0 to 65535 (0: any free port)"),
            (["--port", "-1"], "--port -1 is not a whole number from 0 to 65535"),
            (["--host", "no-such-host.invalid", "--token", "x"], "is not an address of this machine"),
            (["--max-upload-mb", "nan"], "--max-upload-mb nan is not a number above 0"),
            (["--max-upload-mb", "inf"], "--max-upload-mb inf is not a number above 0"),
            (["--host", "127.0.0.1", "--port", taken], f"cannot serve on 127.0.0.1:{taken}"),
        ):
            out = cli("up", "--no-default-run", *flags, "--data-dir", d)
            lines = out.stderr.strip().splitlines()
            assert out.returncode == 2 and len(lines) == 1 and part in lines[0], (flags, out.stderr)
            assert lines[0].startswith("normvar: error: ") and out.stdout == "", (flags, out.stdout)


def request(
    port: int,
    method: str,
    path: str,
    cookie: str | None = None,
    body: bytes | None = None,
    headers: dict | None = None,
    source: str = "127.0.0.1",
) -> http.client.HTTPResponse:
    """One request to 127.0.0.1:port from the loopback address ``source`` (another one: another client)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60, source_address=(source, 0))
    h = dict(headers or {})
    if cookie:
        h["Cookie"] = cookie.encode("utf-8").decode("latin-1")  # a non-ASCII cookie travels as its UTF-8 bytes
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    r.body = r.read()
    conn.close()
    return r


def websocket_status(port: int, cookie: str | None) -> int:
    """The HTTP status of a websocket handshake to /_stcore/stream (101: accepted)."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        "GET /_stcore/stream HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        f"Origin: http://127.0.0.1:{port}",
    ]
    if cookie:
        lines.append(f"Cookie: {cookie}")
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8"))
        status = s.recv(4096).split(b"\r\n", 1)[0].decode()
    return int(status.split()[1])


@pytest.fixture(scope="module")
def gated_server(tmp_path_factory):
    """`normvar dashboard --host 0.0.0.0 --token TOKEN --port 0`: (its first line, its real port)."""
    env = {k: v for k, v in os.environ.items() if k != access.TOKEN_ENV}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "normvar_core.service.cli",
            "dashboard",
            "--host",
            "0.0.0.0",
            "--token",
            TOKEN,
            "--port",
            "0",
            "--data-dir",
            str(tmp_path_factory.mktemp("d")),
        ],
        cwd=ROOT,
        text=True,
        env=dict(env, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = proc.stdout.readline()  # printed once the server answers
    try:
        m = re.match(r"normvar: dashboard at http://([^:/\s]+):(\d+)", first)
        assert m, first
        yield first, int(m.group(2))
    finally:
        stop(proc)


def sign_in(port: int, source: str = "127.0.0.1") -> str:
    """Sign in with the link's ``?auth=``: the ``name=value`` of the cookie the server sets."""
    r = request(port, "GET", f"/?auth={TOKEN}", source=source)
    assert r.status == 303, (r.status, r.body[:200])
    return r.getheader("set-cookie").split(";", 1)[0]


@pytest.fixture(scope="module")
def cookie(gated_server) -> str:
    return sign_in(gated_server[1])


@pytest.mark.subprocess
def test_port_0_prints_the_real_port_and_the_hosts_name(gated_server, cookie):
    first, port = gated_server
    assert port > 0 and ":0 " not in first and ":0/" not in first
    assert first.split("//", 1)[1].split(":", 1)[0] in {socket.gethostname(), socket.getfqdn()} - {"localhost"}
    assert request(port, "GET", "/_stcore/health", cookie).status == 200  # the port it printed is the server's


@pytest.mark.subprocess
def test_without_the_cookie_only_the_sign_in_page(gated_server, cookie):
    _, port = gated_server
    for path in ("/", "/tradeoff?run=x&layer=3", "/token?token=her"):
        r = request(port, "GET", path)
        page = r.body.decode()
        assert r.status == 200 and 'name="token" type="password"' in page and "streamlit" not in page.lower(), path
        assert f'name="next" value="{path.replace("&", "&amp;")}"' in page  # the deep link rides along
    for method, path in (
        ("GET", "/_stcore/health"),
        ("GET", "/_stcore/host-config"),
        ("GET", "/_stcore/metrics"),
        ("GET", "/media/x.png"),
        ("GET", "/static/js/index.js"),
        ("PUT", "/_stcore/upload_file/s/f"),
    ):
        r = request(
            port,
            method,
            path,
            body=b"x" * 1000 if method == "PUT" else None,
            headers={"Content-Type": "application/octet-stream"} if method == "PUT" else None,
        )
        assert r.status == 403, (method, path, r.status)
    assert websocket_status(port, None) == 403
    name = cookie.split("=", 1)[0]
    assert websocket_status(port, f"{name}=" + "0" * 64) == 403  # a forged cookie
    fixed = hmac.new(TOKEN.encode(), b"normvar dashboard sign-in", hashlib.sha256).hexdigest()
    assert websocket_status(port, f"{name}={fixed}; normvar_session={fixed}") == 403  # a value derived from the token
    assert websocket_status(port, cookie) == 101


@pytest.mark.subprocess
def test_signing_in_keeps_the_page_and_its_parameters(gated_server):
    _, port = gated_server
    for path, to in (
        (f"/tradeoff?run=x&auth={TOKEN}&layer=3", "/tradeoff?run=x&layer=3"),
        (f"/token?token={TOKEN}&run=r", "/token?run=r"),  # an old sign-in link: the token itself
        (f"/?auth={TOKEN}", "/"),
    ):
        r = request(port, "GET", path)
        assert r.status == 303 and r.getheader("location") == to, path
        assert r.getheader("set-cookie").startswith(f"normvar_session_{port}=") and "HttpOnly" in r.getheader(
            "set-cookie"
        )
    form = f"token={TOKEN}&next=%2Ftoken%3Frun%3Dr%26token%3Dher"
    r = request(
        port,
        "POST",
        "/_normvar/sign-in",
        body=form.encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status == 303 and r.getheader("location") == "/token?run=r&token=her"
    assert r.getheader("set-cookie").startswith(f"normvar_session_{port}=")
    r = request(
        port,
        "POST",
        "/_normvar/sign-in",
        body=b"token=x&next=%2F%2Fevil.example%2F",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status == 403 and "That is not this dashboard" in r.body.decode() and r.getheader("set-cookie") is None
    r = request(
        port,
        "POST",
        "/_normvar/sign-in",
        body=f"token={TOKEN}&next=%2F%2Fevil.example%2F".encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.getheader("location") == "/"  # never another site
    t0 = time.monotonic()
    r = request(port, "GET", "/?auth=wrong")
    assert r.status == 403 and time.monotonic() - t0 >= 1.0 and r.getheader("set-cookie") is None


@pytest.mark.subprocess
def test_with_the_cookie_streamlit_answers(gated_server, cookie):
    _, port = gated_server
    r = request(port, "GET", "/tradeoff?run=x", cookie)
    assert r.status == 200 and "BACKEND_BASE_URL" in r.body.decode()  # Streamlit's page, as views/_server.py serves it
    assert request(port, "GET", "/_stcore/host-config", cookie).status == 200


@pytest.mark.subprocess
def test_other_applications_cookies_never_hide_ours(gated_server, cookie):
    _, port = gated_server
    for foreign in FOREIGN:
        for header in (f"{foreign}; {cookie}", f"{cookie}; {foreign}", f"{foreign};{cookie};{foreign}"):
            assert request(port, "GET", "/_stcore/host-config", header).status == 200, header
            assert websocket_status(port, header) == 101, header
            r = request(port, "GET", "/tradeoff?run=x", header)
            assert r.status == 200 and "BACKEND_BASE_URL" in r.body.decode(), header  # Streamlit, not the sign-in page


@pytest.mark.subprocess
def test_each_browser_gets_its_own_session_named_after_the_port(gated_server, cookie):
    _, port = gated_server
    other = sign_in(port)
    name, value = cookie.split("=", 1)
    assert name == other.split("=", 1)[0] == f"normvar_session_{port}"
    assert other != cookie and len(value) >= 40 and TOKEN not in value  # random per browser, not the token
    assert request(port, "GET", "/_stcore/host-config", other).status == 200
    assert (
        request(port, "GET", "/_stcore/host-config", f"normvar_session_{port + 1}={value}").status == 403
    )  # another port's
    assert request(port, "GET", "/_stcore/host-config", f"normvar_session={value}").status == 403


def _flood(port: int, n: int, source: str) -> list[tuple[float, int]]:
    """``n`` wrong sign-ins POSTed at once from ``source``: (seconds to the answer, status) each."""
    form = b"token=guess&next=%2F"
    results: list[tuple[float, int]] = []
    start = threading.Barrier(n)

    def one() -> None:
        start.wait()
        t0 = time.monotonic()
        r = request(
            port,
            "POST",
            "/_normvar/sign-in",
            body=form,
            source=source,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        results.append((time.monotonic() - t0, r.status))

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


@pytest.mark.subprocess
def test_sign_in_attempts_take_turns_per_client(gated_server):
    _, port = gated_server
    results: list[tuple[float, int]] = []
    flood = threading.Thread(target=lambda: results.extend(_flood(port, 50, "127.0.0.3")))
    flood.start()
    time.sleep(0.5)
    t0 = time.monotonic()  # meanwhile another client is not held up
    other = sign_in(port, source="127.0.0.2")
    other_client_s = time.monotonic() - t0
    flood.join(180)
    assert len(results) == 50
    verdicts = sorted(t for t, status in results if status == 403)  # guesses whose token was compared
    refused = [t for t, status in results if status == 429]  # refused unread: the queue was full
    assert len(verdicts) + len(refused) == 50, results
    assert sum(t < 2.5 for t in verdicts) <= 2, verdicts  # one guess a second, not 50
    assert 1 <= len(verdicts) <= 8 and len(refused) >= 42, (verdicts, refused)
    assert all(b - a >= 0.9 for a, b in itertools.pairwise(verdicts)), verdicts
    assert other_client_s < 3 and request(port, "GET", "/_stcore/host-config", other).status == 200


def _argv_of_tree(pid: int) -> list[bytes]:
    """The command lines (/proc/PID/cmdline, what ``ps`` shows) of ``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            out.append(Path(f"/proc/{p}/cmdline").read_bytes())
        except OSError:
            continue
        todo += children.get(p, [])
    return out


@pytest.mark.subprocess
def test_sessions_outlive_a_restart_until_signed_out_and_the_token_stays_out_of_ps(tmp_path):
    from dashboard_server import serve_until_ready

    d, canary = tmp_path / "d", tmp_path / "canary.json"
    (d / "queue").mkdir(parents=True)
    canary.write_text("another application's file\n")
    (d / "queue" / "dashboard_sessions.json").symlink_to(canary)  # planted where the sessions are kept
    secret = tmp_path / "token.txt"
    secret.write_text(TOKEN + "\n")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != access.TOKEN_ENV}

    def serve(*flags: str) -> subprocess.Popen:
        proc, first = serve_until_ready(
            ["dashboard", "--host", "0.0.0.0", "--port", str(port), "--data-dir", str(d), *flags], env
        )
        assert first.startswith("normvar: dashboard at "), first
        return proc

    def status(cookie: str) -> int:
        return request(port, "GET", "/_stcore/host-config", cookie).status

    proc = serve("--token-file", str(secret))
    try:
        argvs = _argv_of_tree(proc.pid)
        assert len(argvs) >= 2 and not any(TOKEN.encode() in a for a in argvs)  # the parent and Streamlit
        cookie = sign_in(port)
        assert status(cookie) == 200
    finally:
        _, err = stop(proc)
    assert "warning" not in err
    kept = d / "queue" / "dashboard_sessions.json"
    assert canary.read_text() == "another application's file\n"  # never written through the link
    assert kept.is_file() and not kept.is_symlink() and cookie.split("=", 1)[1] not in kept.read_text()
    assert kept.stat().st_mode & 0o077 == 0
    env[access.TOKEN_ENV] = TOKEN
    proc = serve()
    try:
        assert status(cookie) == 200  # kept across the restart
    finally:
        stop(proc)
    env[access.TOKEN_ENV] = TOKEN + "-new"
    proc = serve()
    try:
        assert status(cookie) == 403  # a new token signs it out ...
    finally:
        stop(proc)
    env.pop(access.TOKEN_ENV)
    proc = serve("--token", TOKEN)
    try:
        assert status(cookie) == 200  # ... for as long as it is in use
    finally:
        stop(proc)
    proc = serve("--token", TOKEN, "--sign-out-all")
    try:
        assert status(cookie) == 403  # every browser signs in again
        assert status(sign_in(port)) == 200
    finally:
        _, err = stop(proc)
    assert "--token TOKEN shows the token to every user" in err and "--token-file" in err
    kept.unlink()
    kept.symlink_to(canary)
    assert gate_state.sign_out_all(d) and not kept.exists() and not kept.is_symlink()
    assert canary.read_text() == "another application's file\n"  # the link went, not its target


def test_cookie_values_split_as_a_browser_sends_them():
    """The gate's reading of a Cookie header agrees with Starlette's (an independent parser of RFC 6265 pairs)
    on our cookie, whatever other applications' cookies surround it."""
    from starlette.requests import cookie_parser

    ours = "normvar_session_8501=Zx-9_abc"
    for foreign in FOREIGN:
        for header in (f"{foreign}; {ours}", f"{ours}; {foreign}", f"{foreign};{ours};{foreign}"):
            assert gate_state.cookie_values(header, "normvar_session_8501") == ["Zx-9_abc"], header
            assert cookie_parser(header)["normvar_session_8501"] == "Zx-9_abc", header
    assert gate_state.cookie_values("normvar_session_85011=x; normvar_session=y", "normvar_session_8501") == []
    assert gate_state.cookie_name(8501) == "normvar_session_8501"
