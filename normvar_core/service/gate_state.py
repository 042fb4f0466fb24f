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
- ``Throttle``: sign-in attempts per client address take turns, one every ``interval`` seconds; at most
  ``depth`` attempts of one client (and ``total`` of all clients) wait for a turn, and any more are refused at
  once, unread (429). A guess costs a second whatever the number of parallel connections.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import secrets
import stat
import time
from pathlib import Path

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


def sign_out_all(data_dir: str | os.PathLike) -> bool:
    """Delete the kept sessions (the path itself, never what a link there points to); True if there were any."""
    try:
        os.unlink(sessions_path(data_dir))
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
    """The signed-in browsers of one dashboard (the module docstring); ``path`` None keeps them in memory only."""

    RELOAD_S = 1.0

    def __init__(self, token: str, path: Path | None = None, clock=time.time) -> None:
        self.fp, self.path, self.clock = token_fingerprint(token), path, clock
        self.kept: dict[str, list] = _read(path) if path else {}
        self.seen, self.checked = self._stamp(), time.monotonic()

    def _stamp(self):
        try:
            info = os.stat(self.path, follow_symlinks=False) if self.path else None
        except OSError:
            return None
        return info and (info.st_ino, info.st_mtime_ns, info.st_size)

    def _fresh(self) -> None:
        """Reread the file when another process replaced or deleted it (at most once per ``RELOAD_S``)."""
        if self.path is None or time.monotonic() - self.checked < self.RELOAD_S:
            return
        self.checked = time.monotonic()
        now = self._stamp()
        if now != self.seen:
            self.kept, self.seen = _read(self.path), now

    def new(self) -> str:
        """A new session value for a browser that gave the token; kept (hashed) before it is returned."""
        value = secrets.token_urlsafe(32)
        now = self.clock()
        self._fresh()
        if self.path:
            self.kept.update(_read(self.path))  # what another process kept meanwhile
        self.kept = {k: v for k, v in self.kept.items() if now - float(v[1]) < MAX_AGE_S}
        self.kept[_digest(value)] = [self.fp, now]
        if len(self.kept) > MAX_SESSIONS:
            self.kept = dict(sorted(self.kept.items(), key=lambda kv: float(kv[1][1]))[-MAX_SESSIONS:])
        if self.path:
            try:
                _write(self.path, self.kept)
                self.seen = self._stamp()
            except OSError:
                self.path = None  # a read-only data directory: sessions live as long as this server
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


class Throttle:
    """Turns for sign-in attempts per client address (the module docstring)."""

    def __init__(self, interval: float = 1.0, depth: int = 4, total: int = 256) -> None:
        self.interval, self.depth, self.total = interval, depth, total
        self.next_turn: dict[str, float] = {}
        self.waiting: dict[str, int] = {}

    async def turn(self, client: str) -> bool:
        """Wait for ``client``'s next turn; False (at once) when too many attempts already wait."""
        if self.waiting.get(client, 0) >= self.depth or sum(self.waiting.values()) >= self.total:
            return False
        now = time.monotonic()
        if len(self.next_turn) > 4 * self.total:  # forget clients whose turns have passed
            self.next_turn = {k: v for k, v in self.next_turn.items() if v > now}
        at = max(now, self.next_turn.get(client, 0.0))
        self.next_turn[client] = at + self.interval
        self.waiting[client] = self.waiting.get(client, 0) + 1
        try:
            await asyncio.sleep(at - now)
        finally:
            self.waiting[client] -= 1
            if not self.waiting[client]:
                del self.waiting[client]
        return True

    def passed(self, client: str) -> None:
        """The right token: the client's next attempt need not wait."""
        self.next_turn.pop(client, None)


__all__ = [
    "Sessions",
    "Throttle",
    "cookie_name",
    "cookie_values",
    "sessions_path",
    "shared_sessions",
    "sign_out_all",
    "token_fingerprint",
]
