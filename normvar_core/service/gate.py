"""The dashboard's token at the HTTP layer: an ASGI middleware in front of everything Streamlit serves.

With a token set (``$NORMVAR_TOKEN``, ``normvar up --token``) every request is checked before Streamlit sees
it: the pages, the websocket (``/_stcore/stream``), uploads (``PUT /_stcore/upload_file/…``), media, health,
scripts. A request passes when it carries the sign-in cookie::

    cookie = HMAC-SHA256(key = token, message = "normvar dashboard sign-in")   (hex)

so a reload needs no token again, the cookie never holds the token itself, and a new token signs every old
cookie out. Without the cookie:

- ``GET`` of a page (``/``, ``/tradeoff``, …) answers a small sign-in page (no Streamlit, no run name) whose
  form posts the token and the page's own path and query to ``<base>_normvar/sign-in``; the right token sets
  the cookie and sends the browser back to that page, so a deep link keeps its page and parameters;
- ``?auth=TOKEN`` in a page's URL (the link ``normvar up`` prints) signs in the same way, and the parameter
  leaves the URL; an older link's ``?token=TOKEN`` does too when its value *is* the token (otherwise
  ``?token=`` is the Token page's token type, and stays);
- everything else is refused: 403 for HTTP, a refused handshake (403) for the websocket.

A wrong token waits a second before its answer (guessing through the form is slow) and is compared with
``hmac.compare_digest``. Why a middleware rather than a proxy: ``st.App`` takes ASGI middleware, the same
layer that already serves the page paths (views/_server.py), so the check sits in the one process and port
that Streamlit serves, with nothing else to start, bind or stop.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import html
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

COOKIE = "normvar_session"
SIGN_IN = "_normvar/sign-in"
AUTH_PARAM = "auth"          # the sign-in parameter of a link
LEGACY_PARAM = "token"       # an older link's sign-in parameter; also the Token page's token type
MAX_FORM_BYTES = 8192
WRONG_TOKEN = "That is not this dashboard's token."


def cookie_value(token: str) -> str:
    """HMAC-SHA256 of a fixed message keyed with the token, as hex."""
    return hmac.new(token.encode("utf-8"), b"normvar dashboard sign-in", hashlib.sha256).hexdigest()


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


def safe_next(target: str, base: str) -> str:
    """A path on this server (``/…``), never another site (``//host``, ``http:…``, a backslash); else ``base``."""
    t = str(target or "")
    if not t.startswith(base) or t.startswith("//") or "\\" in t or any(ord(c) < 32 for c in t):
        return base
    return t


def sign_in_page(base: str, target: str, wrong: bool) -> bytes:
    """The only page a signed-out browser gets: a token field, no Streamlit and no data."""
    note = f'<p class="err">{html.escape(WRONG_TOKEN)}</p>' if wrong else ""
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
    """ASGI middleware: the rule of the module docstring. ``pages``: the paths that answer the sign-in page."""

    def __init__(self, app, token: str, base: str = "/", pages: frozenset[str] | set[str] = frozenset()) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie_value(token)
        self.base = base
        self.pages = set(pages) | {base, base.rstrip("/") or "/"}

    def signed_in(self, scope) -> bool:
        for name, value in scope.get("headers") or ():
            if name == b"cookie":
                jar = SimpleCookie()
                try:
                    jar.load(value.decode("latin-1"))
                except Exception:  # noqa: BLE001 - a malformed cookie header signs nobody in
                    continue
                if COOKIE in jar and _same(jar[COOKIE].value, self.cookie):
                    return True
        return False

    async def __call__(self, scope, receive, send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)   # lifespan
            return
        path, method = scope.get("path", ""), scope.get("method", "GET")
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if kind == "http" and path == self.base + SIGN_IN and method == "POST":
            await self._post_sign_in(receive, send)
            return
        if kind == "http" and method in ("GET", "HEAD") and path in self.pages:
            link = [v for k, v in query if k == AUTH_PARAM or (k == LEGACY_PARAM and _same(v, self.token))]
            if link:   # a sign-in link: right token -> cookie and the same URL without it
                rest = [(k, v) for k, v in query if not (k == AUTH_PARAM or (k == LEGACY_PARAM and _same(v, self.token)))]
                target = path + ("?" + urlencode(rest) if rest else "")
                if all(_same(v, self.token) for v in link):
                    await self._redirect(send, target, set_cookie=True)
                    return
                await asyncio.sleep(1.0)
                await self._html(send, 403, sign_in_page(self.base, target, wrong=True))
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

    async def _post_sign_in(self, receive, send) -> None:
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
        if _same(form.get("token", ""), self.token):
            await self._redirect(send, target, set_cookie=True)
            return
        await asyncio.sleep(1.0)
        await self._html(send, 403, sign_in_page(self.base, target, wrong=True))

    async def _redirect(self, send, target: str, set_cookie: bool) -> None:
        headers = [(b"location", target.encode("latin-1", errors="replace")), (b"content-length", b"0"),
                   (b"cache-control", b"no-store")]
        if set_cookie:
            headers.append((b"set-cookie", f"{COOKIE}={self.cookie}; Path={self.base}; HttpOnly; "
                                           "SameSite=Lax".encode()))
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    async def _html(self, send, status: int, body: bytes, head: bool = False) -> None:
        headers = [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store"),
                   (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if head else body})

    async def _plain(self, send, status: int, body: bytes, receive=None) -> None:  # noqa: ARG002
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                   (b"connection", b"close")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


__all__ = ["TokenGate", "cookie_value", "safe_next", "sign_in_page", "COOKIE", "AUTH_PARAM", "SIGN_IN"]
