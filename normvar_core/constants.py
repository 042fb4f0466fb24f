"""The study's constants, in one place (Yamagiwa & Shimodaira 2024, ../shared/seeds/002).

Every module that needs one of these imports it from here; nothing else hard-codes them.
"""

from __future__ import annotations

STUDY_BAND: tuple[float, float] = (10.0, 1e5)
"""§5.3: corpus-level values and regressions over types with 10 <= n_t <= 1e5 (1 <= log10 n_t <= 5)."""
STUDY_BAND_LOG10: tuple[float, float] = (1.0, 5.0)
"""The same band in log10 n_t, as the dashboard's band slider shows it."""
MAX_WORDS = 64
"""§5.1: sentences with fewer than 64 whitespace-separated words are kept."""
SAMPLE_FRAC = 0.01
"""§5.1: the study's 1 % sample of BookCorpus (seed 0)."""
APP_A_MIN_CHARS = 3
"""App. A: sampled tokens have at least 3 characters once the '##'/'Ġ'/'▁' prefix is stripped."""
APP_A_BINS = 10
"""App. A: one token per log10 n_t bin, 10 bins over the band."""
SAMPLES_TOP_TYPES = 50
"""Fig. 1: the most frequent types always get PCA samples."""
SAMPLES_PER_TOKEN = 200
"""Reservoir size of raw embeddings per (layer, sampled type) for the PCA clouds."""
FREQ_BIN = 0.1
"""Width of the log10 n_t bins of the frequency histogram (Fig. 10)."""
UNK_FLAG = 0.05
"""A run whose counted positions are more than 5 % unknown tokens is flagged (wrong tokenizer?)."""
ID_SAMPLE = 16384
"""Razzhigaev et al. §2.4: TwoNN on a uniform sample of embeddings per layer, min(|X|, --id-sample), whatever the run's
size."""
TWONN_BATCH = 4096
"""Razzhigaev et al. §2.4: TwoNN and the batch anisotropy on batches of at least 4,096 embeddings (the rest joins the
last batch), mean ± std over batches."""


MAX_ID_SAMPLE = 1 << 20
"""The largest --id-sample accepted: 64x Razzhigaev et al.'s 16,384 (the sample is held per layer, L x K x d floats)."""
MAX_RESAMPLES = 100_000
"""The most bootstrap resamples ``findings`` accepts: 100x the default 1,000, whose percentile endpoints already
move by less than their last printed digit between seeds; each resample costs a pass over the types."""
MAX_SAMPLES_PER_TOKEN = 100_000
"""The most raw embeddings kept per (layer, sampled type) (the PCA clouds show a few hundred)."""
MAX_WORKERS = 256
"""The most Ray actors a run asks for (each holds a whole model); fewer where the cluster has fewer GPUs or cores."""


def id_sample_size(requested: int, n_embeddings: int) -> int:
    """The TwoNN sample of a run with ``n_embeddings`` counted positions per layer: min(n, --id-sample)."""
    return int(min(requested, n_embeddings)) if requested > 0 else 0


NULL_KINDS = ("isotropic", "offset", "matched")
"""The Gaussian-geometry comment's Gaussian nulls (drawn by ``stats.null``): isotropic N(0, s²I) with s² = Q(X)/d;
offset N(c, s²I)
with ‖c‖² = M(X), s² = V(X)/d; matched N(μ(X_t), V(X_t)/d · I) per type t."""


OCCURRENCES = 1_000_000
"""The Occurrences page: at most this many occurrences per layer kept with their coordinates on the
layer's principal axes (``--occurrences``; every occurrence when the run has fewer, a seeded uniform sample else)."""
OCCURRENCES_MAX = 20_000_000
"""The largest ``--occurrences`` accepted (20M points x 8 float32 coordinates x a layer = 640 MB)."""
OCCURRENCE_AXES = 8
"""k: the early principal axes each kept occurrence is projected on during the pass (estimated before it from
``OCCURRENCE_EARLY`` positions); at publish the page's two axes are the exact top-2 covariance
axes rotated into that k-dimensional subspace (the angle left is recorded per layer)."""
OCCURRENCE_EARLY = 32768
"""Positions the early axes are estimated from: whole batches spread over the plan (van der Corput order: the
first, the middle, the quarters, ...; the plan's batches are sorted by length), at least one. Measured on MiniLM
(1,500 novel sentences): the first batch alone (10k positions) left 13-29 degrees between the exact top-2 axes
and the k = 8 subspace, 34k positions 2.6-4 degrees."""

CHECKPOINT_EVERY_S = 60.0
"""A foreground compute's and the worker's periodic checkpoint interval at the least (an interrupt saves at once)."""

CHECKPOINT_COST_SHARE = 0.03
"""A periodic save is due no sooner than 1 / CHECKPOINT_COST_SHARE times the last save's duration after it: the
periodic checkpoints cost at most about 3 % of the run's wall time, whatever the state's size."""

DISK_WRITE_BYTES_PER_S = 200 * 10**6
"""The disk write rate the plan assumes for a checkpoint (``normvar plan``'s cadence: max(CHECKPOINT_EVERY_S,
bytes / rate / CHECKPOINT_COST_SHARE)). Measured: a 20,000-sentence MiniLM run's 1.1 GB state saved in 3.5–5.6 s
(200–310 MB/s); the slower end, so the plan's interval is never shorter than the run's."""
