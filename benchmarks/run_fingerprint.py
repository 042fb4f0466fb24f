"""A refactor's check that behaviour is unchanged (not a speed benchmark): one real MiniLM run with every measure
on (240 sentences), cancelled once in the early pass and once in the pass (a checkpoint each), resumed to the end
and published. Prints/writes JSON: every checkpoint array's key, dtype and shape
(and its meta keys), and every run-file table's columns, types, row count and a content hash (floats rounded to
9 significant digits, so that float32 forward-pass noise across processes does not count).

    .venv/bin/python benchmarks/run_fingerprint.py OUT.json          # on the tree before a refactor, then after
    .venv/bin/python benchmarks/run_fingerprint.py --compare BEFORE.json AFTER.json
"""

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def fingerprint(out: Path) -> dict:
    import duckdb
    import numpy as np

    from normvar_core.config import RunConfig
    from normvar_core.errors import CancelledError
    from normvar_core.pipeline.execute.local import compute_run

    tmp = Path(tempfile.mkdtemp(prefix="frozen-"))
    ckpt = tmp / "run.ckpt"
    cfg = RunConfig(
        model="minilm",
        corpus="",
        name="frozen",
        max_sentences=240,
        batch_size=16,
        seed=3,
        self_similarity="on",
        occurrences=2000,
        id_sample=400,
    )
    calls = {"n": 0}

    res: dict = {"checkpoint": {}, "tables": {}}
    for stage, limit in (("early", 3), ("pass", 24)):  # cancelled in the early pass, then in the pass
        calls["n"] = 0

        def cancel(limit=limit):
            calls["n"] += 1
            return calls["n"] > limit

        try:
            compute_run(cfg, tmp, checkpoint=ckpt, should_cancel=cancel, checkpoint_every_s=1e9)
        except CancelledError:
            pass
        with np.load(ckpt, allow_pickle=False) as z:
            for k in sorted(z.files):
                a = z[k]
                if k == "meta_json":
                    meta = json.loads(str(a))
                    res["checkpoint"][f"{stage}:meta_keys"] = sorted(meta)
                    res["checkpoint"][f"{stage}:next_batch"] = meta.get("next_batch")
                else:
                    res["checkpoint"][f"{stage}:{k}"] = [str(a.dtype), list(a.shape)]
    path = compute_run(cfg, tmp, checkpoint=ckpt)
    con = duckdb.connect(str(path), read_only=True)
    for (name,) in con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall():
        cols = con.execute(
            f"SELECT column_name, data_type FROM information_schema.columns WHERE table_name = '{name}' "
            "ORDER BY ordinal_position"
        ).fetchall()
        df = con.execute(f'SELECT * FROM "{name}"').df()
        h = hashlib.sha256()
        skip = {
            "seconds",
            "created",
            "created_at",
            "notes",
            "config_json",
            "meta",
            "path",
            "hostname",
            "finished_at",
            "started_at",
            "elapsed_s",
            "duration_s",
            "version",
        }
        for c in df.columns:
            if name == "run" and c in skip:
                continue
            v = df[c]
            h.update(c.encode())
            h.update(_canon(v.to_list()).encode())
        res["tables"][name] = {"columns": [list(c) for c in cols], "rows": len(df), "hash": h.hexdigest()[:16]}
    con.close()
    return res


def _canon(values) -> str:
    import math

    import numpy as np

    def one(x):
        if isinstance(x, (float, np.floating)):
            x = float(x)
            if math.isnan(x) or math.isinf(x):
                return repr(x)
            return f"{x:.8e}"
        if isinstance(x, (list, tuple, np.ndarray)):
            return "[" + ",".join(one(y) for y in list(x)) + "]"
        if isinstance(x, dict):
            return "{" + ",".join(f"{k}:{one(v)}" for k, v in sorted(x.items())) + "}"
        return repr(x)

    return "|".join(one(v) for v in values)


def compare(a: Path, b: Path) -> int:
    A, B = json.loads(a.read_text()), json.loads(b.read_text())
    bad = 0
    for part in ("checkpoint", "tables"):
        for k in sorted(set(A[part]) | set(B[part])):
            if A[part].get(k) != B[part].get(k):
                bad += 1
                print(f"{part}.{k}: {A[part].get(k)} != {B[part].get(k)}")
    print("frozen: equal" if not bad else f"frozen: {bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    out = Path(sys.argv[1])
    out.write_text(json.dumps(fingerprint(out), indent=1, sort_keys=True))
    print(f"wrote {out}")
