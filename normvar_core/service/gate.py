"""The dashboard's token at the HTTP layer: an ASGI middleware in front of everything Streamlit serves.

With a token set (``$NORMVAR_TOKEN``, ``normvar up --token-file``) every request is checked before Streamlit
sees it: the pages, the websocket (``/_stcore/stream``), uploads (``PUT /_stcore/upload_file/…``), media,
health, scripts. A request passes when it carries the sign-in cookie ``normvar_session_<port>`` with a session
value this server gave out for the current token (``gate_state.Sessions``: random per browser, kept hashed in the
data directory, revoked by ``normvar up --sign-out-all`` or a new token; the cookie never holds the token). The
``Cookie`` header is read leniently (``gate_state.cookie_values``), so other applications' cookies on the same
host never hide it. Without the cookie:

- ``GET`` of a page (``/``, ``/tradeoff``, …) answers a small sign-in page (no Streamlit, no run name) whose
  form posts the token and the page's own path and query to ``<base>_normvar/sign-in``; the right token sets
  the cookie and sends the browser back to that page, so a deep link keeps its page and parameters;
- ``?auth=TOKEN`` in a page's URL (the link ``normvar up`` prints) signs in the same way, and the parameter
  leaves the URL; an older link's ``?token=TOKEN`` does too when its value *is* the token (otherwise
  ``?token=`` is the Token page's token type, and stays);
- everything else is refused: 403 for HTTP, a refused handshake (403) for the websocket.

Every sign-in attempt waits for its client's turn (``gate_state.Throttle``: one a second per client, a few
waiting at most, the rest refused at once with 429), a wrong token is answered a second later, and tokens
are compared with ``hmac.compare_digest``. The client is the socket's peer (``scope["client"]``): the server
rewrites it from ``X-Forwarded-For`` only for a proxy ``$NORMVAR_TRUSTED_PROXIES`` names (none by default;
``dashboard_access.trusted_proxies``), so a header cannot make one client many.

Why a middleware rather than a proxy: ``st.App`` takes ASGI middleware, the same layer that already serves the
page paths (views/_server.py), so the check sits in the one process and port that Streamlit serves, with nothing
else to start, bind or stop.
"""

from __future__ import annotations

import asyncio
import hmac
import html
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from normvar_core.service.gate_state import (
    MAX_AGE_S,
    Throttle,
    cookie_name,
    cookie_values,
    shared_sessions,
)

SIGN_IN = "_normvar/sign-in"
AUTH_PARAM = "auth"  # the sign-in parameter of a link
LEGACY_PARAM = "token"  # an older link's sign-in parameter; also the Token page's token type
MAX_FORM_BYTES = 8192
WRONG_TOKEN = "That is not this dashboard's token."
TOO_MANY = "Too many sign-in attempts from this address at once: wait a few seconds, then try again."
_ACTIVE: list[TokenGate] = []  # the gate this server process runs (views/_access.py asks it again)


def active_gate() -> TokenGate | None:
    """The token gate of this server process, or None when it was started without one."""
    return _ACTIVE[-1] if _ACTIVE else None


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


def safe_next(target: str, base: str) -> str:
    """A path on this server (``/…``), never another site (``//host``, ``http:…``, a backslash); else ``base``."""
    t = str(target or "")
    if not t.startswith(base) or t.startswith("//") or "\\" in t or any(ord(c) < 32 for c in t):
        return base
    return t


