"""The one rule for every file normvar writes, replaces or deletes (run files, checkpoints, the job table,
exports, reports, caches, locks and temp files), in one module:

* **no link is followed**: a symbolic link in a destination's place is refused in one line (its target is
  never written, replaced, opened or deleted); a file normvar keeps for itself (a lock, a checkpoint, the job
  table) is opened only when it has one name: a hard link there is refused in one line too (``hard_linked``);
* **no FIFO, device, socket or folder is opened** where a file is expected (``O_NOFOLLOW | O_NONBLOCK`` and an
  ``fstat``, or an ``lstat`` before a library opens the path);
* **an existing file is replaced only when it is a regular file** (and, where normvar can tell, one normvar
  made: a checkpoint, an export folder with its manifest);
* **a deletion removes the path that was named** (``remove_named``), never what it points to.

    target = resolve_destination(path, what="--out")     # checks only; raises NormvarError (exit 2)
    write_atomic(target, lambda tmp: fig.write_html(tmp))  # temp file beside target, then os.replace

``resolve_destination(path)`` returns the path that will really be written (``~`` expanded, made absolute,
links not resolved):

* an existing regular file: itself (it will be replaced, atomically);
* a missing name in an existing, writable folder: itself;
* anything else is refused with one line naming the fix: a symbolic link (to anything, or dangling), a
  folder, a character or block device (``/dev/null``, ``/dev/full``), a FIFO, a socket; a missing parent
  folder; a folder normvar cannot write in (tried for real: ``os.access`` says yes to root even on read-only
  mounts).

``write_atomic(target, write)`` calls ``write(tmp)`` with a temp path in the target's folder
(``.<name>.tmp-<pid>``; same file system, so the rename is atomic), then checks again (``lstat``) that the
target is not something other than a regular file (a link, device or FIFO created meanwhile is refused,
never replaced) and ``os.replace``s the temp file onto it. A replaced file keeps its permission
bits; a new one gets 0o666 minus the umask. The temp file is removed on any error, KeyboardInterrupt
included.

Run files follow the same rules from the other side, so the check and the move into place live here together:

    check_destination(out_path, overwrite)   # before any expensive work (the name, the folder)
    move_into_place(tmp, out_path, overwrite)   # the finished temp run file (``runs/writer``) under its name

``move_into_place`` hard-links the temp file to the run's name (refused if the name exists: two writers
never clobber each other), or ``os.replace``s it when overwriting a regular file. Base layer: no torch,
no numpy.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from normvar_core.errors import NormvarError

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """'a regular file', 'a folder', 'a character device', ... for an ``st_mode``."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _refuse_kind(shown: str, target: Path, mode: int, what: str) -> NormvarError:
    """One line for ``shown`` (the path as given; ``target``: that path made absolute, never a link's target — a
    link is refused as a link by ``_refuse_entry``) holding a folder, a device, a FIFO or a socket."""
    via = f" ({target})" if str(target) != shown else ""
    fix = (
        "give a file name inside it, e.g. " + f"{what} {Path(shown) / 'out.html'}"
        if stat.S_ISDIR(mode)
        else f"give {what} a regular file name (normvar never writes over {kind_of(mode)})"
    )
    return NormvarError(f"{what} {shown}{via} is {kind_of(mode)}", fix=fix)


SAFE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""Every file normvar opens for its own use: never through a symbolic link (``O_NOFOLLOW``) and never stuck
on a FIFO (``O_NONBLOCK``); what was opened is then checked with ``fstat`` to be a regular file."""


def _what_is(path: Path) -> str:
    try:
        st = os.lstat(path)
    except OSError:
        return "not a regular file"
    return "a symbolic link" if stat.S_ISLNK(st.st_mode) else kind_of(st.st_mode)


def not_regular(path: Path, what: str) -> NormvarError:
    """One line for a file normvar keeps (a lock, a temp file) whose name holds something else."""
    return NormvarError(
        f"{what} {path} is {_what_is(path)}",
        fix="remove it (normvar never writes through a link or into a folder, FIFO or device)",
    )


def hard_linked(path, what: str, links: int, fix: str | None = None) -> NormvarError:
    """One line for a file of normvar's (a lock, a checkpoint, the job table) whose name is one of several names
    of one file (a hard link): writing it would change the file under its other names too."""
    return NormvarError(
        f"{what} {path} is a hard link (one of {links} names of one file); normvar never writes, locks or "
        "replaces a file that another name shares",
        fix=fix or f"move it aside (mv {path} {path}.aside): normvar makes its own",
    )


def open_regular(path, flags: int, *, what: str = "the file", mode: int = 0o644) -> int:
    """``os.open(path, flags)`` that refuses, in one NormvarError line, a symbolic link, a hard link (a file with
    another name too: ``hard_linked``), a folder, a FIFO, a device or a socket in the file's place (the target of
    a link is never touched, the other names of a hard link never written). The descriptor is blocking again
    once checked. FileNotFoundError passes through (a caller may treat it as "none")."""
    path = Path(path)
    try:
        fd = os.open(path, flags | SAFE_FLAGS, mode)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EMLINK):
            raise not_regular(path, what) from None
        raise
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise not_regular(path, what)
    if st.st_nlink > 1:
        os.close(fd)
        raise hard_linked(path, what, st.st_nlink)
    os.set_blocking(fd, True)
    return fd


def create_temp(path, *, what: str = "the temp file") -> Path:
    """Make ``path`` a new, empty regular file of this process (0o600), first removing whatever a
    regular file or a link left under the name (a link is removed, its target untouched); a folder
    or anything else there is refused in one line."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise not_regular(path, what)
        os.unlink(path)
    os.close(open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, what=what, mode=0o600))
    return path


