"""Writing a run file and publishing it atomically.

``write_tables(path, record, tables)`` writes ``<dir>/.<name>.tmp-<pid>.duckdb`` — the ``run`` row
plus every table given (Arrow in, one ``CREATE TABLE ... AS`` for the first part of a table and
``INSERT`` for the rest) — CHECKPOINTs, closes, then hands it to ``destination.move_into_place``, which
publishes it under its final name by a hard link (or ``os.replace`` when overwriting): a reader never
sees a half-written run under that name. Nothing is left behind on error.

A signal (Ctrl-C, SIGTERM) during the write: every DuckDB call runs with SIGINT and SIGTERM held
(``errors.interrupts_between_batches``, ``_db``) and the signal is handed to its handler when the call
returns, so DuckDB never sees it (it would cancel the query and raise its own "Query interrupted" in place of
the KeyboardInterrupt); the handler's exception then removes the temp file and reaches the caller, which
keeps the finished pass in its checkpoint. A signal is delivered at the latest just before the publish.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Mapping
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

from normvar_core import destination
from normvar_core.destination import taken
from normvar_core.errors import NormvarError, interrupts_between_batches
from normvar_core.runs.record import RUN_COLUMNS, RunRecord
from normvar_core.runs.tables import TableData
from normvar_core.runs.write_memory import INSERT_BYTES, WRITER_MEMORY


def run_path(path) -> Path:
    path = Path(path)
    return path if path.suffix == ".duckdb" else path.with_name(path.name + ".duckdb")


def temp_path(path: Path) -> Path:
    return path.parent / f".{path.stem}.tmp-{os.getpid()}.duckdb"


def _remove(*paths: Path) -> None:
    for p in paths:
        try:
            p.unlink(missing_ok=True)
        except OSError:
            pass


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as err:
        return err.errno == errno.EPERM
    return True


def remove_stale_temps(folder: Path) -> list[Path]:
    """Remove temp run files (``.<name>.tmp-<pid>.duckdb[.wal]``) and compute locks left by processes that
    are gone (a kill during the write); called by every writer before it writes, and by the worker."""
    from normvar_core.run_lock import remove_stale_locks

    removed = remove_stale_locks(folder)  # and the compute locks of killed processes (``run_lock``)
    try:
        candidates = list(Path(folder).glob(".*.tmp-*"))
    except OSError:
        return removed
    for p in candidates:
        m = re.search(r"\.tmp-(\d+)\.duckdb", p.name)
        if m and int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1))):
            try:
                p.unlink()
                removed.append(p)
            except OSError:
                pass
    return removed


def _run_table(record: RunRecord) -> pa.Table:
    row = record.to_row()
    df = pd.DataFrame([{c: row[c] for c, _ in RUN_COLUMNS}])
    return df


def _inserts(data: TableData):
    """The Arrow tables to insert for ``data``: a table (or a callable returning one, or the parts of
    one) — parts grouped up to INSERT_BYTES each."""
    if callable(data) and not isinstance(data, (pa.Table, pd.DataFrame)):
        data = data()
    if data is None:  # a lazy table with nothing to write
        return
    if isinstance(data, (pa.Table, pd.DataFrame)):
        yield data
        return
    group, size = [], 0
    for part in data:
        if isinstance(part, pd.DataFrame):
            part = pa.Table.from_pandas(part, preserve_index=False)
        group.append(part)
        size += part.nbytes
        if size >= INSERT_BYTES:
            yield pa.concat_tables(group)
            group, size = [], 0
    if group:
        yield pa.concat_tables(group)


def _db(guard, step: str, call, *args):
    """``call(*args)`` (one DuckDB call of the write, named ``step``) with SIGINT and SIGTERM held; a signal
    that came meanwhile goes to its handler when the call has returned (or failed)."""
    guard.hold()
    try:
        return call(*args)
    finally:
        guard.release()


def _append(con: duckdb.DuckDBPyConnection, name: str, data: TableData, created: set, guard) -> None:
    for part in _inserts(data):
        _db(guard, f"register {name}", con.register, "_normvar_src", part)
        try:
            if name in created:
                _db(guard, f"insert {name}", con.execute, f'INSERT INTO "{name}" SELECT * FROM _normvar_src')
            else:
                _db(guard, f"create {name}", con.execute, f'CREATE TABLE "{name}" AS SELECT * FROM _normvar_src')
                created.add(name)
        finally:
            _db(guard, f"unregister {name}", con.unregister, "_normvar_src")


def write_tables(path, record, tables: Mapping[str, TableData], *, overwrite: bool = False, on_table=None) -> Path:
    """Write ``tables`` and the run row to a temp file, then publish it at ``path`` atomically.

    A table may be given lazily (a callable returning its TableData, called when its turn comes), and
    ``record`` may be a callable returning the RunRecord, called after every table is written: the
    caller can finish slow parts (the geometry's spectra and TwoNN) while the others are written.
    ``on_table(done, total, name)`` is called before each table (and the run row) is written."""
    path = run_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(path) and not overwrite:  # a link there is named as one (``taken``), never followed
        raise taken(path)
    remove_stale_temps(path.parent)
    tmp = temp_path(path)
    wal = Path(str(tmp) + ".wal")
    _remove(tmp, wal)
    try:
        with interrupts_between_batches() as guard:
            con = _db(guard, "connect", duckdb.connect, str(tmp))
            try:
                # embeddings barely compress (measured: 251 vs 267 MB) but compressing them costs a third
                # of the write; readers ORDER BY, so insertion order need not be kept
                _db(guard, "settings", con.execute, "SET force_compression='uncompressed'")
                _db(guard, "settings", con.execute, "SET preserve_insertion_order=false")
                # one writer thread: an insert from Arrow gains nothing from more (measured, a 3,000-sentence
                # MiniLM run's 165 MB of tables: 0.97 s with one thread, 1.25-1.38 s with two) and the run's
                # results are computed meanwhile on another core (``pipeline.publish``)
                _db(guard, "settings", con.execute, "SET threads=1")
                _db(guard, "settings", con.execute, f"SET memory_limit='{WRITER_MEMORY >> 20}MB'")
                created: set = set()
                n_tables = len(tables) + 1
                for i, (name, data) in enumerate(tables.items()):
                    if on_table is not None:
                        on_table(i, n_tables, name)
                    _append(con, name, data, created, guard)
                if on_table is not None:
                    on_table(n_tables - 1, n_tables, "run")
                if callable(record):
                    record = record()
                record.name = path.stem
                cols = ", ".join(f"{c} {t}" for c, t in RUN_COLUMNS)
                _db(guard, "create run", con.execute, f"CREATE TABLE run ({cols})")
                _db(guard, "register run", con.register, "_normvar_src", _run_table(record))
                _db(guard, "insert run", con.execute, "INSERT INTO run SELECT * FROM _normvar_src")
                _db(guard, "unregister run", con.unregister, "_normvar_src")
                _db(guard, "checkpoint", con.execute, "CHECKPOINT")
            finally:
                _db(guard, "close", con.close)
            _db(guard, "publish", destination.move_into_place, tmp, path, overwrite)
    except NormvarError:
        _remove(tmp, wal)
        raise
    except (OSError, duckdb.Error) as exc:  # disk full, file too large, folder gone, I/O error
        _remove(tmp, wal)
        raise write_failed(path, exc) from None
    except BaseException:
        _remove(tmp, wal)
        raise
    return path


def write_failed(path: Path, exc: BaseException) -> NormvarError:
    """One line for a write that failed part-way (nothing was published, the temp file is gone)."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).strip().splitlines()[0]
    full = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
    full = full or any(w in reason.lower() for w in ("no space", "file too large", "disk quota"))
    fix = (
        f"free space on {path.parent} (or use another --data-dir / --out) and run it again"
        if full
        else f"check that {path.parent} is writable and run it again"
    )
    return NormvarError(f"could not write the run file {path.name}: {reason[:200]}; nothing was published", fix=fix)


__all__ = ["write_failed", "write_tables", "run_path", "temp_path", "remove_stale_temps", "pid_alive"]
