"""What the dashboard's token gate (``service/gate.py``) keeps: the cookies a request carries, the browsers that
signed in, and the pace of sign-in attempts per client.

- ``cookie_values``: the values of one cookie in a ``Cookie`` header, read leniently: the header is split at
  ``;`` and each part at its first ``=``, so another application's cookie (a JSON value, a space, a bare flag,
  a non-ASCII value: every local app shares one cookie jar on ``127.0.0.1``) never hides ours, wherever it sits.
  (``http.cookies.SimpleCookie`` stops at the first cookie it cannot parse.)
- ``cookie_name``: ``normvar_session_<port>``. Browsers send a host's cookies to every port of it; with the port
  in the name, dashboards on two ports of one host keep their own sign-ins.
- ``Sessions``: each signed-in browser holds a random value (``secrets.token_urlsafe(32)``, 256 bits); the
  server keeps only its SHA-256, with a fingerprint of the token it was given for
  (HMAC-SHA256 keyed with the token) and the time it was made. A cookie passes when its hash is kept, its
  fingerprint is the current token's and it is younger than ``MAX_AGE_S``. The hashes are kept in a file of the
  data directory (``queue/dashboard_sessions.json``, mode 0600), so a restart keeps browsers signed in;
  ``normvar up --sign-out-all`` deletes it, and a new token makes every kept value stale: both sign every
  browser out. The file is replaced (written next to it, then renamed over it) and read without following a link.
  Every write is a read-modify-write of the file under an exclusive lock (``<file>.lock``), and so is
  ``--sign-out-all``'s deletion: a sign-in in another process never writes revoked sessions back.
- ``Throttle``: sign-in attempts per client take turns, one every ``interval`` seconds; at most ``depth``
  attempts of one client (and ``total`` of all clients) wait for a turn, and any more are refused at once,
  unread (429). A guess costs a second whatever the number of parallel connections. A client is the socket's
  peer (``client_key``: an IPv6 peer by its /64): ``X-Forwarded-For`` counts only from a proxy named in
  ``$NORMVAR_TRUSTED_PROXIES`` (none by default; ``dashboard_access.trusted_proxies``). The table of turns is
  bounded (``MAX_CLIENTS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import stat
import threading
import time
from pathlib import Path

from normvar_core.destination import open_regular
from normvar_core.errors import NormvarError

COOKIE_PREFIX = "normvar_session"
SESSIONS_FILE = "dashboard_sessions.json"
MAX_AGE_S = 30 * 24 * 3600
MAX_SESSIONS = 2000
MAX_FILE_BYTES = 1 << 20


def cookie_name(port: int | None) -> str:
    """``normvar_session_<port>`` (``normvar_session`` when the port is unknown)."""
    return f"{COOKIE_PREFIX}_{int(port)}" if port else COOKIE_PREFIX


def cookie_values(header: str, name: str) -> list[str]:
    """Every value of cookie ``name`` in a ``Cookie`` header (RFC 6265 §5.4 pairs split at ``;``, each at its
    first ``=``; surrounding spaces and double quotes dropped); a part that is not ``name=…`` is skipped."""
    found = []
    for part in str(header or "").split(";"):
        key, eq, value = part.partition("=")
        if eq and key.strip() == name:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            found.append(value)
    return found


def token_fingerprint(token: str) -> str:
    return hmac.new(token.encode("utf-8"), b"normvar dashboard sessions", hashlib.sha256).hexdigest()


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", errors="replace")).hexdigest()


def sessions_path(data_dir: str | os.PathLike) -> Path:
    return Path(data_dir) / "queue" / SESSIONS_FILE


def lock_path(path: Path) -> Path:
    """The lock every change of the sessions file is made under: ``<file>.lock`` beside it."""
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def _locked(path: Path):
    """Hold the sessions' lock (an exclusive ``flock`` on ``lock_path``, opened by ``destination.open_regular``:
    a link, a hard link or anything but a regular file there is refused) for one read-modify-write of the file."""
    fd = open_regular(lock_path(path), os.O_RDWR | os.O_CREAT, what="the sessions' lock", mode=0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the flock


def sign_out_all(data_dir: str | os.PathLike) -> bool:
    """Delete the kept sessions (the path itself, never what a link there points to), under the sessions' lock:
    a sign-in running now either wrote before (and is signed out too) or reads the file after (and finds it
    gone), so it never writes the revoked sessions back. True if there were any."""
    path = sessions_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        try:
            os.unlink(path)
            return True
        except FileNotFoundError:
            return False


def _read(path: Path) -> dict[str, list]:
    """The kept sessions, or {} when the file is missing, not a regular file, a link, too large or damaged."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            return {}
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = json.loads(fh.read().decode("utf-8"))
        kept = data.get("sessions") if isinstance(data, dict) else None
        return (
            {str(k): v for k, v in kept.items() if isinstance(v, list) and len(v) == 2}
            if isinstance(kept, dict)
            else {}
        )
    except (OSError, ValueError, AttributeError):
        return {}
    finally:
        os.close(fd)


