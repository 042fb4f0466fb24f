"""The New-run form's upload and its messages.

An upload is stored under its sha256 (``jobs.store_corpus``; its own name only picks an allow-listed
extension), then read once as the worker will read it (one sentence kept, so memory stays bounded):
a file the worker would refuse (an image, binary bytes under a .txt name, text that is not UTF-8, a
table without a text column, nothing left after the filters) is refused on the form, before any job
is queued. Every message names the user's file by its own name (a label, never a path) and speaks
the form's words: its labels, not the CLI's flags (``in_form_words``)."""

from __future__ import annotations

import re
from dataclasses import fields

from normvar_core.config import RunConfig
from normvar_core.corpus_formats import CORPUS_SUFFIXES, corpus_suffix
from normvar_core.errors import NormvarError

OVERWRITE = "“Replace a run of that name”"
NOT_TEXT_FIX = (
    "upload text: UTF-8, one sentence a line (.txt, .txt.gz), or a table with a text column (.jsonl, .csv, .parquet)"
)
NOT_UTF8_FIX = "save it as UTF-8 text (an editor's “Save as… → UTF-8”) and upload it again"


def shown_name(name: object) -> str:
    """The upload's file name as shown: its last part, printable characters only, at most 80 (its start and
    its end, the extension, around a "…")."""
    base = "".join(ch for ch in str(name or "").replace("\\", "/").split("/")[-1] if ch.isprintable())
    return (base if len(base) <= 80 else f"{base[:60]}…{base[-19:]}") or "the uploaded file"


def quoted(name: object) -> str:
    """``shown_name`` in quotes, its Markdown characters escaped (messages are drawn as Markdown)."""
    return "“" + re.sub(r"([\\`*_{}\[\]<>#|~$])", r"\\\1", shown_name(name)) + "”"


def _flag_labels() -> dict[str, str]:
    out = {}
    for f in fields(RunConfig):
        label = f.metadata.get("label") or f.name.replace("_", " ").capitalize()
        out[f.metadata.get("flag") or "--" + f.name.replace("_", "-")] = f"“{label}”"
    return out


STORED = re.compile(r"(?:[^\s'\"()]*/)?[0-9a-f]{64}(?:" + "|".join(re.escape(s) for s in CORPUS_SUFFIXES) + ")")
"""A stored upload's name (``corpora/<sha256><ext>``), with the folders before it when a message gives them."""


def _words(text: str, upload_name: str | None) -> str:
    if upload_name is not None:
        text = STORED.sub(lambda _: quoted(upload_name), text)
    text = re.sub(r"\b(?:pass|add|use) --overwrite\b", f"tick {OVERWRITE}", text)
    text = text.replace("--overwrite", OVERWRITE)
    labels = _flag_labels()

    def flag(m: re.Match) -> str:
        label = labels.get(m.group(2))
        if label is None:
            return m.group(0)
        verb = (m.group(1) or "").strip()
        return f"{'set' if verb in ('pass', 'use') else verb} {label}".strip()

    text = re.sub(r"(?:\b(pass|use|raise|lower) )?(?<![\w-])(--[a-z][a-z0-9-]*)(?: [A-Z][A-Z_]*\b)?", flag, text)
    text = re.sub(r"\(?normvar cancel [\w-]+\)?", "with its Cancel button on the Runs page", text)
    return re.sub(r"\(?normvar jobs\)?", "on the Runs page", text)


def in_form_words(err: Exception, upload_name: str | None = None) -> Exception:
    """``err`` reworded for the form: a stored upload's name (its sha256) becomes ``upload_name``, the
    user's own file name; CLI flags become the form's labels. Not a NormvarError: unchanged."""
    if not isinstance(err, NormvarError):
        return err
    fix = err.fix
    if "looks binary" in err.message:
        fix = NOT_TEXT_FIX
    elif "is not UTF-8" in err.message:
        fix = NOT_UTF8_FIX
    return NormvarError(_words(err.message, upload_name), _words(fix, upload_name) if fix else None)


def store_upload(data_dir, up, cap: int, cap_mb: int) -> str:
    """The uploaded file stored under its sha256 ("" without an upload); refused, naming the file, when it
    is over the cap, of a type the form does not read, empty or a damaged archive."""
    if up is None:
        return ""
    from normvar_core.service import jobs

    name = quoted(up.name)
    if up.size > cap:
        raise NormvarError(
            f"{name} is {up.size / 2**20:.1f} MB, over the {cap_mb} MB limit",
            fix="upload a smaller file (or gzip it as .txt.gz); the limit is NORMVAR_MAX_UPLOAD_MB "
            "where the dashboard runs",
        )
    if corpus_suffix(str(up.name)) is None:
        raise NormvarError(
            f"{name} is not a corpus file the form reads",
            fix=f"upload one of: {', '.join(CORPUS_SUFFIXES)} ({NOT_TEXT_FIX.split(': ', 1)[1]})",
        )
    try:
        return str(jobs.store_corpus(data_dir, up.getvalue(), str(up.name)))  # the name: a label, never a path
    except NormvarError as err:
        msg = re.sub(r"\bthe uploaded (?:corpus|\.[a-z.]+ file|\.[a-z.]+)", name, err.message)
        raise NormvarError(msg, fix=err.fix) from None


def check_corpus(cfg: RunConfig, up, data_dir) -> None:
    """Read ``cfg``'s uploaded corpus as the worker will (every check, one sentence kept); a refusal
    names the user's file in the form's words."""
    if not cfg.corpus or up is None:
        return
    from normvar_core.pipeline.corpus.read import load_sentences

    try:
        load_sentences(cfg.replace(max_sentences=1), data_dir)
    except NormvarError as err:
        raise in_form_words(err, up.name) from None


__all__ = ["in_form_words", "store_upload", "check_corpus", "shown_name", "quoted"]
