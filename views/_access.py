"""The dashboard's gate inside the script, and its read-only switch (set by ``normvar up``/``dashboard``:
``normvar_core/service/dashboard_access.py``).

With ``$NORMVAR_TOKEN`` set, signing in happens at the HTTP layer (normvar_core/service/gate.py): no request
reaches Streamlit without a sign-in cookie whose session that gate keeps. This gate asks the server's token gate
again about the session's ``Cookie`` header before the script draws anything (a second lock: a server started
without the middleware signs nobody in): a session without it sees
one line and nothing else: no navigation, no sidebar, no run name. The query is left alone (``?token=`` is the
Token page's token type). ``$NORMVAR_READ_ONLY=1``: no New-run page, no upload, no cancel, no job submission."""

from __future__ import annotations

import os

import streamlit as st

from normvar_core.service.dashboard_access import READ_ONLY_ENV, TOKEN_ENV
from normvar_core.service.gate import active_gate


def read_only() -> bool:
    return os.environ.get(READ_ONLY_ENV, "") not in ("", "0")


def _cookie_header() -> str:
    """The session's raw ``Cookie`` header (read by the gate's lenient parser, not Streamlit's)."""
    try:
        return "; ".join(st.context.headers.get_all("Cookie"))
    except Exception:
        return ""


def gate() -> None:
    """Return when this session may see the dashboard; else say how to sign in and stop the script."""
    expected = os.environ.get(TOKEN_ENV) or None
    if expected is None:
        return
    server_gate = active_gate()
    if server_gate is not None and server_gate.signed_in_header(_cookie_header()):
        return
    st.markdown("### normvar")
    st.warning("This dashboard is shared with a token: reload the page to sign in.", icon=":material/lock:")
    st.stop()


__all__ = ["gate", "read_only"]
