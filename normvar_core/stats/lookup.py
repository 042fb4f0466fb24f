"""Token lookup as the tokenizer sees it, and suggestions when a query is not a type of the run.

``find_type`` tries, in order: the query as typed; the query normalised as the model's tokenizer
normalises text (e.g. lowercased and accent-stripped for an uncased BERT — the ``normalise`` callable,
built from the tokenizer's files by ``runs.tokenizer_files``); then either of them without a sub-word
marker (fn. 7: "##ing", "Ġing", "▁ing" and "ing"). ``suggest`` ranks the run's types by
(not a prefix match, Levenshtein distance, −n_t) against the normalised query.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from normvar_core.stats.analyses import strip_prefix


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions, each 1)."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def find_type(tokens: pd.DataFrame, query: str, normalise: Callable[[str], str] | None = None) -> pd.DataFrame:
    """Rows of ``tokens`` (DataFrame[token_id, token, n]) matching ``query``, most frequent first;
    empty when none does."""
    forms = [query.strip()]
    if normalise is not None:
        forms.append(normalise(query.strip()))
    names = tokens["token"].astype(str)
    for form in dict.fromkeys(forms):
        hit = tokens[names == form]
        if len(hit):
            return hit.sort_values("n", ascending=False)
    stripped = names.map(strip_prefix)
    for form in dict.fromkeys(strip_prefix(f) for f in forms):
        hit = tokens[stripped == form]
        if len(hit):
            return hit.sort_values("n", ascending=False)
    return tokens.iloc[0:0]


def suggest(
    tokens: pd.DataFrame,
    query: str,
    normalise: Callable[[str], str] | None = None,
    k: int = 8,
    max_distance: int | None = None,
) -> pd.DataFrame:
    """The ``k`` types nearest to the (normalised, marker-stripped) query: prefix matches first, then by
    edit distance, then the more frequent. Returns ``tokens``' rows plus ``distance`` and ``prefix``."""
    q = strip_prefix(normalise(query.strip()) if normalise else query.strip())
    if not q or tokens.empty:
        return tokens.iloc[0:0].assign(distance=[], prefix=[])
    names = [strip_prefix(str(t)) for t in tokens["token"]]
    # cheap length filter before the O(len²) distance
    limit = max_distance if max_distance is not None else max(2, len(q) // 2)
    lengths = np.fromiter((len(s) for s in names), dtype=np.int64, count=len(names))
    prefix = np.array([bool(s) and (s.startswith(q) or q.startswith(s) and len(s) >= 3) for s in names])
    near = np.abs(lengths - len(q)) <= limit
    idx = np.flatnonzero(prefix | near)
    dist = np.array([levenshtein(q, names[i]) for i in idx], dtype=np.int64)
    keep = prefix[idx] | (dist <= limit)
    idx, dist = idx[keep], dist[keep]
    out = tokens.iloc[idx].assign(distance=dist, prefix=prefix[idx])
    out = out.sort_values(["prefix", "distance", "n"], ascending=[False, True, False], kind="stable")
    return out.head(int(k)).reset_index(drop=True)


def split_note(pieces: Sequence[str]) -> str:
    """'licen' + '##se' as one readable line (how the tokenizer splits a word into types)."""
    return " + ".join(repr(p) for p in pieces)


__all__ = ["levenshtein", "find_type", "suggest", "split_note"]
