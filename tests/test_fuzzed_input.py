"""Generated bad input (hypothesis): arbitrary bytes, encodings, sizes, file kinds, columns and
option values fed to the corpus loader and to RunConfig. The promise: either a valid result or a
NormvarError with a one-line message and a fix — never another exception."""

from __future__ import annotations

import gzip
import io
import json

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus.read import load_sentences

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)
_bytes = st.binary(max_size=400)


def _assert_one_line(err: NormvarError) -> None:
    msg = str(err)
    assert msg and "\n" not in msg, msg
    assert err.fix, f"no fix for: {msg}"


def _load(path, **opts):
    try:
        cfg = RunConfig(model="minilm", corpus=str(path), **opts).validate()
        corpus = load_sentences(cfg, path.parent)
    except NormvarError as err:
        _assert_one_line(err)
        return None
    assert corpus.sentences, "an empty corpus must be a NormvarError"
    assert all(isinstance(s, str) and s.strip() == s and s for s in corpus.sentences)
    assert len(corpus.sentence_lengths) == len(corpus.sentences)
    if opts.get("max_words", 64):
        assert all(len(s.split()) < opts.get("max_words", 64) for s in corpus.sentences)
    return corpus


@SETTINGS
@given(data=_bytes, suffix=st.sampled_from([".txt", ".txt.gz", ".jsonl", ".csv", ".parquet"]))
def test_arbitrary_bytes_under_every_suffix(tmp_path, data, suffix):
    p = tmp_path / f"c{suffix}"
    p.write_bytes(data)
    _load(p)


@SETTINGS
@given(text=_text, encoding=st.sampled_from(["utf-8", "utf-16", "latin-1", "cp1252", "utf-8-sig"]), gz=st.booleans())
def test_text_in_any_encoding(tmp_path, text, encoding, gz):
    try:
        raw = text.encode(encoding)
    except UnicodeEncodeError:
        raw = text.encode("utf-8")
    p = tmp_path / ("c.txt.gz" if gz else "c.txt")
    p.write_bytes(gzip.compress(raw) if gz else raw)
    corpus = _load(p)
    if corpus is not None and encoding in ("utf-8", "utf-8-sig"):
        assert set(corpus.sentences) <= {line.strip() for line in text.splitlines()}


@SETTINGS
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "text": st.one_of(_text, st.integers(), st.none(), st.floats(allow_nan=True)),
                "id": st.one_of(st.integers(), _text),
                "score": st.floats(allow_nan=True),
            },
        ),
        max_size=12,
    ),
    column=st.sampled_from([None, "text", "id", "score", "missing"]),
    fmt=st.sampled_from(["jsonl", "csv", "parquet"]),
)
@example(rows=[{}, {"text": None, "id": 0}], column="id", fmt="csv")  # numbers with a blank cell (found in CI)
@example(rows=[{"id": True}, {}], column="id", fmt="csv")  # booleans with a blank cell
def test_tables_with_any_columns(tmp_path, rows, column, fmt):
    p = tmp_path / f"c.{fmt}"
    if fmt == "jsonl":
        p.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    else:
        df = pd.DataFrame(rows)
        if fmt == "csv":
            buf = io.StringIO()
            df.to_csv(buf, index=False)
            p.write_text(buf.getvalue(), encoding="utf-8")
        else:
            try:
                df.to_parquet(p)
            except Exception:
                return
    corpus = _load(p, text_column=column)
    if corpus is not None and column in ("id", "score"):
        # a numeric column must not become a corpus of "0", "1", ... (it is refused instead)
        assert not all(
            s.replace(".", "", 1).replace("-", "", 1).isdigit() or s in ("True", "False") for s in corpus.sentences
        )


_opt_values = st.one_of(
    st.none(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.booleans(),
)


@SETTINGS
@given(
    opts=st.dictionaries(
        st.sampled_from(
            [
                "max_words",
                "sample_frac",
                "seed",
                "max_sentences",
                "max_length",
                "batch_size",
                "device",
                "dtype",
                "mean_dtype",
                "samples_per_token",
                "name",
                "layers",
                "unknown_option",
            ]
        ),
        _opt_values,
        max_size=4,
    )
)
def test_any_option_values(opts):
    try:
        cfg = RunConfig.from_dict({"model": "minilm", **opts})
    except NormvarError as err:
        _assert_one_line(err)
        return
    # accepted: every value is in range
    assert 0 < cfg.sample_frac <= 1 and cfg.max_words >= 0 and cfg.seed >= 0 and cfg.samples_per_token >= 0
    assert cfg.max_sentences is None or cfg.max_sentences >= 1


@pytest.mark.parametrize("name", ["../evil", "a/b", "", " ", "x" * 200, ".hidden", "nul\x00"])
def test_bad_run_names(name):
    with pytest.raises(NormvarError):
        RunConfig(model="minilm", name=name).validate()
