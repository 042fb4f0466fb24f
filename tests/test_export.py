"""``normvar export``: every table of a run read back by pandas, polars and DuckDB equals what was written
(the in-memory TokenStats and samples: float64 moments exactly, float32 vectors bit for bit), the .npy
means and the Projector pair, and the destination rules (a file refused, nothing half-published)."""

from __future__ import annotations

import json
import os
import stat

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from runfiles import write_run

from normvar_core.errors import NormvarError
from normvar_core.runs import export as export_mod
from normvar_core.runs.export import export_run
from normvar_core.runs.reader import open_run
from normvar_core.service.cli import main as cli
from normvar_core.stats.tokenstats import TokenStats

# tokens that break naive CSV/TSV writers
TRICKY = ["plain", "a,b", 'say "hi"', "tab\there", "new\nline", "back\\slash", "ünï", "", " lead"]
LAYERS = [0, 2, 5]


def _run(tmp_path):
    rng = np.random.default_rng(7)
    L, d, V, N = len(LAYERS), 6, len(TRICKY), 3000
    x = (rng.normal(size=(L, N, d)) * 2 + 0.5).astype(np.float32)
    tok = rng.integers(0, V, N)
    ids = np.unique(tok)  # float64 brute force per type: mu, Q = mean ||x||^2, M = ||mu||^2, V = Q - M
    mean = np.stack([np.stack([x[l, tok == t].astype(np.float64).mean(0) for t in ids]) for l in range(L)])
    q = np.stack([[np.mean(np.sum(x[l, tok == t].astype(np.float64) ** 2, 1)) for t in ids] for l in range(L)])
    m = np.sum(mean**2, 2)
    st = TokenStats(
        token_ids=ids.astype(np.int64),
        n=np.bincount(tok)[ids],
        mean=mean.astype(np.float32),
        q=q,
        m=m,
        v=q - m,
        layer_index=np.array(LAYERS),
    )
    tokens = [TRICKY[int(t)] for t in st.token_ids]
    ids = np.repeat(st.token_ids[:2], [3, 2])
    samples = {
        "token_ids": ids,
        "tokens": [TRICKY[int(t)] for t in ids],
        "i": np.array([0, 1, 2, 0, 1], np.int32),
        "vectors": rng.normal(size=(L, ids.size, d)).astype(np.float32),
        "sentence_ids": np.arange(ids.size),
        "positions": np.arange(ids.size),
        "sentences": {k: f"sentence {k}, with a comma" for k in range(ids.size)},
    }
    meta = {"model": "tiny", "corpus_name": "c.txt", "options": {"model": "tiny"}, "notes": {}}
    path = write_run(
        tmp_path / "runs" / "r.duckdb",
        meta=meta,
        stats=st,
        tokens=tokens,
        sentence_lengths=np.array([3, 5, 5]),
        samples=samples,
    )
    return path, st, tokens, samples


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    path, st, tokens, samples = _run(tmp)
    outs = {fmt: export_run(path, tmp / fmt, fmt) for fmt in ("parquet", "csv")}
    outs["projector"] = export_run(path, tmp / "projector", "projector", layer=2)
    return path, st, tokens, samples, outs


def _expected_stats(st, tokens) -> pd.DataFrame:
    L, T = st.num_layers, st.num_types
    return pd.DataFrame(
        {
            "layer": np.repeat(LAYERS, T),
            "token_id": np.tile(st.token_ids, L),
            "token": tokens * L,
            "n": np.tile(st.n, L),
            "q": st.q.reshape(-1),
            "m": st.m.reshape(-1),
            "v": st.v.reshape(-1),
        }
    )


def _sorted(df: pd.DataFrame, keys) -> pd.DataFrame:
    return df.sort_values(keys).reset_index(drop=True)


def test_every_table_is_exported(exported):
    path, *_, outs = exported
    tables = open_run(path).table_names
    for fmt in ("parquet", "csv"):
        manifest = json.loads((outs[fmt] / "manifest.json").read_text())
        assert {f"{t}.{fmt}" for t in tables} <= set(manifest["files"]) and manifest["layers"] == LAYERS
        for t in tables:
            assert (outs[fmt] / f"{t}.{fmt}").is_file()


