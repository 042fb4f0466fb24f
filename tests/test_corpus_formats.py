"""One list of corpus formats: the reader, the run names, the upload store and the upload widget agree,
and an upload of every format round-trips through the corpus store into the same kept sentences."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from normvar_core.config import RunConfig, default_run_name
from normvar_core.corpus_formats import CORPUS_SUFFIXES, TABLE_SUFFIXES, TEXT_SUFFIXES, UPLOAD_TYPES, corpus_suffix
from normvar_core.datadir import DataDir
from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus.formats import corpus_format
from normvar_core.pipeline.corpus.read import load_sentences
from normvar_core.service import corpus_store

SENTENCES = [
    "The cat sat on the mat.",
    'Ünïcödé, "quotes", commas; and tabs\there.',
    "A dog ran.",
    "Short one.",
    "Last line without a newline",
]


def encode(suffix: str, sentences: list[str]) -> bytes:
    """The bytes of a corpus file of that format holding ``sentences``, written independently of the reader."""
    text = "\n".join(sentences).encode()
    frame = pd.DataFrame({"text": sentences})
    if suffix == ".txt":
        return text
    if suffix == ".txt.gz":
        return gzip.compress(text)
    if suffix == ".jsonl":
        return "\n".join(json.dumps({"text": s, "id": i}) for i, s in enumerate(sentences)).encode()
    if suffix == ".csv":
        return frame.to_csv(index=False).encode()
    if suffix == ".parquet":
        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        return buf.getvalue()
    raise AssertionError(f"a format without a test encoder: {suffix}")


def test_the_lists_agree():
    assert set(CORPUS_SUFFIXES) == set(TEXT_SUFFIXES) | set(TABLE_SUFFIXES)
    assert corpus_store.CORPUS_EXTENSIONS == CORPUS_SUFFIXES
    for suf in CORPUS_SUFFIXES:
        # the reader, the store and the run name all know it
        assert corpus_format(Path(f"c{suf.upper()}")) == suf
        assert corpus_store.corpus_extension(f"My Upload{suf.upper()}") == suf
        assert corpus_store.corpus_extension(suf) == suf
        assert default_run_name(RunConfig(model="m", corpus=f"/x/c{suf}")) == "m__c"
        assert suf.rsplit(".", 1)[-1] in UPLOAD_TYPES
    # and nothing else: the upload widget's types are the last extensions of the suffixes, no more
    assert set(UPLOAD_TYPES) == {s.rsplit(".", 1)[-1] for s in CORPUS_SUFFIXES}
    for other in (".bz2", ".txt.xz", ".zst", ".tsv", ".json", ".gz"):
        assert corpus_suffix(f"c{other}") is None
        with pytest.raises(NormvarError, match="unsupported corpus file type"):
            corpus_store.corpus_extension(f"c{other}")
        with pytest.raises(NormvarError, match="unsupported corpus file type"):
            corpus_format(Path(f"c{other}"))


def test_the_upload_widget_takes_every_format(tmp_path, monkeypatch):
    """The label names every format; the widget itself takes any file (no ``type=``: a file Streamlit refused
    on its chip would reach the page as no upload, and Submit would quietly use the novels), and the page
    refuses what it cannot read, naming the file (test_new_run_form)."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("NORMVAR_DATA", str(tmp_path))  # the page opens the job queue: not the checkout's data/
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("views/new_run.py").run()
    assert not at.exception, [e.value for e in at.exception]
    (uploader,) = at.get("file_uploader")
    assert list(uploader.proto.type) == []
    for suf in CORPUS_SUFFIXES:
        assert suf in uploader.proto.label


@pytest.mark.parametrize("suffix", CORPUS_SUFFIXES)
def test_upload_round_trips_into_a_readable_corpus(tmp_path, suffix):
    dd = DataDir.at(tmp_path / "data")
    data = encode(suffix, SENTENCES)
    path = corpus_store.store_corpus(dd, data, f"../evil/My Corpus{suffix}")
    assert path.parent == dd.corpora and path.name.endswith(suffix)
    assert path.read_bytes() == data
    text = load_sentences(RunConfig(corpus=str(path)))
    assert text.sentences == SENTENCES
    assert text.n_read == len(SENTENCES) and text.n_kept == len(SENTENCES)
    assert text.name == "My-Corpus"  # the upload's file name, not its 64-character hash
    import hashlib

    assert text.sha256 == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("suffix", [s for s in CORPUS_SUFFIXES if s in (".txt.gz", ".parquet")])
def test_compressed_uploads_are_capped_on_their_expanded_size(tmp_path, suffix):
    many = [f"sentence number {i} " + "word " * 30 for i in range(20_000)]  # ~3.6 MB of text
    data = encode(suffix, many)
    assert len(data) < 1 * 2**20  # small on the wire ...
    with pytest.raises(NormvarError, match="expands beyond the 2 MB limit"):
        corpus_store.store_corpus(tmp_path, data, f"x{suffix}", max_mb=2)  # ... too big once expanded
    assert not list((tmp_path / "corpora").glob("*"))
    assert corpus_store.store_corpus(tmp_path, data, f"x{suffix}", max_mb=8).exists()


def test_a_damaged_parquet_upload_is_refused(tmp_path):
    data = encode(".parquet", SENTENCES)
    broken = data[:4] + b"\0" * (len(data) - 8) + data[-4:]
    with pytest.raises(NormvarError, match="parquet file is damaged"):
        corpus_store.store_corpus(tmp_path, broken, "x.parquet")
