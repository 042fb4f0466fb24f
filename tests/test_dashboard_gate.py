"""The dashboard's token at the HTTP layer and the flags of `up`/`dashboard`, through the real CLI, every request
sent to 127.0.0.1 only (the server binds 0.0.0.0; it is never reached through the machine's other addresses).

Without the sign-in cookie: a page answers only the sign-in form, Streamlit's routes (health, host-config,
upload, media, scripts) answer 403 and the websocket handshake is refused; `?auth=TOKEN` and an old link's
`?token=TOKEN` set the cookie and redirect to the same page and parameters; `?token=TYPE` (the Token page's type)
is kept through the sign-in form; a wrong token is refused after a second. With the cookie: everything works.
Bad flags (port out of range, unknown host, a port in use, a cap of nan or inf) give one line and exit 2, before
any URL; `--port 0` prints the real port."""
from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from browser_helpers import free_port
from normvar_core.service import dashboard_access as access
from dashboard_server import stop

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "T-lab-9"
# the cookie as a client computes it: HMAC-SHA256 keyed with the token (RFC 2104, Python's hmac)
COOKIE = "normvar_session=" + hmac.new(TOKEN.encode(), b"normvar dashboard sign-in", hashlib.sha256).hexdigest()


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != access.TOKEN_ENV}
    return subprocess.run([sys.executable, "-m", "normvar_core.service.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=dict(env, PYTHONPATH=str(ROOT)))


@pytest.mark.subprocess
def test_bad_serving_flags_give_one_line_before_any_url(tmp_path):
    d = str(tmp_path / "d")
    with socket.socket() as busy:                        # a port in use on 127.0.0.1
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = str(busy.getsockname()[1])
        for flags, part in ((["--port", "99999"], "--port 99999 is not a port"),
                            (["--port", "-1"], "--port -1 is not a port"),
                            (["--host", "no-such-host.invalid", "--token", "x"], "is not an address of this machine"),
                            (["--max-upload-mb", "nan"], "--max-upload-mb nan is not a size"),
                            (["--max-upload-mb", "inf"], "--max-upload-mb inf is not a size"),
                            (["--host", "127.0.0.1", "--port", taken], f"cannot serve on 127.0.0.1:{taken}")):
            out = cli("up", "--no-default-run", *flags, "--data-dir", d)
            lines = out.stderr.strip().splitlines()
            assert out.returncode == 2 and len(lines) == 1 and part in lines[0], (flags, out.stderr)
            assert lines[0].startswith("normvar: error: ") and out.stdout == "", (flags, out.stdout)


def request(port: int, method: str, path: str, cookie: str | None = None, body: bytes | None = None,
            headers: dict | None = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    h = dict(headers or {})
    if cookie:
        h["Cookie"] = cookie
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    r.body = r.read()
    conn.close()
    return r


def websocket_status(port: int, cookie: str | None) -> int:
    """The HTTP status of a websocket handshake to /_stcore/stream (101: accepted)."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = ["GET /_stcore/stream HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13", f"Origin: http://127.0.0.1:{port}"]
    if cookie:
        lines.append(f"Cookie: {cookie}")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        status = s.recv(4096).split(b"\r\n", 1)[0].decode()
    return int(status.split()[1])


@pytest.fixture(scope="module")
def gated_server(tmp_path_factory):
    """`normvar dashboard --host 0.0.0.0 --token TOKEN --port 0`: (its first line, its real port)."""
    env = {k: v for k, v in os.environ.items() if k != access.TOKEN_ENV}
    proc = subprocess.Popen([sys.executable, "-m", "normvar_core.service.cli", "dashboard", "--host", "0.0.0.0",
                             "--token", TOKEN, "--port", "0", "--data-dir", str(tmp_path_factory.mktemp("d"))],
                            cwd=ROOT, text=True, env=dict(env, PYTHONPATH=str(ROOT)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()                       # printed once the server answers
    try:
        m = re.match(r"normvar: dashboard at http://([^:/\s]+):(\d+)", first)
        assert m, first
        yield first, int(m.group(2))
    finally:
        stop(proc)


@pytest.mark.subprocess
def test_port_0_prints_the_real_port_and_the_hosts_name(gated_server):
    first, port = gated_server
    assert port > 0 and ":0 " not in first and ":0/" not in first
    assert first.split("//", 1)[1].split(":", 1)[0] in {socket.gethostname(), socket.getfqdn()} - {"localhost"}
    assert request(port, "GET", "/_stcore/health", COOKIE).status == 200      # the port it printed is the server's


@pytest.mark.subprocess
def test_without_the_cookie_only_the_sign_in_page(gated_server):
    _, port = gated_server
    for path in ("/", "/tradeoff?run=x&layer=3", "/token?token=her"):
        r = request(port, "GET", path)
        page = r.body.decode()
        assert r.status == 200 and 'name="token" type="password"' in page and "streamlit" not in page.lower(), path
        assert f'name="next" value="{path.replace("&", "&amp;")}"' in page       # the deep link rides along
    for method, path in (("GET", "/_stcore/health"), ("GET", "/_stcore/host-config"), ("GET", "/_stcore/metrics"),
                         ("GET", "/media/x.png"), ("GET", "/static/js/index.js"),
                         ("PUT", "/_stcore/upload_file/s/f")):
        r = request(port, method, path, body=b"x" * 1000 if method == "PUT" else None,
                    headers={"Content-Type": "application/octet-stream"} if method == "PUT" else None)
        assert r.status == 403, (method, path, r.status)
    assert websocket_status(port, None) == 403
    assert websocket_status(port, "normvar_session=" + "0" * 64) == 403        # a forged cookie
    assert websocket_status(port, COOKIE) == 101


@pytest.mark.subprocess
def test_signing_in_keeps_the_page_and_its_parameters(gated_server):
    _, port = gated_server
    for path, to in ((f"/tradeoff?run=x&auth={TOKEN}&layer=3", "/tradeoff?run=x&layer=3"),
                     (f"/token?token={TOKEN}&run=r", "/token?run=r"),        # an old sign-in link: the token itself
                     (f"/?auth={TOKEN}", "/")):
        r = request(port, "GET", path)
        assert r.status == 303 and r.getheader("location") == to, path
        assert r.getheader("set-cookie").startswith(COOKIE + ";") and "HttpOnly" in r.getheader("set-cookie")
    form = "token=%s&next=%%2Ftoken%%3Frun%%3Dr%%26token%%3Dher" % TOKEN
    r = request(port, "POST", "/_normvar/sign-in", body=form.encode(),
                headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 303 and r.getheader("location") == "/token?run=r&token=her"
    assert r.getheader("set-cookie").startswith(COOKIE + ";")
    r = request(port, "POST", "/_normvar/sign-in", body=b"token=x&next=%2F%2Fevil.example%2F",
                headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 403 and "That is not this dashboard" in r.body.decode() and r.getheader("set-cookie") is None
    r = request(port, "POST", "/_normvar/sign-in", body=f"token={TOKEN}&next=%2F%2Fevil.example%2F".encode(),
                headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.getheader("location") == "/"                                     # never another site
    t0 = time.monotonic()
    r = request(port, "GET", "/?auth=wrong")
    assert r.status == 403 and time.monotonic() - t0 >= 1.0 and r.getheader("set-cookie") is None


@pytest.mark.subprocess
def test_with_the_cookie_streamlit_answers(gated_server):
    _, port = gated_server
    r = request(port, "GET", "/tradeoff?run=x", COOKIE)
    assert r.status == 200 and "BACKEND_BASE_URL" in r.body.decode()       # Streamlit's page, as views/_server.py serves it
    assert request(port, "GET", "/_stcore/host-config", COOKIE).status == 200
