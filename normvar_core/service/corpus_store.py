"""Uploaded corpora: stored as ``corpora/<sha256><ext>`` (the upload's own name is never a path; it is
kept as a label in ``corpora/<sha256><ext>.name``, with a short hash only when another upload has the
same name),
size-capped — for a compressed format also what it expands to (a .txt.gz checked while
decompressing in a stream, a .parquet from its footer's uncompressed sizes). Every format the
reader handles can be uploaded: the list is ``corpus_formats.CORPUS_SUFFIXES``."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
import zlib
from pathlib import Path

from normvar_core.corpus_formats import CORPUS_SUFFIXES, LABEL_SUFFIX, corpus_stem, corpus_suffix
from normvar_core.datadir import DataDir
from normvar_core.destination import create_temp
from normvar_core.errors import NormvarError
from normvar_core.numbers import UPLOAD_MB, Number, env_number

CORPUS_EXTENSIONS = CORPUS_SUFFIXES
"""What an upload may be: exactly what the reader reads (one list, in ``corpus_formats``)."""
DEFAULT_MAX_UPLOAD_MB = 200.0


def max_upload_bytes(max_mb: float | None = None) -> int:
    """The upload size cap: ``max_mb``, else $NORMVAR_MAX_UPLOAD_MB, else 200 MB."""
    if max_mb is None:
        max_mb = env_number("NORMVAR_MAX_UPLOAD_MB", DEFAULT_MAX_UPLOAD_MB, **UPLOAD_MB)
    else:
        max_mb = Number("--max-upload-mb", **UPLOAD_MB)(max_mb)
    return int(float(max_mb) * 1024 * 1024)


def corpus_extension(ext_or_filename: str) -> str:
    """The allow-listed extension of ``ext`` or a file name ('x.TXT.GZ' -> '.txt.gz').
    The result is always one of CORPUS_EXTENSIONS (never taken from the user's string)."""
    s = str(ext_or_filename or "").strip().lower()
    bare = {e.lstrip("."): e for e in CORPUS_EXTENSIONS}
    if s in bare:
        return bare[s]
    found = corpus_suffix(s)  # .txt.gz is tried before .txt
    if found is not None:
        return found
    raise NormvarError(
        f"unsupported corpus file type {ext_or_filename!r}", fix=f"upload one of: {', '.join(CORPUS_EXTENSIONS)}"
    )


def store_corpus(data_dir, data: bytes, ext: str, *, max_mb: float | None = None) -> Path:
    """Store uploaded corpus bytes as ``corpora/<sha256><ext>`` and return the path.

    The same bytes stored twice give one file. ``ext`` (an extension or the uploaded file's
    name) only selects one of CORPUS_EXTENSIONS; the uploaded name is never used as a path.
    Size cap: ``max_mb``, else $NORMVAR_MAX_UPLOAD_MB, else 200 MB."""
    dd = DataDir.at(data_dir)
    suffix = corpus_extension(ext)
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise NormvarError("corpus upload is not bytes", fix="pass the file's raw bytes")
    if not data:
        raise NormvarError("the uploaded corpus is empty", fix="upload a file with one sentence per line")
    cap = max_upload_bytes(max_mb)
    if len(data) > cap:
        raise NormvarError(
            f"the uploaded corpus is {len(data) / 2**20:.1f} MB, over the {cap / 2**20:.0f} MB limit",
            fix="upload a smaller file (or a .txt.gz), or raise NORMVAR_MAX_UPLOAD_MB",
        )
    if suffix == ".txt.gz" and data[:2] != b"\x1f\x8b":
        raise NormvarError("the uploaded .txt.gz file is not gzip-compressed", fix="upload it as .txt")
    if suffix == ".txt.gz":
        check_expanded_size(data, cap)
    if suffix == ".parquet":
        check_parquet_size(data, cap)
    digest = hashlib.sha256(data).hexdigest()
    target = dd.corpora / f"{digest}{suffix}"
    label = upload_label(dd.corpora, ext, digest, suffix)
    if target.exists() and target.stat().st_size == len(data):
        if label:
            write_label(target, label)
        return target
    tmp = dd.corpora / f".{digest}{suffix}.tmp-{os.getpid()}-{threading.get_ident()}"
    create_temp(tmp, what="the upload's temp file")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    if label:
        write_label(target, label)
    return target


def upload_label(corpora: Path, filename: str, digest: str, suffix: str) -> str:
    """The label of an upload: its file name's stem, cleaned (letters, digits, ``._-``, at most 60
    characters; never a path), with ``-<first 8 hex of its sha256>`` only when another stored corpus
    already carries that label. '' when ``filename`` is a bare extension."""
    base = str(filename or "").replace("\\", "/").split("/")[-1]
    if not corpus_suffix(base) or base.lower().lstrip(".") == suffix.lstrip("."):
        return ""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", corpus_stem(base)).strip("-_.")[:60]
    if not stem:
        return ""
    own = corpora / f"{digest}{suffix}{LABEL_SUFFIX}"
    for side in corpora.glob(f"*{LABEL_SUFFIX}"):
        if side != own and side.read_text(encoding="utf-8", errors="replace").strip() == stem:
            return f"{stem}-{digest[:8]}"
    return stem


def upload_run_name(model: str, corpus) -> str:
    """The name of a run of a stored upload ``corpus`` when none is given (the New-run form's):
    ``config.default_run_name`` of ``model`` and the upload's label (``corpus_formats.corpus_label``: its file's
    name, with a short hash only when another upload has that name) cleaned to letters, digits, ``_`` and ``-``
    (at most 60), so ``minilm`` on ``my corpus.txt`` is ``minilm__my-corpus``."""
    from normvar_core.config import RunConfig, default_run_name
    from normvar_core.corpus_formats import corpus_label

    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", corpus_label(corpus)).strip("-_")[:60] or "upload"
    return default_run_name(RunConfig(model=model, corpus=f"{stem}.txt"))


def write_label(target: Path, label: str) -> None:
    """Write ``<target>.name`` atomically (the first label of these bytes stays: runs already name it)."""
    side = target.with_name(target.name + LABEL_SUFFIX)
    if side.exists():
        return
    tmp = create_temp(side.with_name(f".{side.name}.tmp-{os.getpid()}-{threading.get_ident()}"))
    tmp.write_text(label, encoding="utf-8")
    os.replace(tmp, side)


def check_expanded_size(data: bytes, cap: int, chunk: int = 1 << 20) -> int:
    """Decompress a gzip upload in a stream, holding at most ``chunk`` bytes of output at a time, and
    refuse it as soon as it expands beyond ``cap`` (a 'zip bomb' is never inflated in memory).
    Returns the expanded size."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    total, pos = 0, 0
    try:
        while pos < len(data) or d.unconsumed_tail:
            src = d.unconsumed_tail or data[pos : pos + chunk]
            if not d.unconsumed_tail:
                pos += chunk
            total += len(d.decompress(src, chunk))
            if total > cap:
                raise NormvarError(
                    f"the uploaded .txt.gz expands beyond the {cap / 2**20:.0f} MB limit",
                    fix="upload a smaller corpus, or raise NORMVAR_MAX_UPLOAD_MB",
                )
            if d.eof:
                break
    except zlib.error as exc:
        raise NormvarError(f"the uploaded .txt.gz file is damaged ({exc})", fix="re-compress it with gzip") from None
    return total


def check_parquet_size(data: bytes, cap: int) -> int:
    """Refuse a .parquet upload that is not Parquet, or whose columns expand beyond ``cap`` bytes
    once decompressed (the footer's uncompressed sizes; nothing is decompressed here).
    Returns the uncompressed size."""
    import io

    import pyarrow.parquet as pq

    if data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        raise NormvarError("the uploaded .parquet file is not a Parquet file", fix="check the file")
    try:
        meta = pq.ParquetFile(io.BytesIO(data)).metadata
        total = sum(
            meta.row_group(i).column(j).total_uncompressed_size
            for i in range(meta.num_row_groups)
            for j in range(meta.num_columns)
        )
    except Exception as exc:
        raise NormvarError(
            f"the uploaded .parquet file is damaged ({type(exc).__name__})",
            fix="write it again (e.g. pandas.DataFrame.to_parquet)",
        ) from None
    if total > cap:
        raise NormvarError(
            f"the uploaded .parquet expands beyond the {cap / 2**20:.0f} MB limit",
            fix="upload a smaller corpus, or raise NORMVAR_MAX_UPLOAD_MB",
        )
    return total
