"""The dashboard's gate and its read-only switch (set by ``normvar up``/``dashboard``:
``normvar_core/service/dashboard_access.py``).

With ``$NORMVAR_TOKEN`` set in the server's environment every session must give that token, loopback ones
included: as ``?token=`` in its first URL (Jupyter's link) or in the sign-in field. Until then the page
shows the sign-in field and nothing else: no navigation, no sidebar, no run name. The token is compared
with ``hmac.compare_digest``; the right one is kept in the session (``st.session_state``) and taken out of
the URL, so it is not in the links the pages write (shared links carry the view, never the token).
``$NORMVAR_READ_ONLY=1``: no New-run page, no upload, no cancel, no job submission anywhere."""
from __future__ import annotations

import hmac
import os
import time

import streamlit as st

from normvar_core.service.dashboard_access import READ_ONLY_ENV, TOKEN_ENV

KEY = "_normvar_token"


def read_only() -> bool:
    return os.environ.get(READ_ONLY_ENV, "") not in ("", "0")


def _expected() -> str | None:
    return os.environ.get(TOKEN_ENV) or None


def _right(given: object, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def _refuse() -> None:
    """A wrong token costs a second (guessing a short token through the page is slow), then says so."""
    time.sleep(1.0)
    st.error("That is not this dashboard's token.", icon=":material/lock:")


def _sign_in(expected: str, refused: bool) -> None:
    st.markdown("### normvar")
    st.write("This dashboard is shared with a token. Give the token it was started with "
             "(`normvar up` printed it, or ask whoever started it).")
    with st.form("sign_in", border=True):
        given = st.text_input("Token", type="password", key="w_signin_token")
        go = st.form_submit_button("Sign in", type="primary", icon=":material/login:")
    if go:
        if _right(given, expected):
            st.session_state[KEY] = given
            st.session_state.pop("w_signin_token", None)
            st.rerun()
        refused = True
    if refused:
        _refuse()


def gate() -> None:
    """Return when this session may see the dashboard; else draw the sign-in field and stop the script."""
    expected = _expected()
    if expected is None:
        return
    refused = False
    if "token" in st.query_params:
        given = st.query_params.get("token")
        del st.query_params["token"]
        if _right(given, expected):
            st.session_state[KEY] = given
        else:
            refused = True
    if _right(st.session_state.get(KEY), expected):
        return
    _sign_in(expected, refused)
    st.stop()


__all__ = ["gate", "read_only"]
