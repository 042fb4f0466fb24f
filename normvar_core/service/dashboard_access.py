"""Who may open the dashboard that ``normvar up`` / ``normvar dashboard`` serve, and what its server says.

Access (``resolve_access``): on a loopback address (localhost, 127.0.0.1, ::1) no token is needed. Beyond
loopback (``--host 0.0.0.0``, a LAN address, a host name) the dashboard needs a token: ``--token-file FILE``,
``$NORMVAR_TOKEN``, ``--token TOKEN`` (shown to every user by ``ps``: a warning says so), or ``--token`` alone for
``$NORMVAR_TOKEN`` if set, else a generated one (printed in the URL, as Jupyter does); without
one the command is refused in one line unless ``--no-token`` is given (then a warning is printed). Once a
token is set, every connection needs it, loopback ones included: the token gate (``service/gate.py``) checks
every request before Streamlit handles it, and ``views/_access.py`` checks its cookie again before the navigation. The
token reaches the Streamlit process in its environment (``NORMVAR_TOKEN``), never on
its command line (``ps`` shows argv to every user). Who a client is (the sign-in turns): the socket's peer;
``X-Forwarded-For`` only from the proxies ``$NORMVAR_TRUSTED_PROXIES`` names (``trusted_proxies``; none by
default). ``--read-only`` (``NORMVAR_READ_ONLY=1``) serves the
runs without the New-run page, uploads, cancel or any other job submission.

Output (``relay``): Streamlit's own lines ("You can now view your Streamlit app…", the Local/Network URLs,
"Did not auto detect external IP…", Uvicorn's start line) are dropped, since ``normvar`` prints its own URL line;
anything else the server writes is passed on as ``normvar: dashboard: <line>`` (its timestamp removed)."""

from __future__ import annotations

import ipaddress
import re
import secrets
import sys
import threading
from dataclasses import dataclass
from typing import IO

from normvar_core.errors import NormvarError

TOKEN_ENV = "NORMVAR_TOKEN"
READ_ONLY_ENV = "NORMVAR_READ_ONLY"
TRUSTED_PROXIES_ENV = "NORMVAR_TRUSTED_PROXIES"
FORWARDED_ENV = "FORWARDED_ALLOW_IPS"  # what the server (Uvicorn) reads: whose X-Forwarded-For it believes
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def is_loopback(host: str) -> bool:
    """True when ``host`` only listens on this machine (a loopback name or address)."""
    h = str(host or "").strip().strip("[]").lower()
    if h in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False  # a host name other than localhost, or '' (every address)


@dataclass(frozen=True)
class Access:
    token: str | None  # None: no token (a loopback address, or --no-token)
    generated: bool  # made here (printed in the URL)
    read_only: bool


