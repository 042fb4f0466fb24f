"""The contexts behind a token's point (the token explorer): its sampled occurrences at a layer,
ordered by their distance to the type's exact mean μ(X_t) — the most typical uses first, the most
atypical last — with the Euclidean distance ‖x − μ(X_t)‖ and the cosine between x and μ(X_t).
The study's claim (§5) is about exactly this spread: V(X_t) = E‖x − μ(X_t)‖² (eq. 6)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def contexts(samples: pd.DataFrame, mean: np.ndarray, sentences: dict[int, str]) -> pd.DataFrame:
    """``samples``: one token's rows of ``Run.samples(layer)``; ``mean``: μ(X_t) at that layer.
    Returns DataFrame[i, sentence_id, position, distance, cosine, sentence, char_start, char_end],
    nearest to the mean first."""
    if samples.empty:
        return pd.DataFrame(
            columns=["i", "sentence_id", "position", "distance", "cosine", "sentence", "char_start", "char_end"]
        )
    X = np.stack(samples["vector"].to_numpy()).astype(np.float64)
    mu = np.asarray(mean, dtype=np.float64)
    dist = np.linalg.norm(X - mu, axis=1)
    denom = np.linalg.norm(X, axis=1) * np.linalg.norm(mu)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(denom > 0, X @ mu / denom, np.nan)
    out = pd.DataFrame(
        {
            "i": samples["i"].to_numpy(),
            "sentence_id": samples["sentence_id"].to_numpy(),
            "position": samples["position"].to_numpy(),
            "distance": dist,
            "cosine": cos,
            "sentence": [sentences.get(int(s), "") for s in samples["sentence_id"]],
            "char_start": samples.get("char_start", pd.Series(-1, index=samples.index)).to_numpy(),
            "char_end": samples.get("char_end", pd.Series(-1, index=samples.index)).to_numpy(),
        }
    )
    return out.sort_values(["distance", "sentence_id", "position"], kind="stable").reset_index(drop=True)


def highlight(sentence: str, start: int, end: int, *, mark=("[[", "]]"), window: int | None = None) -> str:
    """The sentence with the token's characters wrapped in ``mark``; with ``window``, only about that
    many words around it (for hover text). An unknown span (-1) leaves the sentence as it is."""
    if not sentence:
        return ""
    if start is None or start < 0 or end <= start or end > len(sentence):
        words = sentence.split()
        return " ".join(words[:window]) + (" …" if window and len(words) > window else "") if window else sentence
    left, tok, right = sentence[:start], sentence[start:end], sentence[end:]
    if window:
        lw, rw = left.split(" "), right.split(" ")
        half = max(1, window // 2)
        left = ("… " if len(lw) > half else "") + " ".join(lw[-half:])
        right = " ".join(rw[:half]) + (" …" if len(rw) > half else "")
    return f"{left}{mark[0]}{tok}{mark[1]}{right}"


__all__ = ["contexts", "highlight"]
