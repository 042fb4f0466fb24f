"""Stage 1 — the plan: corpus -> sentences -> token batches -> counts -> sample plan.

Everything here depends only on the corpus, the tokenizer and the options, never on a forward
pass, so the plan is the same in every process that builds it: shards of a run (batch ranges) and
resumed runs see the same batches in the same order. Token counts n_t (eq. 2) are known before
any hidden state exists, which sizes the measures once and lets the PCA samples be chosen up
front (``samples.plan_samples``) and copied out of the one main pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from normvar_core.config import RunConfig
from normvar_core.constants import id_sample_size
from normvar_core.errors import NormvarError
from normvar_core.pipeline.batches import Batch, PaddedBatches, auto_max_tokens, batch_sizes, batches_from, counted_mask
from normvar_core.pipeline.corpus.select import CorpusText
from normvar_core.pipeline.encoding import wrap_tokens
from normvar_core.pipeline.encoding_cache import encode_cached
from normvar_core.pipeline.sample_plan import (
    SamplePlan,
    char_spans,
    choose_tokens,
    count_tokens,
    plan_samples,
    plan_uniform,
    unknown_spans,
    word_token_counts,
)


@dataclass
class RunPlan:
    """The deterministic work of a run. ``layers``: hidden-state indices kept (ascending);
    ``token_ids``/``counts``: the counted types and their n_t; ``tokens``: id -> string."""

    cfg: RunConfig
    sentences: list[str]
    batches: PaddedBatches | list[Batch]
    """The batches: ``PaddedBatches`` (``make_plan``, each built from the flat encoding when asked for), or the
    built ``Batch`` list of a ``synthetic_plan``."""
    layers: list[int]
    max_length: int
    n_truncated: int
    token_ids: np.ndarray
    counts: np.ndarray
    tokens: dict
    samples: SamplePlan
    """The PCA samples' picks (``sample_plan.plan_samples``; empty with ``--samples-per-token 0``)."""
    uniform: SamplePlan | None = None
    """The seeded uniform sample of positions for TwoNN (``sample_plan.plan_uniform``; keys in token_ids; size 0
    without the layer geometry)."""
    sentence_lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    corpus_notes: dict = field(default_factory=dict)
    corpus_name: str = ""
    corpus_sha256: str = ""
    unk_share: float = 0.0
    """Share of counted positions that are the tokenizer's unknown token (flagged above UNK_FLAG)."""
    unk_share_text: float = 0.0
    """Share of the counted non-special positions ([CLS], <s>, padding left out) that are unknown."""
    word_tokens: np.ndarray | None = None
    """Word runs (App. J): |T_w|, the mean number of tokens per occurrence of each type (aligned with token_ids)."""

    @property
    def unit(self) -> str:
        return self.cfg.unit

    @property
    def n_batches(self) -> int:
        return len(self.batches)

    @property
    def total_embeddings(self) -> int:
        """|X| per layer: the number of counted positions."""
        return int(self.counts.sum())

    def counted_before(self, stop: int) -> int:
        """Counted positions per layer in batches [0, stop) (``batches.counted_mask``, one batch at a time): what a
        run resumed at batch ``stop`` has counted."""
        return sum(int(counted_mask(self.batches[i], **self.exclusions).sum()) for i in range(stop))

    @property
    def exclusions(self) -> dict:
        return dict(exclude_special=self.cfg.exclude_special, exclude_position0=self.cfg.exclude_position0)

    def sentences_done_at(self) -> np.ndarray:
        """Sentences finished after each batch (for progress)."""
        return np.cumsum(batch_sizes(self.batches))

    def fingerprint(self) -> dict:
        """What must match for a checkpoint or a shard to belong to this plan."""
        config = {
            k: v for k, v in self.cfg.to_dict().items() if k != "memory_gb"
        }  # which measures fit, not their values
        return {
            "config": config,
            "n_batches": self.n_batches,
            "corpus_sha256": self.corpus_sha256,
            "total_embeddings": self.total_embeddings,
            "n_samples": self.samples.size,
            "n_uniform": self.uniform.size if self.uniform is not None else 0,
        }


