"""The dashboard tests' real run and the helpers that read what a page sent under Streamlit's AppTest.

``build_dashboard_data`` computes a real MiniLM run of 300 sentences of the shipped novels (``RUN``) and writes a
second run holding its even layers (``RUN2``); the ``data_dir`` fixture (tests/conftest.py) builds it once per
session, and ``run``, ``app`` and the browser tests' servers read it. ``arr``, ``figure``, ``trace`` … decode
the plotly figure JSON a page sends.
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
RUN = "minilm-novels300"
RUN2 = "minilm-novels300-even"  # the same statistics, even layers only: a shallower "model" for Compare


# ============================================================================ data
def build_dashboard_data(root: Path) -> Path:
    """A data dir with a real MiniLM run and a second run holding its even layers (``.ready`` marks it built)."""
    ready = root / ".ready"
    if ready.exists():
        return root
    from runfiles import write_run

    from normvar_core.pipeline.execute.local import compute_run
    from normvar_core.runs.reader import open_run
    from normvar_core.stats.tokenstats import TokenStats

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from every_measure import every_measure_on

    path = compute_run(every_measure_on(model="minilm", max_sentences=300, name=RUN), root)  # every measure: every page
    run = open_run(path)
    st = run.stats()
    keep = [i for i, l in enumerate(run.layers) if l % 2 == 0]
    sub = TokenStats(
        st.token_ids, st.n, st.mean[keep], st.q[keep], st.m[keep], st.v[keep], layer_index=st.layer_index[keep]
    )
    meta = {k: v for k, v in run.meta.items() if k not in ("name",)}
    meta["layers"] = [int(x) for x in sub.layer_index]
    meta["created_at"] = "2020-01-01T00:00:00Z"  # older: RUN stays the newest (the default selection)
    write_run(
        root / "runs" / f"{RUN2}.duckdb",
        meta=meta,
        stats=sub,
        tokens=run.tokens()["token"].tolist(),
        sentence_lengths=np.repeat(run.sentence_length_hist()["words"], run.sentence_length_hist()["count"]),
        samples=None,
    )
    os.utime(root / "runs" / f"{RUN2}.duckdb", (time.time() - 3600, time.time() - 3600))
    ready.touch()
    return root


# ============================================================================ helpers
def arr(v) -> np.ndarray:
    """A plotly JSON array: a list, or {"bdata": base64, "dtype": "f8", ("shape")}."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        if "shape" in v:
            shape = v["shape"]
            a = a.reshape([int(s) for s in str(shape).split(",")] if isinstance(shape, str) else shape)
        return a
    return np.asarray(v)


def figures_of(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def figure(at, title_part: str) -> dict:
    figs = figures_of(at)
    for f in figs:
        title = (f.get("layout", {}).get("title") or {}).get("text") or ""
        if title_part in title:
            return f
    raise AssertionError(
        f"no figure titled ~{title_part!r}; have {[(f['layout'].get('title') or {}).get('text') for f in figs]}"
    )


def trace(fig: dict, name: str) -> dict:
    for t in fig["data"]:
        if t.get("name") == name:
            return t
    raise AssertionError(f"no trace {name!r} in {[t.get('name') for t in fig['data']]}")


def cloud_traces(fig: dict) -> list[dict]:
    """A clouds figure's per-token traces (one legend group each; not the origin's ×), asserting that they are SVG up
    to ``theme.SVG_MAX_POINTS`` embeddings in all and WebGL above (``theme.point_trace``)."""
    from normvar_core.viz.theme import SVG_MAX_POINTS

    per_token = [d for d in fig["data"] if d.get("legendgroup")]
    n = sum(len(arr(d["x"])) for d in per_token)
    assert {d["type"] for d in per_token} <= {"scatter" if n <= SVG_MAX_POINTS else "scattergl"}, (
        n,
        per_token[0]["type"],
    )
    return per_token


def ok(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def in_band(run, layer, lo=1.0, hi=5.0):
    t = run.token_table(layer)
    return t.loc[(t.n >= 10**lo) & (t.n <= 10**hi)]


def open_section(at, page: str, label_part: str):
    """Open the page's tab whose label holds ``label_part`` (as a click would: the tab's state, then a rerun);
    only the open tab's figures are computed and sent. A curve that a run's measure declares is chosen by its title
    in the "More curves" tab (``views/_sections.more_curves``): that tab opened, then its name picked."""
    from views._sections import MORE

    labels = [t.label for t in at.tabs]
    if MORE in labels and not any(label_part in lab for lab in labels):
        open_section(at, page, MORE)
        choice = at.radio(key=f"w_curve_{page}")
        [title] = [t for t in choice.options if label_part in t] or [None]
        assert title is not None, f"no curve ~{label_part!r} in {choice.options}"
        choice.set_value(title).run()
        ok(at)
        return at
    [label] = [lab for lab in labels if label_part in lab] or [None]
    assert label is not None, f"no tab ~{label_part!r} in {labels}"
    at.session_state[f"w_section_{page}"] = label
    at.run()
    ok(at)
    return at


def open_page(at, page: str, **params):
    at.query_params.update({"run": RUN, **params})
    at.run()
    at.switch_page(f"views/{page}.py").run()
    ok(at)
    return at