def check_regular_input(path, what: str, fix: str) -> Path:
    """``path`` (links followed) if it is a regular file; one NormvarError line for a folder, a FIFO, a device
    or a socket, refused before anything reads it (a FIFO with no writer would block the read forever)."""
    try:
        st = os.stat(path)
    except OSError:
        return Path(path)  # a missing or unreadable file: the reader's own line says so
    if not stat.S_ISREG(st.st_mode):
        raise NormvarError(f"{what} {path} is {kind_of(st.st_mode)}, not a regular file", fix=fix)
    return Path(path)


def probe_writable(folder: Path, what: str = "--out") -> None:
    """Create and remove a file in ``folder``; one NormvarError line if that fails."""
    probe = folder / f".normvar-write-probe-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise NormvarError(
            f"cannot write in the folder of {what}: {folder} ({exc.strerror or exc})",
            fix=f"choose a writable folder for {what}",
        ) from None


def lstat_or_none(path) -> os.stat_result | None:
    """``os.lstat(path)`` (the entry itself, a link not followed), or None when nothing has the name."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def is_regular_entry(path) -> bool:
    """Whether the name ``path`` holds a regular file itself (a link to one is not: nothing is followed)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def refuse_entry(path, what: str, *, fix: str | None = None) -> None:
    """One NormvarError line when the name ``path`` holds anything but a regular file (a symbolic link, a
    folder, a FIFO, a device, a socket); nothing there, or a regular file: returns. Nothing is opened."""
    st = lstat_or_none(path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise _refuse_entry(str(path), Path(path), st.st_mode, what, fix)


def _refuse_entry(shown: str, p: Path, mode: int, what: str, fix: str | None = None) -> NormvarError:
    if stat.S_ISLNK(mode):
        try:
            to = f" to {os.readlink(p)}"
        except OSError:
            to = ""
        return NormvarError(
            f"{what} {shown} is a symbolic link{to}; normvar never writes, replaces or deletes through a link",
            fix=fix or f"give {what} the real path, or remove the link",
        )
    return (
        _refuse_kind(shown, p, mode, what)
        if fix is None
        else NormvarError(f"{what} {shown} is {kind_of(mode)}, not a regular file", fix=fix)
    )


def _named(shown: str, what: str, noun: str) -> Path:
    """``shown`` with ``~`` expanded, made absolute, links NOT resolved; one line for an empty path."""
    if not shown.strip():
        raise NormvarError(f"{what} is empty", fix=f"give {what} {noun}")
    return Path(os.path.abspath(os.path.expanduser(shown)))


def _stat_named(p: Path, shown: str, what: str) -> os.stat_result | None:
    try:
        return lstat_or_none(p)
    except OSError as exc:
        raise NormvarError(f"cannot use {what} {shown}: {exc.strerror or exc}", fix=f"choose another {what}") from None


def resolve_destination(path, *, what: str = "--out", probe: bool = True, make_parents: bool = False) -> Path:
    """The regular file that writing ``path`` will create or replace (see the module docstring);
    NormvarError for anything else, a symbolic link included. ``what`` names the option in the message;
    ``probe=False`` skips the try-a-write check of the folder; ``make_parents=True`` creates a missing folder
    (mkdir -p, for checkpoints) instead of refusing."""
    shown = str(path)
    target = _named(shown, what, "a file name")
    st = _stat_named(target, shown, what)
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise _refuse_entry(shown, target, st.st_mode, what)
    else:
        folder = target.parent
        if make_parents and not os.path.lexists(folder):
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise NormvarError(
                    f"cannot create the folder of {what}: {folder} ({exc.strerror or exc})",
                    fix=f"choose another {what}",
                ) from None
        if not folder.exists():
            raise NormvarError(
                f"the folder of {what} {shown} does not exist: {folder}",
                fix=f"create it (mkdir -p {folder}) or choose another {what}",
            )
        if not folder.is_dir():
            raise NormvarError(f"the folder of {what} is not a folder: {folder}", fix=f"choose another {what}")
    if probe:
        probe_writable(target.parent, what)
    return target


def resolve_folder_destination(path, *, what: str = "--out") -> Path:
    """The folder that an export to ``path`` will create or replace: the same rule as
    ``resolve_destination`` for a folder. An existing folder or a missing name in an existing, writable
    folder is used; anything else — a symbolic link (to a folder too), a regular file, a device, a FIFO, a
    socket, a missing parent — is refused with one line."""
    shown = str(path)
    target = _named(shown, what, "a folder name")
    st = _stat_named(target, shown, what)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise _refuse_entry(shown, target, st.st_mode, what)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise NormvarError(
            f"{what} {shown} is {kind_of(st.st_mode)}, not a folder", fix=f"choose a new or empty folder for {what}"
        )
    folder = target.parent
    if not folder.is_dir():
        raise NormvarError(
            f"the folder of {what} {target} does not exist: {folder}",
            fix=f"create it (mkdir -p {folder}) or choose another {what}",
        )
    probe_writable(folder, what)
    return target


def remove_named(path) -> bool:
    """Delete the entry ``path`` itself — a regular file, or a link (the link, never its target); a folder,
    FIFO, device or socket under the name is left alone. True when something was removed."""
    st = lstat_or_none(path)
    if st is None or not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        return False
    try:
        os.unlink(path)  # unlink(2) removes the name: a link's target is never touched
    except FileNotFoundError:
        return False
    return True


def write_atomic(target, write: Callable[[Path], Any], *, what: str = "--out") -> Path:
    """``write(tmp)`` into a temp file beside ``target`` (a path from ``resolve_destination``), then
    ``os.replace`` it onto ``target``; returns ``target``. Nothing but a complete file ever carries
    the name; the temp file is removed on any failure."""
    target = Path(target)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    create_temp(tmp, what=f"the temp file of {what}")
    try:
        write(tmp)
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):  # a link, FIFO, ... planted since resolve_destination
            raise _refuse_entry(str(target), target, st.st_mode, what)
        mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    finally:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
    return target


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def taken(path: Path) -> NormvarError:
    """The error for a run name that already holds a run; one that holds a link, a folder, a FIFO, ... is named as
    what it is (``not_a_run_file``), never as a run that "already exists"."""
    return not_a_run_file(path) or NormvarError(
        f"run {path.stem!r} already exists: {path}", fix="choose another --name or pass --overwrite"
    )