def test_parquet_read_back_by_pandas_polars_duckdb(exported):
    path, st, tokens, samples, outs = exported
    want = _expected_stats(st, tokens)
    f = outs["parquet"] / "token_stats.parquet"
    for got in (
        pd.read_parquet(f),
        pl.read_parquet(f).to_pandas(),
        duckdb.sql(f"SELECT * FROM read_parquet('{f}')").df(),
    ):
        got = _sorted(got, ["layer", "token_id"])
        assert got["token"].tolist() == want["token"].tolist()
        for c in ("token_id", "n", "q", "m", "v"):
            assert np.array_equal(got[c].to_numpy(), want[c].to_numpy()), c  # float64: exact

    f = outs["parquet"] / "token_means.parquet"
    schema = pq.read_schema(f)
    typ = schema.field("mean").type
    assert pa.types.is_fixed_size_list(typ) and typ.list_size == 6 and typ.value_type == pa.float32()
    assert pl.read_parquet(f).schema["mean"] == pl.Array(pl.Float32, 6)
    for got in (
        pd.read_parquet(f),
        duckdb.sql(f"SELECT * FROM read_parquet('{f}')").df(),
        pl.read_parquet(f).to_pandas(),
    ):
        got = _sorted(got, ["layer", "token_id"])
        mat = np.stack(got["mean"].to_numpy()).astype(np.float32).reshape(st.num_layers, st.num_types, st.dim)
        assert np.array_equal(mat, st.mean)

    got = _sorted(pd.read_parquet(outs["parquet"] / "samples.parquet"), ["layer", "sentence_id"])
    vec = np.stack(got["vector"].to_numpy()).reshape(len(LAYERS), -1, st.dim)
    assert np.array_equal(vec, samples["vectors"])


def test_csv_read_back_by_pandas_polars_duckdb(exported):
    path, st, tokens, samples, outs = exported
    want = _expected_stats(st, tokens)
    f = outs["csv"] / "token_stats.csv"
    for got in (
        pd.read_csv(f, keep_default_na=False),
        pl.read_csv(f).to_pandas(),
        duckdb.sql(f"SELECT * FROM read_csv('{f}', header=true)").df(),
    ):
        got = _sorted(got, ["layer", "token_id"])
        assert got["token"].fillna("").tolist() == want["token"].tolist()  # commas, quotes, newlines intact
        for c in ("q", "m", "v"):
            assert np.array_equal(got[c].to_numpy(np.float64), want[c].to_numpy()), c

    f = outs["csv"] / "token_means.csv"
    cols = [f"mean_{k}" for k in range(st.dim)]
    for got in (pd.read_csv(f), pl.read_csv(f).to_pandas(), duckdb.sql(f"SELECT * FROM read_csv('{f}')").df()):
        got = _sorted(got, ["layer", "token_id"])
        assert list(got.columns) == ["layer", "token_id", *cols]
        mat = got[cols].to_numpy(np.float64).astype(np.float32).reshape(st.num_layers, st.num_types, st.dim)
        assert np.array_equal(mat, st.mean)  # the shortest text of each float32 reads back to it
    run_row = pd.read_csv(outs["csv"] / "run.csv")
    assert json.loads(run_row.loc[0, "layers"]) == LAYERS and run_row.loc[0, "name"] == "r"


def test_npy_means_and_token_list(exported):
    _, st, tokens, _, outs = exported
    for fmt in ("parquet", "csv"):
        arr = np.load(outs[fmt] / "token_means.npy")
        assert arr.dtype == np.float32 and np.array_equal(arr, st.mean)
        idx = pd.read_csv(outs[fmt] / "token_means_tokens.csv", keep_default_na=False)
        assert idx["token_id"].tolist() == st.token_ids.tolist() and idx["token"].tolist() == tokens
        assert idx["n"].tolist() == st.n.tolist()


