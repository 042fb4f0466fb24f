"""Who a client is for the dashboard's sign-in turns, and revocation that holds.

Through a real ``normvar dashboard`` (requests to 127.0.0.1 only, other loopback addresses as other clients):
wrong guesses that each carry their own ``X-Forwarded-For`` still take one client's turns (one a second, the rest
refused at once), even with ``FORWARDED_ALLOW_IPS=*`` inherited from the environment; meanwhile another client's
right token signs in at once. With ``NORMVAR_TRUSTED_PROXIES`` naming the sender, its header does name the client.
The throttle's table stays bounded whatever the number of addresses. A sign-in racing ``--sign-out-all`` (another
process's session store, in memory) never brings a revoked session back."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from browser_helpers import free_port
from dashboard_server import serve_until_ready, stop

from normvar_core.errors import NormvarError
from normvar_core.service import dashboard_access as access
from normvar_core.service import gate_state

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "T-lab-65"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _post(port: int, token: str, source: str, forwarded: str | None) -> tuple[float, int]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60, source_address=(source, 0))
    headers = dict(FORM, **({"X-Forwarded-For": forwarded} if forwarded else {}))
    t0 = time.monotonic()
    conn.request("POST", "/_normvar/sign-in", body=f"token={token}&next=%2F".encode(), headers=headers)
    r = conn.getresponse()
    r.read()
    conn.close()
    return time.monotonic() - t0, r.status


def _flood(port: int, n: int, source: str) -> list[tuple[float, int]]:
    """``n`` wrong guesses POSTed at once from ``source``, each with its own ``X-Forwarded-For: 10.7.x.y``."""
    results: list[tuple[float, int]] = []
    start = threading.Barrier(n)

    def one(i: int) -> None:
        start.wait()
        results.append(_post(port, "guess", source, f"10.7.{i // 250}.{i % 250 + 1}"))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def _serve(d: Path, **env: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    full = {k: v for k, v in os.environ.items() if k not in (access.TOKEN_ENV, access.TRUSTED_PROXIES_ENV)}
    proc, first = serve_until_ready(
        ["dashboard", "--host", "0.0.0.0", "--token", TOKEN, "--port", str(port), "--data-dir", str(d)],
        dict(full, **env),
    )
    assert re.match(r"normvar: dashboard at http://", first), first
    return proc, port


@pytest.mark.subprocess
def test_forwarded_headers_do_not_make_one_client_many_and_a_right_token_gets_in(tmp_path):
    proc, port = _serve(tmp_path / "d", FORWARDED_ALLOW_IPS="*")  # an inherited trust-everyone is replaced
    try:
        results: list[tuple[float, int]] = []
        flood = threading.Thread(target=lambda: results.extend(_flood(port, 60, "127.0.0.3")))
        flood.start()
        time.sleep(0.4)
        seconds, status = _post(port, TOKEN, "127.0.0.2", "10.7.0.1")  # another client, during the flood
        flood.join(180)
    finally:
        stop(proc)
    assert status == 303 and seconds < 3, (status, seconds)
    verdicts = sorted(t for t, s in results if s == 403)  # guesses whose token was compared
    refused = [t for t, s in results if s == 429]
    assert len(results) == 60 and len(verdicts) + len(refused) == 60, results
    assert sum(t < 2.5 for t in verdicts) <= 2 and len(refused) >= 50, (verdicts, len(refused))


@pytest.mark.subprocess
def test_a_named_proxy_s_forwarded_header_names_the_client(tmp_path):
    proc, port = _serve(tmp_path / "d", **{access.TRUSTED_PROXIES_ENV: "127.0.0.3"})
    try:
        results = _flood(port, 12, "127.0.0.3")  # 12 browsers behind the proxy: 12 clients
    finally:
        stop(proc)
    assert sorted(s for _, s in results) == [403] * 12, results
    assert max(t for t, _ in results) < 3, results  # each its own first turn, answered a second later


@pytest.mark.subprocess
def test_trusted_proxies_are_addresses_or_networks_and_replace_the_servers_default():
    assert access.trusted_proxies(None) == access.trusted_proxies("") == ""
    assert access.trusted_proxies(" 127.0.0.1, 10.0.0.0/24 ,::1") == "127.0.0.1,10.0.0.0/24,::1"
    for bad in ("*", "proxy.lan", "10.0.0.0/33"):
        with pytest.raises(NormvarError, match=f"{access.TRUSTED_PROXIES_ENV}=.* is not an address or a network"):
            access.trusted_proxies(bad)
    env = access.child_env({"FORWARDED_ALLOW_IPS": "*"}, access.Access("t", False, False))
    assert env["FORWARDED_ALLOW_IPS"] == ""  # Uvicorn trusts nobody's X-Forwarded-For
    env = access.child_env({access.TRUSTED_PROXIES_ENV: "10.1.2.3"}, access.Access("t", False, False))
    assert env["FORWARDED_ALLOW_IPS"] == "10.1.2.3"
    out = subprocess.run(
        [sys.executable, "-m", "normvar_core.service.cli", "dashboard", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT), **{access.TRUSTED_PROXIES_ENV: "*"}),
    )
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and access.TRUSTED_PROXIES_ENV in lines[0], out.stderr


def test_the_throttle_s_memory_is_bounded_whatever_the_number_of_clients():
    throttle = gate_state.Throttle(clients=256)  # a small table, so the test is quick
    given = 0

    async def attempt(client: str) -> None:
        nonlocal given
        try:
            given += bool(await asyncio.wait_for(throttle.turn(client), 0.005))
        except TimeoutError:  # waiting for its turn: the client gave up
            pass

    async def many() -> None:
        for i in range(3 * 256):  # each address once, one after another: 768 clients within a second
            await attempt(f"10.7.{i // 250}.{i % 250 + 1}")

    asyncio.run(many())
    assert len(throttle.next_turn) <= 256 + 1 and given >= 256  # the table, and the new clients' shared turn
    assert gate_state.MAX_CLIENTS <= 1 << 16  # the server's table: bounded too
    assert gate_state.client_key("2001:db8::1") == gate_state.client_key("2001:db8::ffff") == "2001:db8::/64"
    assert gate_state.client_key("::ffff:10.0.0.1") == "10.0.0.1"


def test_a_sign_in_racing_sign_out_all_never_brings_revoked_sessions_back(tmp_path):
    path = gate_state.sessions_path(tmp_path)
    path.parent.mkdir(parents=True)
    server = gate_state.Sessions(TOKEN, path)  # a serving process's store
    before = [server.new() for _ in range(3)]
    assert all(server.valid(v) for v in before)
    assert gate_state.sign_out_all(tmp_path)  # `--sign-out-all` from another process
    after = server.new()  # a browser signs in just after
    reader = gate_state.Sessions(TOKEN, path)  # any process reading the store now
    assert reader.valid(after) and server.valid(after)
    assert not any(reader.valid(v) or server.valid(v) for v in before)

    # concurrently: several stores (processes) sign browsers in while a sign-out happens; every session handed out
    # before the sign-out began is invalid afterwards, and every sign-in begun after it returned is valid (one that
    # overlaps it may go either way: it took the lock before or after the sign-out, which waits for the lock)
    stores = [gate_state.Sessions(TOKEN, path) for _ in range(4)]
    handed: list[tuple[float, float, str]] = []  # (sign-in begun, returned, session)
    stop_at = time.monotonic() + 2.0

    def sign_ins(store) -> None:
        while time.monotonic() < stop_at:
            t0 = time.monotonic()
            value = store.new()
            handed.append((t0, time.monotonic(), value))

    threads = [threading.Thread(target=sign_ins, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    time.sleep(1.0)
    began = time.monotonic()
    gate_state.sign_out_all(tmp_path)
    ended = time.monotonic()
    for t in threads:
        t.join(30)
    revoked = [v for _, done, v in handed if done < began]
    later = [v for start, _, v in handed if start > ended]
    assert len(revoked) > 10 and later
    final = gate_state.Sessions(TOKEN, path)
    assert not any(final.valid(v) for v in revoked)
    assert not any(s.valid(v) for s in stores for v in revoked[-5:])
    assert all(final.valid(v) for v in later)


def test_a_hard_linked_sessions_lock_is_refused_and_its_target_kept(tmp_path):
    path = gate_state.sessions_path(tmp_path)
    path.parent.mkdir(parents=True)
    canary = tmp_path / "canary.txt"
    canary.write_text("another application's file\n")
    os.link(canary, gate_state.lock_path(path))
    with pytest.raises(NormvarError, match="hard link"):
        gate_state.sign_out_all(tmp_path)
    assert canary.read_text() == "another application's file\n"