def _write(path: Path, sessions: dict[str, list]) -> None:
    """Replace ``path`` with ``sessions``: a new file (mode 0600, never through a link) renamed over it."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"sessions": sessions}, fh)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class Sessions:
    """The signed-in browsers of one dashboard (the module docstring); ``path`` None keeps them in memory only.

    With a file, the file is the truth: ``new`` is one read-modify-write of it under the sessions' lock (what it
    holds now, plus the new session), never a write-back of what this process held in memory, so a
    ``sign_out_all`` (or another process's change) is never undone; ``valid`` rereads the file whenever it was
    replaced or deleted (one ``stat`` per check)."""

    def __init__(self, token: str, path: Path | None = None, clock=time.time) -> None:
        self.fp, self.path, self.clock = token_fingerprint(token), path, clock
        self.kept: dict[str, list] = _read(path) if path else {}
        self.seen = self._stamp()
        self.lock = threading.Lock()  # the server's threads: one read-modify-write at a time here too

    def _stamp(self):
        try:
            info = os.stat(self.path, follow_symlinks=False) if self.path else None
        except OSError:
            return None
        return info and (info.st_ino, info.st_mtime_ns, info.st_size)

    def _fresh(self) -> None:
        """Reread the file when another process (or a sign-out) replaced or deleted it."""
        if self.path is None:
            return
        now = self._stamp()
        if now != self.seen:
            self.kept, self.seen = _read(self.path), now

    def _add(self, kept: dict[str, list], value: str, now: float) -> dict[str, list]:
        kept = {k: v for k, v in kept.items() if now - float(v[1]) < MAX_AGE_S}
        kept[_digest(value)] = [self.fp, now]
        if len(kept) > MAX_SESSIONS:
            kept = dict(sorted(kept.items(), key=lambda kv: float(kv[1][1]))[-MAX_SESSIONS:])
        return kept

    def new(self) -> str:
        """A new session value for a browser that gave the token; kept (hashed) before it is returned."""
        value = secrets.token_urlsafe(32)
        now = self.clock()
        with self.lock:
            if self.path:
                try:
                    with _locked(self.path):
                        kept = self._add(_read(self.path), value, now)  # the file now, not this process's copy
                        _write(self.path, kept)
                        self.kept, self.seen = kept, self._stamp()
                    return value
                except (OSError, NormvarError):
                    self.path = None  # a read-only data directory: sessions live as long as this server
            self.kept = self._add(self.kept, value, now)
        return value

    def valid(self, value: str) -> bool:
        if not value:
            return False
        self._fresh()
        entry = self.kept.get(_digest(value))
        return (
            bool(entry)
            and hmac.compare_digest(str(entry[0]), self.fp)  # type: ignore[index]  # bool(entry) above
            and self.clock() - float(entry[1]) < MAX_AGE_S  # type: ignore[index]
        )


_SHARED: dict[tuple[str, str], Sessions] = {}


def shared_sessions(token: str, path: Path | None) -> Sessions:
    """One ``Sessions`` per token and file in a process, so every gate the server builds sees the same ones."""
    key = (token_fingerprint(token), str(path))
    if key not in _SHARED:
        _SHARED[key] = Sessions(token, path)
    return _SHARED[key]


MAX_CLIENTS = 4096
"""The most clients whose turns the throttle remembers: past it, clients whose turns have passed are forgotten,
and while every remembered one still has a turn ahead, a new client shares one turn with the other new ones
(``OVERFLOW``). Its memory is bounded whatever the number of addresses."""
OVERFLOW = "(new clients)"


def client_key(address: str) -> str:
    """Whose turn an attempt from ``address`` (the socket's peer) takes: an IPv4 address itself (an IPv4-mapped
    IPv6 address as its IPv4 one), an IPv6 address's /64 (one host holds a whole /64, the least a site gets), any
    other text (a Unix socket's name) as it is, cut to 64 characters."""
    try:
        ip = ipaddress.ip_address(str(address).split("%", 1)[0])
    except ValueError:
        return str(address)[:64]
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class Throttle:
    """Turns for sign-in attempts per client (``client_key`` of the socket's peer; the module docstring), in
    bounded memory (``MAX_CLIENTS``)."""

    def __init__(self, interval: float = 1.0, depth: int = 4, total: int = 256, clients: int = MAX_CLIENTS) -> None:
        self.interval, self.depth, self.total, self.clients = interval, depth, total, clients
        self.next_turn: dict[str, float] = {}
        self.waiting: dict[str, int] = {}

    def key(self, client: str) -> str:
        """``client``'s entry in the table: its ``client_key``, or ``OVERFLOW`` while the table is full."""
        key = client_key(client)
        if key in self.next_turn or key in self.waiting:
            return key
        if len(self.next_turn) >= self.clients:  # forget the clients whose turns have passed
            now = time.monotonic()
            self.next_turn = {k: v for k, v in self.next_turn.items() if v > now or k in self.waiting}
        return key if len(self.next_turn) < self.clients else OVERFLOW

    async def turn(self, client: str) -> bool:
        """Wait for ``client``'s next turn; False (at once) when too many attempts already wait."""
        key = self.key(client)
        if self.waiting.get(key, 0) >= self.depth or sum(self.waiting.values()) >= self.total:
            return False
        now = time.monotonic()
        at = max(now, self.next_turn.get(key, 0.0))
        self.next_turn[key] = at + self.interval
        self.waiting[key] = self.waiting.get(key, 0) + 1
        try:
            await asyncio.sleep(at - now)
        finally:
            self.waiting[key] -= 1
            if not self.waiting[key]:
                del self.waiting[key]
        return True

    def passed(self, client: str) -> None:
        """The right token: the client's next attempt need not wait (the shared turn of new clients does)."""
        key = client_key(client)
        if key != OVERFLOW:
            self.next_turn.pop(key, None)


__all__ = [
    "MAX_CLIENTS",
    "Sessions",
    "Throttle",
    "client_key",
    "lock_path",
    "cookie_name",
    "cookie_values",
    "sessions_path",
    "shared_sessions",
    "sign_out_all",
    "token_fingerprint",
]