def not_a_run_file(path: Path) -> NormvarError | None:
    """The error for a run name taken by something that is not a regular file (a link, a folder, a
    device, a FIFO): normvar publishes runs by rename and never replaces or follows those."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        return None
    kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else kind_of(st.st_mode)
    return NormvarError(f"the run file {path} is {kind}, not a run", fix="remove it or choose another --name / --out")


def check_destination(out_path: Path, overwrite: bool) -> None:
    """Before any expensive work: the name is free (or --overwrite, over a regular file only) and the
    folder is writable."""
    if (err := not_a_run_file(out_path)) is not None:
        raise err
    if os.path.lexists(out_path) and not overwrite:
        raise taken(out_path)
    folder = out_path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (OSError, FileExistsError) as exc:
        raise NormvarError(
            f"cannot create the run folder {folder}: {exc.strerror or exc}", fix="choose a writable --data-dir or --out"
        ) from None
    probe = folder / f".normvar-write-probe-{os.getpid()}"
    try:  # os.access says yes to root even for read-only or immutable folders: really try
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise NormvarError(
            f"the run folder {folder} is not writable ({exc.strerror or exc})",
            fix="choose a writable --data-dir or --out",
        ) from None


# what link(2) says on a file system without hard links (FAT, some network and FUSE mounts)
NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}


def move_into_place(tmp: Path, path: Path, overwrite: bool) -> None:
    """The complete file ``tmp`` moved atomically into place as ``path``: rename when overwriting (a regular file
    only); otherwise hard-link (fails if the name exists, so two writers never clobber each other), then
    drop the temp name. A file system without hard links gets check-then-rename."""
    if overwrite:
        if (err := not_a_run_file(path)) is not None:
            raise err
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise taken(path) from None
    except OSError as exc:
        if exc.errno not in NO_HARD_LINKS:
            raise
        if os.path.lexists(path):
            raise taken(path) from None
        os.replace(tmp, path)
        return
    tmp.unlink()


__all__ = [
    "lstat_or_none",
    "is_regular_entry",
    "refuse_entry",
    "remove_named",
    "resolve_folder_destination",
    "check_regular_input",
    "SAFE_FLAGS",
    "open_regular",
    "hard_linked",
    "create_temp",
    "not_regular",
    "resolve_destination",
    "write_atomic",
    "probe_writable",
    "kind_of",
    "taken",
    "not_a_run_file",
    "check_destination",
    "move_into_place",
    "NO_HARD_LINKS",
]
