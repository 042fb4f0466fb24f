"""``normvar contexts RUN TOKEN [--layer L] [--k 10]``: the sentences behind a token's point — its
most typical and most atypical sampled uses at a layer, by distance to μ(X_t)."""

from __future__ import annotations

import argparse

import numpy as np


def register(sub) -> None:
    from normvar_core.constants import MAX_SAMPLES_PER_TOKEN
    from normvar_core.numbers import Number
    from normvar_core.service.args import Count, add_data_dir

    p = sub.add_parser("contexts", help="a token's most typical and most atypical contexts at a layer")
    p.add_argument("run", help="run name or .duckdb path")
    p.add_argument("token", help="the token as the tokenizer writes it ('##ing', 'Ġthe') or without its prefix")
    p.add_argument(
        "--layer",
        type=Number("--layer", kind=int),
        default=None,
        help="hidden-state index (default: the middle stored layer)",
    )
    p.add_argument(
        "--k",
        type=Count("--k", 1, MAX_SAMPLES_PER_TOKEN, "a type keeps at most --samples-per-token contexts"),
        default=10,
        help="contexts shown at each end (default 10)",
    )
    add_data_dir(p)
    p.set_defaults(func=cmd_contexts)


def find_token(run, token: str) -> tuple[int, str]:
    """(token id, string) of ``token`` among the run's sampled tokens: the exact string first, else the
    one whose prefix-stripped string matches (footnote 7), the most frequent if several."""
    from normvar_core.errors import NormvarError
    from normvar_core.stats.analyses import strip_prefix

    sampled = run.sampled_tokens()
    if sampled.empty:
        raise NormvarError(
            f"run {run.name!r} keeps no sampled contexts", fix="recompute it with --samples-per-token > 0"
        )
    hit = sampled[
        (sampled["token"] == token) | (sampled["token_raw"] == token)
    ]  # as shown, or as the tokenizer writes it
    if hit.empty:
        hit = sampled[[strip_prefix(t) == strip_prefix(token) for t in sampled["token"]]]
    if hit.empty:
        known = ", ".join(sampled.sort_values("count", ascending=False)["token"].head(12))
        raise NormvarError(
            f"no sampled contexts for token {token!r} in run {run.name!r}",
            fix=f"contexts are kept for App. A's tokens and the 50 most frequent, e.g. {known}",
        )
    n = run.tokens().set_index("token_id")["n"]
    best = max(hit["token_id"], key=lambda t: int(n.get(t, 0)))
    return int(best), str(hit.loc[hit["token_id"] == best, "token"].iloc[0])


def cmd_contexts(args: argparse.Namespace) -> int:
    from normvar_core.errors import NormvarError
    from normvar_core.runs.reader import open_run, resolve_run
    from normvar_core.stats.contexts import contexts, highlight
    from normvar_core.viz.depth import default_layer

    if args.k < 1:
        raise NormvarError(f"--k must be >= 1, got {args.k}", fix="e.g. --k 10")
    run = open_run(resolve_run(args.run, args.data_dir))
    if not run.has_contexts:
        raise NormvarError(
            f"run {run.name!r} was computed before samples kept their sentences",
            fix="recompute it (normvar compute ... --overwrite) to see contexts",
        )
    layer = default_layer(run.layers) if args.layer is None else args.layer
    if layer not in run.layers:
        raise NormvarError(f"layer {layer} is not stored in run {run.name!r}", fix=f"use one of {run.layers}")
    tid, tok = find_token(run, args.token)
    st = run.stats()
    li, col = st.layer(layer), int(np.searchsorted(st.token_ids, tid))
    smp = run.samples(layer, [tid])
    ctx = contexts(smp, st.mean[li, col], run.sentences(smp["sentence_id"].tolist()))
    print(
        f"{tok!r} in run {run.name}, layer {layer}: n_t = {int(st.n[col]):,}, Q = {st.q[li, col]:.4g}, "
        f"M = {st.m[li, col]:.4g}, V = {st.v[li, col]:.4g}; {len(ctx)} sampled contexts"
    )
    k = min(args.k, len(ctx))
    for title, part in (
        ("most typical (nearest to the mean)", ctx.head(k)),
        ("most atypical (farthest from the mean)", ctx.tail(k).iloc[::-1]),
    ):
        print(f"\n{title}:")
        for _, r in part.iterrows():
            text = highlight(r["sentence"], int(r["char_start"]), int(r["char_end"]))
            print(f"  {r['distance']:9.4f}  cos {r['cosine']:+.3f}  {text}")
    return 0
