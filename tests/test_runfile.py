"""The DuckDB run file: round trip of every table, atomic publish, overwrite rules, listing."""

from __future__ import annotations

import os
import subprocess
import sys

import duckdb
import numpy as np
import pytest
from runfiles import write_run

from normvar_core.errors import NormvarError
from normvar_core.pipeline.measures.token_moments import TokenMoments
from normvar_core.runs import reader, writer
from normvar_core.runs.reader import list_runs, open_run


def _stats(seed=0, L=3, d=8, N=4000, V=200):
    rng = np.random.default_rng(seed)
    measure = TokenMoments(L, d, layer_index=[0, 2, 5])
    for _ in range(2):
        measure.update((rng.normal(size=(L, N // 2, d)) * 3 + 1).astype(np.float32), rng.integers(0, V, N // 2))
    return measure.result()


def _samples(stats, rng):
    ids = np.repeat(stats.token_ids[:3], [2, 3, 1])
    i = np.concatenate([np.arange(2), np.arange(3), np.arange(1)]).astype(np.int32)
    return {
        "token_ids": ids,
        "tokens": [f"tok{t}" for t in ids],
        "i": i,
        "vectors": rng.normal(size=(stats.num_layers, ids.size, stats.dim)).astype(np.float32),
    }


META = {
    "model": "tiny",
    "revision": None,
    "weights_hash": "abc",
    "architecture": "BertModel",
    "norm_placement": "post",
    "norm_type": "LayerNorm",
    "final_norm": False,
    "num_layers": 5,
    "corpus_name": "c.txt",
    "corpus_sha256": "ff",
    "options": {"model": "tiny", "seed": 0},
    "n_sentences": 4,
    "n_truncated": 1,
    "device": "cpu",
    "dtype": "float32",
    "seconds": 1.5,
    "versions": {"torch": "x"},
    "notes": {"oom_splits": 0},
}


@pytest.fixture()
def written(tmp_path):
    st = _stats()
    smp = _samples(st, np.random.default_rng(1))
    tokens = [f"tok{t}" for t in st.token_ids]
    path = write_run(
        tmp_path / "runs" / "r1.duckdb",
        meta=META,
        stats=st,
        tokens=tokens,
        sentence_lengths=np.array([3, 5, 5, 9]),
        samples=smp,
    )
    return path, st, smp, tokens


def test_round_trip_every_table(written):
    path, st, smp, tokens = written
    assert path.name == "r1.duckdb" and path.exists()
    run = open_run(path)
    m = run.meta
    assert m["name"] == "r1" and m["model"] == "tiny" and m["options"] == {"model": "tiny", "seed": 0}
    assert m["layers"] == [0, 2, 5] and run.layers == [0, 2, 5] and m["dim"] == 8
    assert m["n_types"] == st.num_types and m["n_embeddings"] == int(st.n.sum())
    assert m["final_norm"] is False and m["versions"] == {"torch": "x"} and m["created_at"].endswith("Z")
    # token_stats: exact float64
    for li, layer in enumerate(run.layers):
        tt = run.token_table(layer)
        assert list(tt.columns) == ["token_id", "token", "n", "q", "m", "v", "token_raw"]
        assert np.array_equal(tt["token_id"], st.token_ids) and tt["token"].tolist() == tokens
        assert np.array_equal(tt["n"], st.n)
        for c in "qmv":
            assert np.array_equal(tt[c].to_numpy(), getattr(st, c)[li])
    # token_means: float32 of the float64 means
    back = run.stats()
    assert back.mean.dtype == np.float32
    np.testing.assert_allclose(back.mean, st.mean, rtol=1e-6, atol=1e-6)
    assert np.array_equal(back.q, st.q) and np.array_equal(back.layer_index, st.layer_index)
    assert run.stats() is back  # cached
    # layer_stats = TokenStats.corpus() over all types (eqs. 8–11)
    ls = run.layer_stats()
    ref = st.corpus()
    assert list(ls.columns) == ["layer", "n", "q", "m", "v", "v_w", "v_b"]
    for c in ["n", "q", "m", "v", "v_w", "v_b"]:
        np.testing.assert_allclose(ls[c].to_numpy(), ref[c].to_numpy(), rtol=1e-12)
    # histograms
    sl = run.sentence_length_hist()
    assert sl["words"].tolist() == [3, 5, 9] and sl["count"].tolist() == [1, 2, 1]
    fh = run.frequency_hist()
    assert int(fh["count"].sum()) == st.num_types
    x = np.log10(st.n)
    for _, r in fh.iterrows():
        assert r["count"] == int(((x >= r["log10_n_left"] - 1e-9) & (x < r["log10_n_right"] - 1e-9)).sum())
    # samples
    for li, layer in enumerate(run.layers):
        df = run.samples(layer)
        assert df["token_id"].tolist() == smp["token_ids"].tolist() and df["i"].tolist() == smp["i"].tolist()
        np.testing.assert_array_equal(np.stack(df["vector"]), smp["vectors"][li])
    one = run.samples(2, [int(st.token_ids[1])])
    assert len(one) == 3 and set(one["token"]) == {f"tok{st.token_ids[1]}"}
    assert run.sampled_tokens()["count"].tolist() == [2, 3, 1]
    with pytest.raises(NormvarError):
        run.token_table(1)


def test_sql_schema(written):
    path = written[0]
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert tables == {
            "run",
            "token_stats",
            "token_means",
            "layer_stats",
            "sentence_lengths",
            "frequency_hist",
            "samples",
        }
        types = dict(
            con.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'token_means'"
            ).fetchall()
        )
        assert types["mean"] == "FLOAT[8]"
        assert con.execute("SELECT count(*) FROM run").fetchone()[0] == 1
        q = con.execute("SELECT max(abs(q - m - v)) FROM token_stats").fetchone()[0]
        assert q < 1e-9
    finally:
        con.close()


@pytest.mark.subprocess
def test_open_run_closes_file(written, tmp_path):
    """After open_run another process can open the file read-write (no lock left)."""
    path = written[0]
    run = open_run(path)
    code = f"import duckdb; c = duckdb.connect({str(path)!r}); c.execute('SELECT 1'); c.close()"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert run.layers == [0, 2, 5]


def test_lazy_read_after_replace_is_detected(written, tmp_path):
    path, st, smp, tokens = written
    run = open_run(path)
    st2 = _stats(seed=5)
    write_run(
        path,
        meta=META,
        stats=st2,
        tokens=[str(t) for t in st2.token_ids],
        sentence_lengths=np.array([1]),
        samples=None,
        overwrite=True,
    )
    with pytest.raises(NormvarError, match="replaced"):
        run.stats()
    assert open_run(path).samples(0).empty


def test_existing_name_refused_unless_overwrite(written):
    path, st, smp, tokens = written
    before = path.stat().st_mtime_ns
    with pytest.raises(NormvarError, match="already exists"):
        write_run(path, meta=META, stats=st, tokens=tokens, sentence_lengths=np.array([1]), samples=None)
    assert path.stat().st_mtime_ns == before
    write_run(
        path,
        meta=dict(META, model="other"),
        stats=st,
        tokens=tokens,
        sentence_lengths=np.array([1]),
        samples=None,
        overwrite=True,
    )
    assert open_run(path).meta["model"] == "other"
    assert sorted(p.name for p in path.parent.iterdir()) == ["r1.duckdb"]


def test_atomic_publish(tmp_path, monkeypatch):
    st = _stats()
    final = tmp_path / "runs" / "atomic.duckdb"
    seen = []
    real_append = writer._append

    def spy(con, table, data, created, *held):
        seen.append((table, final.exists(), sorted(p.name for p in final.parent.iterdir())))
        if table == "samples":
            raise RuntimeError("disk full (simulated)")
        return real_append(con, table, data, created, *held)

    monkeypatch.setattr(writer, "_append", spy)
    with pytest.raises(RuntimeError, match="disk full"):
        write_run(
            final,
            meta=META,
            stats=st,
            tokens=[str(t) for t in st.token_ids],
            sentence_lengths=np.array([2]),
            samples=_samples(st, np.random.default_rng(0)),
        )
    assert seen and all(not exists for _, exists, _ in seen)  # never under the final name while writing
    tmp_name = f".atomic.tmp-{os.getpid()}.duckdb"
    assert all(names and all(n.startswith(tmp_name) for n in names) for _, _, names in seen)
    assert list(final.parent.iterdir()) == []  # nothing left behind
    monkeypatch.setattr(writer, "_append", real_append)
    write_run(
        final, meta=META, stats=st, tokens=[str(t) for t in st.token_ids], sentence_lengths=np.array([2]), samples=None
    )
    assert [p.name for p in final.parent.iterdir()] == ["atomic.duckdb"]


def test_list_runs_skips_bad_files(written, tmp_path):
    path = written[0]
    (path.parent / "broken.duckdb").write_bytes(b"not a database at all" * 10)
    (path.parent / ".hidden.tmp-1.duckdb").write_bytes(b"x")
    errors: list = []
    df = list_runs(tmp_path, errors=errors)
    assert df["name"].tolist() == ["r1"]
    assert list(df.columns) == reader.LIST_COLUMNS
    assert df.iloc[0]["n_types"] == written[1].num_types and df.iloc[0]["path"] == str(path)
    assert [p.name for p, _ in errors] == ["broken.duckdb"]
    assert list_runs(tmp_path / "empty").empty


def test_open_run_errors(tmp_path):
    with pytest.raises(NormvarError, match="not found"):
        open_run(tmp_path / "nope.duckdb")
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"garbage" * 100)
    with pytest.raises(NormvarError):
        open_run(bad)
    con = duckdb.connect(str(tmp_path / "other.duckdb"))
    con.execute("CREATE TABLE t(x INTEGER)")
    con.close()
    with pytest.raises(NormvarError, match="not a"):
        open_run(tmp_path / "other.duckdb")
