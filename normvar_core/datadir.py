"""The data directory: one root for runs, uploaded corpora, the job queue and checkpoints.

Resolution order: an explicit path (``--data-dir``), the ``NORMVAR_DATA`` environment
variable, then ``./data``. Two roots never share any state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from normvar_core.errors import NormvarError

PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # the checkout (site-packages once installed)
_PACKAGE = Path(__file__).resolve().parent
# what ships inside the installed package (setup.py maps these repository folders into the wheel)
_SHIPPED = {"dashboard": "", "corpora": "data/corpora"}


def shipped(folder: str, name: str) -> Path:
    """A file the package ships: ``normvar_core/<folder>/<name>`` when installed from a wheel or
    sdist, else the checkout's own copy (``dashboard`` = the repository root with app.py and views/,
    ``corpora`` = data/corpora). The installed copy wins where both exist."""
    installed = _PACKAGE / folder / name
    if installed.exists():
        return installed
    return PACKAGE_ROOT / _SHIPPED[folder] / name


DEFAULT_CORPUS = shipped("corpora", "novels_en.txt.gz")


def resolve_data_dir(path: str | os.PathLike | None = None) -> Path:
    """Return the data-directory root: ``path``, else $NORMVAR_DATA, else ./data."""
    if path:
        return Path(path).expanduser().resolve()
    env = os.environ.get("NORMVAR_DATA")
    if env:
        return Path(env).expanduser().resolve()
    return Path("data").resolve()


@dataclass(frozen=True)
class DataDir:
    """Paths under one data directory; ``DataDir.at(None)`` follows ``resolve_data_dir``."""

    root: Path

    @classmethod
    def at(cls, path: str | os.PathLike | DataDir | None = None) -> DataDir:
        """The data directory of ``path``: a ``DataDir`` as it is, else ``resolve_data_dir(path)`` (a path,
        or None for $NORMVAR_DATA / ./data) — the one place a "path or DataDir" argument is read."""
        return path if isinstance(path, DataDir) else cls(resolve_data_dir(path))

    def _sub(self, name: str) -> Path:
        p = self.root / name
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file in the way, a read-only or full disk
            raise NormvarError(
                f"cannot use the folder {p} of the data directory ({exc.strerror or exc})",
                fix="choose a writable --data-dir (or $NORMVAR_DATA), or move what is in the way",
            ) from None
        return p

    @property
    def runs(self) -> Path:
        return self._sub("runs")

    @property
    def corpora(self) -> Path:
        return self._sub("corpora")

    @property
    def queue(self) -> Path:
        return self._sub("queue")

    @property
    def checkpoints(self) -> Path:
        return self._sub("checkpoints")

    @property
    def cache(self) -> Path:
        return self._sub("cache")

    @property
    def reports(self) -> Path:
        """Reports built by the worker (``<job id>.<format>``)."""
        return self._sub("reports")

    def run_path(self, name: str) -> Path:
        return self.runs / f"{name}.duckdb"

    def published_runs(self) -> list[Path]:
        """The names ``*.duckdb`` in runs/, newest first (temporary files are never listed). Read with ``lstat``
        only: a link, FIFO or folder under such a name is listed as itself, never followed or opened (the
        reader tells it apart: ``destination.is_regular_entry``)."""
        files = []
        for p in self.runs.glob("*.duckdb"):
            if not p.name.startswith("."):
                try:
                    files.append((os.lstat(p).st_mtime, p))
                except OSError:  # removed meanwhile
                    continue
        return [p for _, p in sorted(files, key=lambda t: t[0], reverse=True)]
