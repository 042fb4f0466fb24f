"""Worker task "sentence" (LIT's "your own input"): run a published run's model on one typed sentence
and say, for each of its tokens and each of the run's layers, where that occurrence sits against its
type's statistics in the run — the distance ‖x − μ(X_t)‖ to the run's exact mean, its percentile
among the type's sampled uses at that layer, and its point (M(X_t), ‖x − μ(X_t)‖²) on the trade-off
(``stats.occurrence_rank``). The dashboard queues it (``JobStore.submit_sentence``) and reads the JSON this
writes; torch stays in the worker.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from normvar_core.destination import create_temp
from normvar_core.errors import NormvarError

MAX_CHARS = 1000
"""The longest sentence accepted (one forward pass on the worker's CPU or GPU)."""


def check_text(text: str) -> str:
    """The sentence, stripped; one clear error when it is empty or too long."""
    t = (text or "").strip()
    if not t:
        raise NormvarError("the sentence is empty", fix="type a sentence")
    if len(t) > MAX_CHARS:
        raise NormvarError(
            f"the sentence has {len(t)} characters, more than {MAX_CHARS}", fix=f"shorten it to {MAX_CHARS} characters"
        )
    return t


def hidden_states(run, text: str, data_dir=None):
    """(token ids (N,), token strings, character spans (N, 2), states (L_run, N, d) float64) of one
    forward pass of the run's model on ``text`` (all positions, special tokens included)."""
    import torch

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.models import load_model

    opts = run.meta.get("options") or {}
    cfg = RunConfig(
        model=str(run.meta.get("model")),
        revision=run.meta.get("revision"),
        device="cpu",
        gguf_file=opts.get("gguf_file"),
        trust_remote_code=False,
    )
    loaded = load_model(cfg, data_dir)
    want, have = run.meta.get("weights_hash"), loaded.info.weights_hash
    if want and have and want != have:
        raise NormvarError(
            f"the installed model {cfg.model!r} is not the one run {run.name!r} was computed with (its weights differ)",
            fix="install the run's model version, or compute the run again",
        )
    tok = loaded.tokenizer
    enc = tok(
        text, return_offsets_mapping=True, truncation=True, max_length=loaded.info.max_length, return_tensors="pt"
    )
    offsets = enc.pop("offset_mapping")[0].numpy()
    with torch.inference_mode():
        hs = loaded.model(
            **{k: v for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")},
            output_hidden_states=True,
        ).hidden_states
    ids = enc["input_ids"][0].numpy().astype(np.int64)
    states = np.stack([hs[int(l)][0].double().numpy() for l in run.layers])
    return ids, tok.convert_ids_to_tokens(ids.tolist()), offsets, states


def occurrence_rows(run, ids, pieces, offsets, states) -> list[dict]:
    """One row per (token, layer): the occurrence against its type in ``run`` (``stats.occurrence_rank``)."""
    from normvar_core.stats.occurrence_rank import distance_percentile
    from normvar_core.stats.token_text import readable_token

    st = run.stats()
    col_of = {int(t): j for j, t in enumerate(st.token_ids)}
    rows = []
    for li, layer in enumerate(run.layers):
        smp = run.samples(int(layer), sorted({int(t) for t in ids if int(t) in col_of}))
        by_type = {int(t): np.stack(g["vector"].to_numpy()) for t, g in smp.groupby("token_id")} if len(smp) else {}
        for p, (tid, piece) in enumerate(zip(ids, pieces)):
            j = col_of.get(int(tid))
            x = states[li, p]
            row = {
                "position": p,
                "token": readable_token(str(piece)),
                "token_raw": str(piece),
                "token_id": int(tid),
                "layer": int(layer),
                "char_start": int(offsets[p][0]),
                "char_end": int(offsets[p][1]),
                "norm_sq": float(x @ x),
            }
            if j is None:
                row.update(n=0, n_samples=0, distance=None, percentile=None, m=None, v=None, q=None, dist_sq=None)
            else:
                ref = by_type.get(int(tid), np.zeros((0, x.size)))
                d, pct = distance_percentile(x, st.mean[li, j], ref)
                row.update(
                    n=int(st.n[j]),
                    n_samples=int(len(ref)),
                    distance=d,
                    percentile=None if not np.isfinite(pct) else pct,
                    m=float(st.m[li, j]),
                    v=float(st.v[li, j]),
                    q=float(st.q[li, j]),
                    dist_sq=d * d,
                )
            rows.append(row)
    return rows


def write_sentence(run_path: str, text: str, out: Path, data_dir=None, progress=None) -> Path:
    """The task: the rows above and the sentence as JSON at ``out`` (temp file + rename); phases
    read (the run), forward (load the model, one forward pass), compare (percentiles), write."""
    from normvar_core.runs.reader import open_run

    report = progress or (lambda *a, **k: None)
    text = check_text(text)
    report("read", 0, 1, "runs", Path(run_path).stem)
    run = open_run(run_path)
    if run.meta.get("unit") == "word":
        raise NormvarError(
            f"run {run.name!r} counts words (App. J), not tokens", fix="pick a token run for your own sentence"
        )
    if str(run.meta.get("source") or "model") != "model":
        raise NormvarError(f"run {run.name!r} is a Gaussian null, not a model's run", fix="pick the model's run")
    report("forward", 0, 1, "steps", "load the model and run the sentence")
    ids, pieces, offsets, states = hidden_states(run, text, data_dir)
    report("compare", 0, 1, "steps", f"{len(ids)} tokens against the run's statistics")
    doc = {
        "run": run.name,
        "text": text,
        "layers": [int(l) for l in run.layers],
        "rows": occurrence_rows(run, ids, pieces, offsets, states),
    }
    report("write", 0, 1, "files", out.name)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = create_temp(out.with_name(f".{out.name}.tmp-{os.getpid()}"), what="the result's temp file")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, out)
    return out


def read_result(path) -> dict:
    """The JSON written by ``write_sentence``."""
    return json.loads(Path(path).read_text())


__all__ = ["MAX_CHARS", "check_text", "hidden_states", "occurrence_rows", "write_sentence", "read_result"]