def kept_layers(cfg: RunConfig, num_hidden_states: int) -> list[int]:
    """The hidden-state indices a run keeps (all by default); out of range is a NormvarError."""
    layers = list(range(num_hidden_states)) if cfg.layers is None else sorted(set(int(x) for x in cfg.layers))
    bad = [x for x in layers if x >= num_hidden_states]
    if bad:
        raise NormvarError(
            f"layer(s) {bad} do not exist: the model has hidden states 0..{num_hidden_states - 1}",
            fix=f"use --layers with indices below {num_hidden_states}",
        )
    return layers


def check_max_length(cfg: RunConfig, limit: int) -> None:
    """``--max-length`` within the model's limit of ``limit`` tokens (a NormvarError otherwise)."""
    if cfg.max_length is not None and cfg.max_length > limit:
        raise NormvarError(
            f"--max-length {cfg.max_length} exceeds the model's limit of {limit} tokens",
            fix=f"use --max-length {limit} or less",
        )


def corpus_of(sentences: list[str], *, name: str = "", sha256: str = "") -> CorpusText:
    """An in-memory corpus of ``sentences`` as they are (tests, benchmarks): every one kept, nothing read."""
    n = len(sentences)
    return CorpusText(
        sentences=list(sentences),
        name=name,
        path=Path(name or "."),
        sha256=sha256,
        n_read=n,
        n_kept=n,
        n_too_long=0,
        n_empty=0,
        n_sampled_out=0,
    )


def make_plan(
    cfg: RunConfig,
    corpus: CorpusText,
    tokenizer,
    *,
    num_hidden_states: int,
    max_length: int,
    device_type: str = "cpu",
    encode=None,
    cache: Path | None = None,
    spans: bool = True,
) -> RunPlan:
    """Tokenize ``corpus.sentences`` into length-sorted batches, count n_t, choose the samples (``corpus_of``
    makes a corpus of sentences in memory).
    ``encode(sentences, max_length=, unit=)``: the tokenization (default ``encoding.encode_sentences``
    with ``tokenizer``; the Ray executor spreads it over its actors, ``corpus_shares``). ``cache``: a folder where the
    default tokenization is kept and read back (``encoding_cache``: the same arrays, not tokenized again).
    ``spans=False`` (``normvar plan``, which writes no sample): the samples' character spans left unknown (-1,
    ``sample_plan.unknown_spans``: arrays of the same size and dtype, so the plan's bytes are the same) instead of
    tokenizing the sampled sentences again for their offsets."""
    sentences = list(corpus.sentences)
    if not sentences:
        raise NormvarError(
            "no sentences left after filtering the corpus",
            fix="check the corpus, --max-words, --sample-frac and --max-sentences",
        )
    layers = kept_layers(cfg, num_hidden_states)
    check_max_length(cfg, max_length)
    max_length = int(cfg.max_length or max_length)
    words = cfg.unit == "word"
    if encode is None:
        enc = encode_cached(sentences, tokenizer, max_length=max_length, unit=cfg.unit, folder=cache)
    else:
        enc = encode(sentences, max_length=max_length, unit=cfg.unit)
    batch_list = batches_from(enc, tokenizer, batch_size=cfg.batch_size, max_tokens=auto_max_tokens(device_type))
    n_truncated = enc.n_truncated
    excl = dict(exclude_special=cfg.exclude_special, exclude_position0=cfg.exclude_position0)
    ids, n = count_tokens(batch_list, **excl)
    if int(n.sum()) == 0:
        raise NormvarError(
            "no embeddings to count: every position is excluded",
            fix="drop --exclude-special/--exclude-position0 or use longer sentences",
        )
    if words:
        strings = [enc.words[int(i)] for i in ids]  # type: ignore[index]  # words are kept with word ids
    else:
        strings = [str(t) for t in tokenizer.convert_ids_to_tokens([int(i) for i in ids])]
    enc.words = None  # the batches keep the flat encoding; the word strings are in `strings` now
    chosen = choose_tokens(ids, n, strings, seed=cfg.seed) if cfg.samples_per_token else np.zeros(0, np.int64)
    unk = getattr(tokenizer, "unk_token_id", None)
    unk_n = int(n[ids == unk].sum()) if unk is not None and not words else 0
    unk_text = check_unknown_share(cfg, tokenizer, ids, n, unk_n)
    sample_plan = plan_samples(batch_list, chosen, per_token=cfg.samples_per_token, seed=cfg.seed, **excl)
    uniform = plan_uniform(batch_list, size=uniform_size(cfg, int(n.sum())), seed=cfg.seed, **excl)
    if not spans:
        unknown_spans(sample_plan)
    else:
        char_spans(
            sample_plan,
            sentences,
            tokenizer,
            wrapped=wrap_tokens(tokenizer)[0] is not None,
            words=words,
            max_length=max_length,
        )
    word_tokens = word_token_counts(batch_list, ids, n, **excl) if words else None
    return RunPlan(
        cfg=cfg,
        sentences=sentences,
        batches=batch_list,
        layers=layers,
        max_length=max_length,
        n_truncated=int(n_truncated),
        token_ids=ids,
        counts=n,
        tokens=dict(zip((int(i) for i in ids), strings)),
        samples=sample_plan,
        uniform=uniform,
        sentence_lengths=np.asarray(corpus.sentence_lengths, np.int64),
        corpus_notes=corpus_notes(corpus),
        corpus_name=corpus.name,
        corpus_sha256=corpus.sha256,
        unk_share=unk_n / max(int(n.sum()), 1),
        unk_share_text=unk_text,
        word_tokens=word_tokens,
    )