def sign_in_page(base: str, target: str, wrong: bool | str) -> bytes:
    """The only page a signed-out browser gets: a token field, no Streamlit and no data. ``wrong``: True for
    the wrong-token line, a text for another line."""
    note = f'<p class="err">{html.escape(WRONG_TOKEN if wrong is True else wrong)}</p>' if wrong else ""
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>normvar: sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>
body{{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#262730}}
input[type=password]{{width:100%;padding:.5rem;font-size:1rem;margin:.3rem 0 1rem}}
button{{padding:.5rem 1.2rem;font-size:1rem;background:#ff4b4b;color:#fff;border:0;border-radius:.4rem}}
.err{{color:#a51d2d}}</style></head><body><h3>normvar</h3>
<p>This dashboard is shared with a token. Give the token it was started with (<code>normvar up</code> printed it,
or ask whoever started it).</p>{note}
<form method="post" action="{html.escape(base + SIGN_IN)}"><label for="token">Token</label>
<input id="token" name="token" type="password" autocomplete="current-password" autofocus required>
<input type="hidden" name="next" value="{html.escape(target)}">
<button type="submit">Sign in</button></form></body></html>""".encode()


class TokenGate:
    """ASGI middleware: the rule of the module docstring. ``pages``: the paths that answer the sign-in page;
    ``port``: the server's port (in the cookie's name); ``sessions``: the file that keeps the sessions (None:
    kept in memory only)."""

    def __init__(
        self,
        app,
        token: str,
        base: str = "/",
        pages: frozenset[str] | set[str] = frozenset(),
        port: int | None = None,
        sessions: Path | None = None,
    ) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie_name(port)
        self.sessions = shared_sessions(token, sessions)
        self.throttle = Throttle()
        self.base = base
        self.pages = set(pages) | {base, base.rstrip("/") or "/"}
        _ACTIVE.append(self)

    def signed_in_header(self, header: str) -> bool:
        """True when a ``Cookie`` header carries a session value this gate gave out for its token."""
        return any(self.sessions.valid(v) for v in cookie_values(header, self.cookie))

    def signed_in(self, scope) -> bool:
        return any(
            self.signed_in_header(value.decode("latin-1"))
            for name, value in scope.get("headers") or ()
            if name == b"cookie"
        )

    async def __call__(self, scope, receive, send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        path, method = scope.get("path", ""), scope.get("method", "GET")
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if kind == "http" and path == self.base + SIGN_IN and method == "POST":
            await self._post_sign_in(scope, receive, send)
            return
        if kind == "http" and method in ("GET", "HEAD") and path in self.pages:
            link = [v for k, v in query if k == AUTH_PARAM or (k == LEGACY_PARAM and _same(v, self.token))]
            if link:  # a sign-in link: right token -> cookie and the same URL without it
                rest = [
                    (k, v) for k, v in query if not (k == AUTH_PARAM or (k == LEGACY_PARAM and _same(v, self.token)))
                ]
                target = path + ("?" + urlencode(rest) if rest else "")
                await self._attempt(scope, send, all(_same(v, self.token) for v in link), target)
                return
        if self.signed_in(scope):
            await self.app(scope, receive, send)
            return
        if kind == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        elif method in ("GET", "HEAD") and path in self.pages:
            target = path + ("?" + scope["query_string"].decode("latin-1") if scope.get("query_string") else "")
            await self._html(send, 200, sign_in_page(self.base, target, wrong=False), head=method == "HEAD")
        else:
            await self._plain(send, 403, b"sign in first\n", receive)

    async def _attempt(self, scope, send, right: bool, target: str) -> None:
        """One sign-in attempt, in its client's turn: the cookie and ``target`` when ``right``, else the form
        again a second later (429 at once when the client has too many attempts waiting)."""
        client = str((scope.get("client") or ("?",))[0])
        if not await self.throttle.turn(client):
            await self._html(send, 429, sign_in_page(self.base, target, wrong=TOO_MANY))
            return
        if right:
            self.throttle.passed(client)
            await self._redirect(send, target, set_cookie=True)
            return
        await asyncio.sleep(1.0)
        await self._html(send, 403, sign_in_page(self.base, target, wrong=True))

    async def _post_sign_in(self, scope, receive, send) -> None:
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if len(body) > MAX_FORM_BYTES:
                await self._plain(send, 413, b"too large\n")
                return
            if not msg.get("more_body"):
                break
        form = dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))
        target = safe_next(form.get("next", ""), self.base)
        await self._attempt(scope, send, _same(form.get("token", ""), self.token), target)

    async def _redirect(self, send, target: str, set_cookie: bool) -> None:
        headers = [
            (b"location", target.encode("latin-1", errors="replace")),
            (b"content-length", b"0"),
            (b"cache-control", b"no-store"),
        ]
        if set_cookie:
            headers.append(
                (
                    b"set-cookie",
                    f"{self.cookie}={self.sessions.new()}; Path={self.base}; HttpOnly; "
                    f"SameSite=Lax; Max-Age={MAX_AGE_S}".encode(),
                )
            )
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    async def _html(self, send, status: int, body: bytes, head: bool = False) -> None:
        headers = [
            (b"content-type", b"text/html; charset=utf-8"),
            (b"cache-control", b"no-store"),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if head else body})

    async def _plain(self, send, status: int, body: bytes, receive=None) -> None:
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


__all__ = ["AUTH_PARAM", "SIGN_IN", "TokenGate", "active_gate", "safe_next", "sign_in_page"]
