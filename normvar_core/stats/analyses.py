"""The study's analyses as pure functions of a ``TokenStats``, each returning a tidy DataFrame.

Frequency bands follow §5.3: only types with n_min <= n_t <= n_max enter a regression or a
corpus-level value (the study: 1 <= log10 n_t <= 5, i.e. 10 .. 1e5).

* ``tradeoff``              C.V. of Q(X_t), OLS of V(X_t) on M(X_t) per layer (Fig. 2, 4, 8)
* ``frequency_regressions`` log10(1+Q|M|V) on log10 n_t per layer (Fig. 7, 11–13, 17)
* ``decomposition``         Q(X), M(X), V_W(X), V_B(X) and their ratios (eqs. 8–15; Fig. 5, 6, 18–20)
* ``histograms``            of Q, M, V at one layer (Fig. 14–16)
* ``select_tokens``         App. A's frequency-stratified token choice for Fig. 1
* ``merge_by_key``          exact pooling of types that share a key (e.g. "##ing" and "ing", fn. 7)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from normvar_core.constants import APP_A_BINS, APP_A_MIN_CHARS, STUDY_BAND
from normvar_core.stats.tokenstats import TokenStats, in_band

if TYPE_CHECKING:  # pandas is imported by the tables built here (``normvar plan`` only selects tokens)
    import pandas as pd

_PREFIXES = ("##", "Ġ", "▁", "␣")  # "␣": the readable word-initial space (``stats.token_text``)


def ols(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row-wise OLS of y on x (arrays (L, T)): slope, intercept, R^2 (NaN with < 2 points)."""
    if x.shape[1] < 2:
        nan = np.full(x.shape[0], np.nan)
        return nan, nan.copy(), nan.copy()
    xm = x.mean(1, keepdims=True)
    ym = y.mean(1, keepdims=True)
    dx, dy = x - xm, y - ym
    sxx = (dx * dx).sum(1)
    syy = (dy * dy).sum(1)
    sxy = (dx * dy).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = sxy / sxx
        r2 = sxy * sxy / (sxx * syy)
    intercept = ym[:, 0] - slope * xm[:, 0]
    return slope, intercept, r2


def tradeoff(stats: TokenStats, n_min: float = STUDY_BAND[0], n_max: float = STUDY_BAND[1]) -> pd.DataFrame:
    """Per layer over the band: n_types, C.V. of Q(X_t) (population std / mean, fn. 8),
    and the OLS line V(X_t) = slope * M(X_t) + intercept with its R^2 (Fig. 2, 4)."""
    import pandas as pd

    mask = stats.band(n_min, n_max)
    q, m, v = stats.q[:, mask], stats.m[:, mask], stats.v[:, mask]
    with np.errstate(invalid="ignore", divide="ignore"):
        cv = q.std(1) / q.mean(1) if mask.any() else np.full(stats.num_layers, np.nan)
    slope, intercept, r2 = ols(m, v)
    return pd.DataFrame(
        dict(layer=stats.layer_index, n_types=int(mask.sum()), cv_q=cv, slope=slope, intercept=intercept, r2=r2)
    )


def frequency_regressions(
    stats: TokenStats, n_min: float = STUDY_BAND[0], n_max: float = STUDY_BAND[1]
) -> pd.DataFrame:
    """Per layer and quantity Z in {Q, M, V}: OLS of log10(1 + Z(X_t)) on log10 n_t (Fig. 7, 11–13, 17)."""
    import pandas as pd

    mask = stats.band(n_min, n_max)
    x = np.broadcast_to(np.log10(stats.n[mask].astype(np.float64)), (stats.num_layers, int(mask.sum())))
    frames = []
    for name, arr in (("Q", stats.q), ("M", stats.m), ("V", stats.v)):
        slope, intercept, r2 = ols(x, np.log10(1.0 + arr[:, mask]))
        frames.append(
            pd.DataFrame(dict(layer=stats.layer_index, quantity=name, slope=slope, intercept=intercept, r2=r2))
        )
    return pd.concat(frames, ignore_index=True)


def decomposition(stats: TokenStats, n_min: float = STUDY_BAND[0], n_max: float = STUDY_BAND[1]) -> pd.DataFrame:
    """Corpus level per layer (eqs. 8–15): Q(X) = M(X) + V_W(X) + V_B(X), raw values (Fig. 19, 20)
    and the ratios M/Q, V/Q, V_W/Q, V_B/Q (Fig. 5, 18), V_W/V and V_B/V (Fig. 6, 20)."""
    df = stats.corpus(n_min, n_max)
    with np.errstate(invalid="ignore", divide="ignore"):
        for part in ("m", "v", "v_w", "v_b"):
            df[f"{part}_over_q"] = df[part] / df["q"]
        df["v_w_over_v"] = df["v_w"] / df["v"]
        df["v_b_over_v"] = df["v_b"] / df["v"]
    return df


def histograms(
    stats: TokenStats, layer: int, bins: int = 50, n_min: float = 1, n_max: float = math.inf, log10: bool = False
) -> pd.DataFrame:
    """Histograms of Q(X_t), M(X_t), V(X_t) at hidden-state index ``layer`` (Fig. 14–16);
    ``log10=True`` bins log10(1 + Z) as in App. F."""
    import pandas as pd

    li = stats.layer(layer)
    mask = stats.band(n_min, n_max)
    frames = []
    for name, arr in (("Q", stats.q), ("M", stats.m), ("V", stats.v)):
        vals = arr[li, mask]
        if log10:
            vals = np.log10(1.0 + vals)
        count, edges = np.histogram(vals, bins=bins)
        frames.append(pd.DataFrame(dict(quantity=name, left=edges[:-1], right=edges[1:], count=count)))
    return pd.concat(frames, ignore_index=True)