def tokenized_cache(data_dir=None) -> Path | None:
    """The folder of the data directory where ``make_plan`` keeps the corpus's tokenization (``encoding_cache``):
    ``cache/tokenized``, created when first written; None when $NORMVAR_TOKEN_CACHE is 0 (never kept)."""
    import os

    from normvar_core.datadir import DataDir

    if os.environ.get("NORMVAR_TOKEN_CACHE", "1").strip() in ("0", "false", "no", "off"):
        return None
    return DataDir.at(data_dir).root / "cache" / "tokenized"


def uniform_size(cfg: RunConfig, total: int) -> int:
    """K of the seeded uniform sample (TwoNN and Razzhigaev et al.'s batches): ``id_sample_size(--id-sample, |X|)``
    with the
    layer geometry, else 0."""
    return id_sample_size(cfg.id_sample, total) if cfg.geometry else 0


UNKNOWN_REFUSE = 0.5  # above this share of non-special tokens, the corpus is refused without --allow-unknown


def check_unknown_share(cfg, tokenizer, ids: np.ndarray, n: np.ndarray, unk_n: int) -> float:
    """u = n(unknown) / n(non-special) over the counted positions (the tokenizer's special tokens other
    than its unknown token left out). u > UNKNOWN_REFUSE refuses the run (the model cannot read the
    text: every statistic would be about one [UNK] type) unless ``cfg.allow_unknown``; returns u."""
    if not unk_n:
        return 0.0
    unk = tokenizer.unk_token_id
    special = [int(i) for i in (getattr(tokenizer, "all_special_ids", None) or []) if int(i) != unk]
    text_n = int(n[~np.isin(ids, special)].sum())
    share = unk_n / max(text_n, 1)
    if share > UNKNOWN_REFUSE and not cfg.allow_unknown:
        raise NormvarError(
            f"{share:.0%} of the corpus's tokens are the tokenizer's unknown token "
            f"{tokenizer.unk_token!r}: the model cannot read this text",
            fix="use a model whose vocabulary covers it, or pass --allow-unknown to compute it anyway",
        )
    return float(share)