def test_projector_pair(exported):
    _, st, tokens, _, outs = exported
    li = LAYERS.index(2)
    vec = np.loadtxt(outs["projector"] / "vectors.tsv", delimiter="\t", dtype=np.float64).astype(np.float32)
    assert np.array_equal(vec, st.mean[li])
    lines = (outs["projector"] / "metadata.tsv").read_text(encoding="utf-8").split("\n")
    assert lines[0] == "token\ttoken_id\tn\tq\tm\tv\ttoken_readable" and lines[-1] == ""
    assert len(lines) == st.num_types + 2
    rows = [ln.split("\t") for ln in lines[1:-1]]
    assert all(len(r) == 7 for r in rows)
    unescape = {"plain": "plain", "tab\\there": "tab\there", "new\\nline": "new\nline", "back\\\\slash": "back\\slash"}
    assert [unescape.get(r[0], r[0]) for r in rows] == tokens
    assert [float(r[3]) for r in rows] == st.q[li].tolist()


def test_cli_offers_every_format_without_importing_the_exporter():
    from normvar_core.service import commands_export

    assert commands_export.FORMATS == export_mod.FORMATS


def test_destination_rules(tmp_path, capsys):
    path, st, *_ = _run(tmp_path)
    a_file = tmp_path / "taken.txt"
    a_file.write_text("x")
    assert cli(["export", str(path), "--out", str(a_file)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a folder" in err[0] and a_file.read_text() == "x"
    assert cli(["export", str(path), "--format", "projector", "--layer", "3", "--out", str(tmp_path / "p")]) == 2
    assert "use one of [0, 2, 5]" in capsys.readouterr().err and not (tmp_path / "p").exists()

    out = tmp_path / "out"
    out.mkdir()  # an empty folder is fine
    assert cli(["export", str(path), "--format", "csv", "--out", str(out)]) == 0
    assert (out / "token_stats.csv").exists()
    assert cli(["export", str(path), "--out", str(out)]) == 2  # not empty: refused, untouched
    assert "--overwrite" in capsys.readouterr().err and (out / "token_stats.csv").exists()
    assert cli(["export", str(path), "--out", str(out), "--overwrite"]) == 0
    assert (out / "token_stats.parquet").exists() and not (out / "token_stats.csv").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_export_out_follows_the_destination_rule(tmp_path, capsys):
    """--out of export: a link (to a canary folder), a FIFO and a missing parent are refused with one line, exit 2,
    nothing created or changed (the rule of every destination); ``--overwrite`` through a link deletes nothing
    inside its target, and replaces only a folder that holds an earlier export."""
    path, *_ = _run(tmp_path)
    real = tmp_path / "real"
    real.mkdir()
    (real / "canary.txt").write_text("canary\n")
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    for extra in ([], ["--overwrite"]):
        assert cli(["export", str(path), "--format", "projector", "--out", str(link), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "symbolic link" in err[0], err
    assert link.is_symlink() and sorted(os.listdir(real)) == ["canary.txt"]
    assert (real / "canary.txt").read_text() == "canary\n"
    assert cli(["export", str(path), "--out", str(real), "--overwrite"]) == 2  # a folder normvar did not export
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did not export" in err[0], err
    assert sorted(os.listdir(real)) == ["canary.txt"] and (real / "canary.txt").read_text() == "canary\n"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert cli(["export", str(path), "--out", str(fifo)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "FIFO" in err[0] and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert cli(["export", str(path), "--out", str(tmp_path / "nope" / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mkdir -p" in err[0] and not (tmp_path / "nope").exists()


def test_nothing_half_published_on_failure(tmp_path, monkeypatch):
    path, *_ = _run(tmp_path)
    real = export_mod._write_table
    calls = []

    def fail_third(con, table, dest, fmt):
        calls.append(table)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(con, table, dest, fmt)

    monkeypatch.setattr(export_mod, "_write_table", fail_third)
    with pytest.raises(NormvarError, match="nothing was published"):
        export_run(path, tmp_path / "new", "parquet")
    assert not (tmp_path / "new").exists()
    old = tmp_path / "old"
    old.mkdir()
    (old / "keep.txt").write_text("kept")
    calls.clear()
    with pytest.raises(NormvarError):
        export_run(path, old, "parquet", overwrite=True)
    assert [p.name for p in old.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old", "runs"]  # no temp folder left
