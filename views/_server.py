"""The dashboard as Streamlit's ASGI app (``st.App``): app.py behind one middleware, so a page opened by its
own URL (``/tradeoff``) asks the server nothing that fails.

Why: Streamlit's front end cannot tell whether ``/tradeoff`` is the page ``tradeoff`` of an app at ``/`` or an
app served under ``/tradeoff``, so it probes ``/tradeoff/_stcore/health`` and ``/tradeoff/_stcore/host-config``
first (two 404s in the console) and then the parent (streamlit/streamlit#7074). Its front end reads the app's
base from ``window.__streamlit.BACKEND_BASE_URL`` when a host page sets it (streamlit/streamlit#11537); this
middleware serves Streamlit's own index.html with that one line added, for the app's root and each page path
(the line also keeps one browser-history entry per page, so Back takes one press).
Everything else (scripts, fonts, the websocket, media) goes to Streamlit unchanged. With a token set, the
token gate (normvar_core/service/gate.py) stands in front of both.

    streamlit run views/_server.py -- --data-dir D     # what `normvar dashboard` / `normvar up` run
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

from normvar_core.service.dashboard_access import FORWARDED_ENV, TOKEN_ENV, TRUSTED_PROXIES_ENV, trusted_proxies
from normvar_core.service.gate import TokenGate
from normvar_core.viz.pages import PAGE_KEYS

APP_SCRIPT = Path(__file__).resolve().parent.parent / "app.py"


def _base_path() -> str:
    """``/`` or ``/<server.baseUrlPath>/``."""
    from streamlit import config

    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}/" if base else "/"


#: one history entry per page: Streamlit pushes an entry when a page opens (its path) and another when the
#: page's script writes its view into the query (``sync_url``), so Back took two presses. A push that only
#: changes the query of the current path replaces the entry instead.
ONE_ENTRY_PER_PAGE = (
    "var push=history.pushState.bind(history);history.pushState=function(s,t,u){"
    "try{if(new URL(u,location.href).pathname===location.pathname){return history.replaceState(s,t,u);}}"
    "catch(e){}return push(s,t,u);};"
)


#: the placeholders Streamlit shows while an element's code loads (``stSkeleton``, one per element whose script
#: chunk is not loaded yet: on a first visit, most of a page's widgets and its figure) hold still instead of
#: pulsing. The pulse made the browser draw a frame of the page ~60 times a second until the last chunk came;
#: where the browser composites in software (no GPU) those frames cost as much CPU as the rest of the page
#: load (docs/benchmarks.md, "Pages in a browser"). Nothing else on a page changes.
STILL_PLACEHOLDERS = '<style>[data-testid="stSkeleton"]{animation:none!important}</style>'


def index_html(base: str) -> bytes:
    """Streamlit's index.html with the app's base URL set before its scripts load, one history entry
    per page (``ONE_ENTRY_PER_PAGE``) and still loading placeholders (``STILL_PLACEHOLDERS``)."""
    index = Path(st.__file__).resolve().parent / "static" / "index.html"
    line = (
        "<script>(function(){var u=new URL("
        + json.dumps(base)
        + ", window.location.origin).href;window.__streamlit={BACKEND_BASE_URL:u,MAIN_PAGE_BASE_URL:u};"
        + ONE_ENTRY_PER_PAGE
        + "})()</script>"
    )
    text = index.read_text(encoding="utf-8")
    if "<head>" not in text:  # a Streamlit whose index.html changed shape: serve it as it is
        return text.encode()
    return text.replace("<head>", "<head>\n    " + line + "\n    " + STILL_PLACEHOLDERS, 1).encode()


class MainPageBase:
    """Answers GET/HEAD of ``<base>`` and ``<base><page key>`` with :func:`index_html`; passes the rest on."""

    def __init__(self, app) -> None:
        self.app = app
        self.base = _base_path()
        self.paths = {self.base.rstrip("/") or "/", *(self.base + k for k in PAGE_KEYS)}
        self.body = index_html(self.base)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and scope["path"] in self.paths:
            headers = [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"cache-control", b"no-cache"),
                (b"content-length", str(len(self.body)).encode()),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else self.body})
            return
        await self.app(scope, receive, send)


def _data_dir() -> Path:
    """``--data-dir`` after ``--`` on the streamlit command line, else $NORMVAR_DATA, else ./data."""
    import argparse
    import sys

    from normvar_core.datadir import resolve_data_dir

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--data-dir", default=None)
    return resolve_data_dir(parser.parse_known_args(sys.argv[1:])[0].data_dir)


def middleware() -> list[Middleware]:
    """With ``$NORMVAR_TOKEN`` set, the token gate (normvar_core/service/gate.py) comes first, so no request
    reaches Streamlit (page, websocket, upload, media, health) without the sign-in cookie. Its cookie is named
    after the port; its sessions are kept in the data directory (``gate_state.sessions_path``)."""
    from streamlit import config

    from normvar_core.service.gate_state import sessions_path

    token = os.environ.get(TOKEN_ENV) or None
    # whose X-Forwarded-For the server (Uvicorn, configured after this script is read) believes: the proxies that
    # $NORMVAR_TRUSTED_PROXIES names, none by default — the gate's sign-in turns key on the socket's peer
    os.environ[FORWARDED_ENV] = trusted_proxies(os.environ.get(TRUSTED_PROXIES_ENV))
    base = _base_path()
    gate = (
        [
            Middleware(
                TokenGate,
                token=token,
                base=base,
                pages=frozenset(base + k for k in PAGE_KEYS),
                port=config.get_option("server.port"),
                sessions=sessions_path(_data_dir()),
            )
        ]
        if token
        else []
    )
    return [*gate, Middleware(MainPageBase)]


app = st.App(os.fspath(APP_SCRIPT), middleware=middleware())
