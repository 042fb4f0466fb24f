"""One compute of a run name at a time: ``with computing(run_path, holder): ...`` (``computing_all``: a compute
locks its run file, its run name in the data directory and its checkpoint, so two computes never share one).

The lock is ``.<name>.duckdb.lock`` beside the run's file: an ``flock`` held for the whole compute and,
inside, the holder's pid and what it is (``normvar compute``, ``job <id>``). A second compute of the
same name (another ``normvar compute``, a worker's job, a ``submit``) is refused at once with one line
naming the holder (``holder_of``), instead of running its whole pass and failing at publish. The OS
drops the flock when its process dies, so a lock left by a killed process is stale and ignored (and
removed by ``remove_stale_locks``); the holder removes its file when it ends. The lock file is opened
with ``destination.open_regular`` (``O_NOFOLLOW``, ``O_NONBLOCK``, an ``fstat`` check): a link, a folder or a
FIFO in its place is refused in one line, and whatever a link points to is never opened.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import json
import os
from pathlib import Path

from normvar_core.destination import open_regular
from normvar_core.errors import NormvarError

SUFFIX = ".lock"
JOB = "job "  # what a worker's job holder begins with (``as_holder``)
HOLDER: contextvars.ContextVar[str] = contextvars.ContextVar("normvar_run_holder", default="normvar compute")
"""What holds the locks this context takes: a worker sets ``job <id>`` around its job (``as_holder``)."""


@contextlib.contextmanager
def as_holder(what: str):
    token = HOLDER.set(what)
    try:
        yield
    finally:
        HOLDER.reset(token)


def lock_path(run_path: Path) -> Path:
    run_path = Path(run_path)
    return run_path.parent / f".{run_path.name}{SUFFIX}"


def holder_of(run_path: Path) -> dict | None:
    """{"pid", "holder"} of the live compute of ``run_path``, or None (no lock, or a stale one)."""
    path = lock_path(run_path)
    try:
        fd = open_regular(path, os.O_RDONLY, what="the lock file")
    except (OSError, NormvarError):  # none, or not a lock (``computing`` refuses it in one line)
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # held: read who holds it
            try:
                return json.loads(os.pread(fd, 4096, 0).decode() or "{}") or {"pid": None, "holder": "a compute"}
            except ValueError:
                return {"pid": None, "holder": "a compute"}
        return None
    finally:
        os.close(fd)


def stale_holder(run_path: Path) -> dict | None:
    """{"pid", "holder"} written in the lock of ``run_path`` by a compute that no longer holds it (killed: SIGKILL,
    the kernel's OOM killer, a lost machine), or None (no lock, or a live one). Read before a new compute takes
    the lock, so that its start says what happened to the last one."""
    path = lock_path(run_path)
    try:
        fd = open_regular(path, os.O_RDONLY, what="the lock file")
    except (OSError, NormvarError):
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # a live compute holds it
            return None
        try:
            return json.loads(os.pread(fd, 4096, 0).decode() or "{}") or {"pid": None, "holder": "a compute"}
        except ValueError:
            return {"pid": None, "holder": "a compute"}
    finally:
        os.close(fd)


def busy_error(run_path: Path, info: dict) -> NormvarError:
    name = Path(run_path).stem
    who = info.get("holder") or "a compute"
    pid = f" (pid {info['pid']})" if info.get("pid") else ""
    return NormvarError(
        f"run {name!r} is being computed now by {who}{pid}",
        fix="wait for it to finish, stop it, or choose another --name",
    )


def check_free(run_path: Path, *, unless_job: bool = False) -> None:
    """Refuse (one line naming the holder) when ``run_path`` is being computed now; ``unless_job``: not when
    the holder is a worker's job (a job queued behind it runs after it, in the same worker)."""
    info = holder_of(run_path)
    if info is not None and not (unless_job and str(info.get("holder", "")).startswith(JOB)):
        raise busy_error(run_path, info)


@contextlib.contextmanager
def computing(run_path: Path, holder: str | None = None):
    """Hold the lock of ``run_path`` for the block; a NormvarError naming the holder when it is taken."""
    path = lock_path(run_path)
    holder = holder or HOLDER.get()
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = open_regular(path, os.O_RDWR | os.O_CREAT, what="the lock file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise busy_error(run_path, holder_of(run_path) or {}) from None
        try:
            same = os.fstat(fd).st_ino == os.lstat(path).st_ino
        except FileNotFoundError:  # its last holder removed it between our open and our lock
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "holder": holder}).encode(), 0)
        yield path
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)


@contextlib.contextmanager
def computing_all(paths, holder: str | None = None):
    """``computing`` of every path in ``paths`` (a compute's run file, its run name in the data directory and its
    checkpoint: ``RunTarget.locked``), taken in order and released together; the first one taken by another
    compute refuses this one in one line naming that compute."""
    with contextlib.ExitStack() as stack:
        for p in paths:
            stack.enter_context(computing(p, holder))
        yield


def remove_stale_locks(folder: Path) -> list[Path]:
    """Remove the lock files in ``folder`` that no live process holds (a compute killed with SIGKILL)."""
    removed: list = []
    try:
        candidates = list(Path(folder).glob(f".*.duckdb{SUFFIX}"))
    except OSError:
        return removed
    return [p for p in candidates if remove_if_stale(p)]


def remove_if_stale(p: Path) -> bool:
    """Remove the lock file ``p`` when no live process holds it; a link, a hard link or anything but a regular
    file under the name is not a lock of ours and is left alone. True when it was removed."""
    try:
        fd = open_regular(p, os.O_RDWR, what="the lock file")
    except (OSError, NormvarError):  # gone, or not a lock of ours: left alone
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino == os.lstat(p).st_ino:
            p.unlink()
            return True
    except OSError:  # held by a live compute, or gone meanwhile
        pass
    finally:
        os.close(fd)
    return False


__all__ = [
    "computing",
    "computing_all",
    "as_holder",
    "HOLDER",
    "JOB",
    "check_free",
    "holder_of",
    "busy_error",
    "lock_path",
    "remove_stale_locks",
    "stale_holder",
    "remove_if_stale",
]