def token_option(token: str | None, token_file: str | None) -> str | None:
    """The ``--token`` value, or the first line of ``--token-file`` (a regular file; one line when it is not)."""
    if token_file is None:
        return token
    if token is not None:
        raise NormvarError("--token and --token-file contradict each other", fix="give only one of them")
    import os
    import stat

    try:
        fd = os.open(token_file, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise NormvarError(
            f"cannot read --token-file {token_file}: {err.strerror or err}",
            fix="give a file that holds the token on its first line",
        ) from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NormvarError(
                f"--token-file {token_file} is not a regular file",
                fix="give a file that holds the token on its first line",
            )
        first = fh.read(4096).decode("utf-8", errors="replace").splitlines()
    text = first[0].strip() if first else ""
    if not text:
        raise NormvarError(
            f"--token-file {token_file} holds no token on its first line",
            fix="write the token on the file's first line",
        )
    return check_token(text)


def check_token(token: str) -> str:
    if not token or any(ch.isspace() or not ch.isprintable() for ch in token):
        raise NormvarError(
            "the dashboard token is empty or holds spaces or control characters",
            fix="give --token a word of letters, digits and punctuation, or --token alone to generate one",
        )
    return token


def resolve_access(host: str, token: str | None, no_token: bool, read_only: bool, env_token: str | None) -> Access:
    """The access rule of the module docstring; a NormvarError (one line, exit 2) when it refuses.
    ``token``: the --token value ('' for --token alone: $NORMVAR_TOKEN, else a generated one), None when not given."""
    if no_token and (token is not None or env_token):
        given = "--token" if token is not None else f"${TOKEN_ENV}"
        raise NormvarError(
            f"--no-token and {given} contradict each other",
            fix=f"drop one of them (unset {TOKEN_ENV} to serve without a token)",
        )
    if token == "" and not env_token:
        return Access(secrets.token_urlsafe(24), True, read_only)
    chosen = token or env_token or None
    if chosen is not None:
        return Access(check_token(chosen), False, read_only)
    if not is_loopback(host) and not no_token:
        raise NormvarError(
            f"--host {host} serves the dashboard beyond this machine, and it has no token",
            fix=f"add --token (a generated one, printed in the URL), --token TOKEN or ${TOKEN_ENV}; "
            "or --no-token to serve it to anyone who can reach the port",
        )
    return Access(None, False, read_only)


def warning_lines(host: str, port: int, access: Access, token_in_argv: bool = False) -> list[str]:
    """What ``up``/``dashboard`` print about access before serving."""
    lines = []
    if token_in_argv:
        lines.append(
            "normvar: warning: --token TOKEN shows the token to every user of this machine (ps); "
            f"use --token-file FILE or ${TOKEN_ENV} instead"
        )
    if access.token is None and not is_loopback(host):
        lines.append(
            f"normvar: warning: --no-token: anyone who can reach port {port} of this machine sees every run"
            + ("" if access.read_only else ", uploads corpora, submits runs and cancels jobs")
        )
    return lines


def url_line(url: str, access: Access) -> str:
    """The URL ``normvar`` prints: with ``?auth=`` for a generated token (the only place it is shown)."""
    from urllib.parse import quote

    if access.token is None:
        return url
    if access.generated:
        return f"{url}/?auth={quote(access.token, safe='')}"
    return f"{url}  (sign in with your token, or open {url}/?auth=…)"


def trusted_proxies(text: str | None) -> str:
    """``$NORMVAR_TRUSTED_PROXIES`` as the server's ``FORWARDED_ALLOW_IPS``: the reverse proxies whose
    ``X-Forwarded-For`` names the client (comma-separated addresses or networks, e.g. ``127.0.0.1`` or
    ``10.0.0.0/24``); '' (unset, the default): none, every client is the socket's peer. Anything else (a name, a
    ``*``) is one NormvarError line naming the variable."""
    parts = [p.strip() for p in str(text or "").split(",") if p.strip()]
    out = []
    for part in parts:
        try:
            out.append(
                str(ipaddress.ip_network(part, strict=False)) if "/" in part else str(ipaddress.ip_address(part))
            )
        except ValueError:
            raise NormvarError(
                f"{TRUSTED_PROXIES_ENV}={str(text)[:80]} names {part[:40]!r}, which is not an address or a network",
                fix=f"set {TRUSTED_PROXIES_ENV} to your reverse proxy's addresses (e.g. 127.0.0.1 or 10.0.0.0/24), "
                "or unset it",
            ) from None
    return ",".join(out)


def child_env(env: dict[str, str], access: Access) -> dict[str, str]:
    """The Streamlit process's environment: the token (never in argv), the read-only switch, and whose
    forwarded headers the server believes (``trusted_proxies``: none unless ``$NORMVAR_TRUSTED_PROXIES`` names
    them; an inherited ``FORWARDED_ALLOW_IPS`` is replaced, so Uvicorn's default — trust 127.0.0.1 — never
    applies)."""
    out = dict(env)
    out.pop(TOKEN_ENV, None)
    out.pop(READ_ONLY_ENV, None)
    out[FORWARDED_ENV] = trusted_proxies(env.get(TRUSTED_PROXIES_ENV))
    if access.token is not None:
        out[TOKEN_ENV] = access.token
    if access.read_only:
        out[READ_ONLY_ENV] = "1"
    return out


_DROP = re.compile(
    r"^(You can now view your Streamlit app|(Local|Network|External) URL:|URL: http|Stopping\.\.\.$"
    r"|Did not auto detect external IP|Please go to https://docs\.streamlit\.io"
    r"|Uvicorn server started|Waiting for file changes)"
)
_STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+")


def rephrase(line: str) -> str | None:
    """A line of Streamlit's output as ``normvar`` shows it: None for its start-up chatter."""
    text = _STAMP.sub("", line.rstrip("\r\n")).strip()
    if not text or _DROP.match(text):
        return None
    return f"normvar: dashboard: {text}"


def relay(stream: IO[bytes], out: IO[str] | None = None) -> threading.Thread:
    """Pass the server's output through ``rephrase`` to ``out`` (stderr) in a daemon thread."""

    def pump() -> None:
        for raw in iter(stream.readline, b""):
            shown = rephrase(raw.decode("utf-8", errors="replace"))
            if shown is not None:
                print(shown, file=out or sys.stderr, flush=True)
        stream.close()

    t = threading.Thread(target=pump, name="dashboard-output", daemon=True)
    t.start()
    return t


__all__ = [
    "READ_ONLY_ENV",
    "TOKEN_ENV",
    "TRUSTED_PROXIES_ENV",
    "Access",
    "child_env",
    "is_loopback",
    "relay",
    "rephrase",
    "resolve_access",
    "token_option",
    "trusted_proxies",
    "url_line",
    "warning_lines",
]