def token_table(stats: TokenStats, layer: int, tokens: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per type at hidden-state index ``layer``: token_id, token, n, log10_n, q, m, v."""
    import pandas as pd

    li = stats.layer(layer)
    tok = list(tokens) if tokens is not None else [str(t) for t in stats.token_ids]
    return pd.DataFrame(
        dict(
            token_id=stats.token_ids,
            token=tok,
            n=stats.n,
            log10_n=np.log10(stats.n.astype(np.float64)),
            q=stats.q[li],
            m=stats.m[li],
            v=stats.v[li],
        )
    )


def strip_prefix(token: str) -> str:
    """The study's key for a token (fn. 7): subword markers "##" (BERT), "Ġ" (GPT-2/RoBERTa)
    and "▁" (SentencePiece) removed, so "##ing" and "ing" share a key."""
    for p in _PREFIXES:
        if token.startswith(p):
            return token[len(p) :]
    return token


def select_tokens(
    stats: TokenStats,
    tokens: Sequence[str],
    n_min: float = STUDY_BAND[0],
    n_max: float = STUDY_BAND[1],
    min_chars: int = APP_A_MIN_CHARS,
    bins: int = APP_A_BINS,
    seed: int = 0,
) -> np.ndarray:
    """App. A's token selection for a TokenStats; see ``select_by_counts``."""
    return select_by_counts(
        stats.token_ids, stats.n, tokens, n_min=n_min, n_max=n_max, min_chars=min_chars, bins=bins, seed=seed
    )


def select_by_counts(
    token_ids: np.ndarray,
    n: np.ndarray,
    tokens: Sequence[str],
    n_min: float = STUDY_BAND[0],
    n_max: float = STUDY_BAND[1],
    min_chars: int = APP_A_MIN_CHARS,
    bins: int = APP_A_BINS,
    seed: int = 0,
) -> np.ndarray:
    """App. A: among types with n_min <= n_t <= n_max whose stripped string has >= ``min_chars``
    characters, cut [min log10 n_t, max log10 n_t] into ``bins`` equal intervals I_r and draw,
    without replacement and seeded, N_r = 2 + floor(sqrt(4 |T_r| / max_r |T_r|)) types from each
    T_r. Needs only the counts (known from tokenization). Returns the chosen ids, bin by bin."""
    token_ids = np.asarray(token_ids, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    tokens = list(tokens)
    if len(tokens) != token_ids.size or n.size != token_ids.size:
        raise ValueError("token_ids, n and tokens must align")
    keep = in_band(n, n_min, n_max) & np.array([len(strip_prefix(t).strip()) >= min_chars for t in tokens], dtype=bool)
    idx = np.flatnonzero(keep)
    if idx.size == 0:
        return np.empty(0, dtype=np.int64)
    logn = np.log10(n[idx].astype(np.float64))
    edges = np.linspace(logn.min(), logn.max(), bins + 1)
    r = np.clip(np.searchsorted(edges, logn, side="right") - 1, 0, bins - 1)  # last interval closed
    sizes = np.bincount(r, minlength=bins)
    rng = np.random.default_rng(seed)
    chosen = []
    for b in range(bins):
        members = idx[r == b]
        if members.size == 0:
            continue
        n_r = 2 + int(math.floor(math.sqrt(4 * sizes[b] / sizes.max())))
        pick = rng.choice(members, size=min(n_r, members.size), replace=False)
        chosen.extend(token_ids[np.sort(pick)].tolist())
    return np.asarray(chosen, dtype=np.int64)


def merge_by_key(stats: TokenStats, keys: Sequence) -> tuple[TokenStats, list]:
    """Pool the types that share a key, exactly: n_k = sum n_t, mu_k = sum n_t mu_t / n_k,
    S_k = sum_t [n_t V(X_t) + n_t ||mu_t - mu_k||^2] (the within/between split of eq. 24).
    ``keys`` aligns with ``stats.token_ids``; the result's token_ids are 0..K-1 indexing the
    returned key list (sorted)."""
    keys = list(keys)
    if len(keys) != stats.num_types:
        raise ValueError("keys must align with stats.token_ids")
    uniq, kidx = np.unique(np.asarray(keys, dtype=object).astype(str), return_inverse=True)
    K = uniq.size
    n = stats.n.astype(np.float64)
    n_k = np.bincount(kidx, weights=n, minlength=K)
    L, _, d = stats.mean.shape
    mean_k = np.zeros((L, K, d))
    s_k = np.zeros((L, K))
    for l in range(L):
        mu = stats.mean[l].astype(np.float64)
        np.add.at(mean_k[l], kidx, mu * n[:, None])
        mean_k[l] /= n_k[:, None]
        dev = mu - mean_k[l][kidx]
        contrib = n * stats.v[l] + n * np.einsum("td,td->t", dev, dev)
        s_k[l] = np.bincount(kidx, weights=contrib, minlength=K)
    merged = TokenStats.from_moments(
        np.arange(K, dtype=np.int64), n_k.round().astype(np.int64), mean_k, s_k, stats.layer_index.copy()
    )
    return merged, uniq.tolist()