def corpus_notes(corpus: CorpusText) -> dict:
    """How the sentences were selected (the run row's notes.corpus)."""
    out: dict[str, Any] = {}
    for k, v in (
        ("path", corpus.path),
        ("format", corpus.format),
        ("text_column", corpus.text_column),
        ("n_read", corpus.n_read),
        ("n_kept", corpus.n_kept),
        ("n_too_long", corpus.n_too_long),
        ("n_empty", corpus.n_empty),
        ("n_sampled_out", corpus.n_sampled_out),
        ("n_capped", corpus.n_capped),
        ("n_not_text", corpus.n_not_text),
        ("n_null", corpus.n_null),
    ):
        if v is not None:
            out[k] = v if isinstance(v, (int, float, str, bool)) else str(v)
    if corpus.too_long:
        out["too_long_examples"] = [str(x) for x in corpus.too_long]
    if corpus.dataset:
        out["dataset"] = dict(corpus.dataset)  # the run row's ``dataset`` column (``publish.run_record``)
    return out


def synthetic_plan(
    cfg: RunConfig,
    *,
    n_sentences: int,
    vocab_size: int,
    layers: list[int],
    seed: int = 0,
    min_len: int = 3,
    max_len: int = 24,
    batch_size: int = 16,
    zipf: float = 1.2,
) -> RunPlan:
    """A plan over random "sentences" of Zipf-distributed token ids (no tokenizer, no corpus): for
    synthetic state sources in tests and benchmarks. Batches are right-padded, no special tokens."""
    import torch

    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, max_len + 1, size=n_sentences)
    ranks = np.arange(1, vocab_size + 1, dtype=np.float64)
    p = ranks**-zipf
    p /= p.sum()
    seqs = [rng.choice(vocab_size, size=int(k), p=p).astype(np.int64) for k in lengths]
    order = np.argsort(-lengths, kind="stable")
    batch_list = []
    for a in range(0, n_sentences, batch_size):
        g = order[a : a + batch_size]
        width = int(lengths[g].max())
        ids = np.zeros((len(g), width), np.int64)
        am = np.zeros((len(g), width), np.int64)
        for r, i in enumerate(g):
            ids[r, : lengths[i]] = seqs[i]
            am[r, : lengths[i]] = 1
        batch_list.append(
            Batch(
                g.astype(np.int64),
                torch.from_numpy(ids),
                torch.from_numpy(am),
                torch.zeros((len(g), width), dtype=torch.bool),
                "right",
            )
        )
    excl = dict(exclude_special=cfg.exclude_special, exclude_position0=cfg.exclude_position0)
    tok_ids, n = count_tokens(batch_list, **excl)
    strings = [f"t{int(i)}" for i in tok_ids]
    chosen = choose_tokens(tok_ids, n, strings, seed=cfg.seed) if cfg.samples_per_token else np.zeros(0, np.int64)
    return RunPlan(
        cfg=cfg,
        sentences=[" ".join(f"t{t}" for t in s) for s in seqs],
        batches=batch_list,
        layers=list(layers),
        max_length=max_len,
        n_truncated=0,
        token_ids=tok_ids,
        counts=n,
        tokens=dict(zip((int(i) for i in tok_ids), strings)),
        samples=plan_samples(batch_list, chosen, per_token=cfg.samples_per_token, seed=cfg.seed, **excl),
        uniform=plan_uniform(batch_list, size=uniform_size(cfg, int(n.sum())), seed=cfg.seed, **excl),
        sentence_lengths=lengths.astype(np.int64),
        corpus_name="synthetic",
        corpus_sha256=f"synthetic-{seed}-{n_sentences}-{vocab_size}",
    )


__all__ = ["RunPlan", "make_plan", "synthetic_plan", "kept_layers", "corpus_notes", "uniform_size", "corpus_of"]
