"""Filter, sample and cap sentences as they stream past; memory grows with the kept ones only.

``Selection(cfg)`` takes records (lines, paragraphs' sentences or table cells) in file order,
in batches of any size, and applies the rule of ``normvar_core.pipeline.corpus.read``: strip; drop
empty records; a record is *short* when it has fewer than ``max_words`` whitespace words
(0 = no limit); it is *drawn* when its uniform from ``numpy.random.default_rng(seed)`` (one
draw per non-empty record, in file order) is below ``sample_frac``; short and drawn records are
kept up to ``max_sentences``, later ones are counted as capped.

The uniforms are drawn batch by batch from one Generator. PCG64 ``random(k)`` consumes one
64-bit output per double, so the concatenated batches equal ``rng.random(total)`` drawn at
once: the sample is the one the whole-file reader took, without knowing the count in advance.
For the same reason a share of the file that starts after ``skip`` non-empty records draws its
uniforms from the generator advanced by ``skip`` (``PCG64.advance``): the whole file's draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus.stream import word_count


@dataclass
class CorpusText:
    """The sentences of a run and how they were selected (``sentence_lengths``: Fig 9).
    n_read = n_empty + n_too_long + n_sampled_out + n_capped + n_kept."""

    sentences: list[str]
    name: str
    path: Path
    sha256: str
    n_read: int
    n_kept: int
    n_too_long: int
    n_empty: int
    n_sampled_out: int
    n_capped: int = 0
    sentence_lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    text_column: str | None = None
    format: str = ".txt"
    n_not_text: int = 0  # cells of a JSONL text column that were not strings (numbers ...): skipped, in n_empty
    n_null: int = 0  # cells of a JSONL text column that were null or missing: skipped, in n_empty
    too_long: list[str] = field(default_factory=list)
    """The first ``KEEP_TOO_LONG`` sentences dropped for having ``max_words`` words or more (each cut
    to ``TOO_LONG_CHARS`` characters): shown on the Runs page so the limit's effect can be read."""
    dataset: dict | None = None
    """A ``--dataset`` corpus's provenance (``corpus.dataset``): id, kind, config, split, revision, and its
    fingerprint, Hub commit or files' sha256."""


KEEP_TOO_LONG = 20
TOO_LONG_CHARS = 400


class Selection:
    """The running selection of one corpus pass (see the module docstring)."""

    def __init__(self, cfg: RunConfig, *, skip: int = 0, capped: bool = True):
        """``skip``: non-empty records before these (a later share of the file: the generator is
        advanced past their uniforms); ``capped=False``: no ``max_sentences`` cap (a share's is applied
        by the driver, which knows what the shares before it kept)."""
        self.max_words = int(cfg.max_words)
        self.frac = float(cfg.sample_frac)
        self.cap = None if cfg.max_sentences is None or not capped else int(cfg.max_sentences)
        self._rng = np.random.default_rng(cfg.seed) if self.frac < 1.0 else None
        if self._rng is not None and skip:
            self._rng.bit_generator.advance(int(skip))  # type: ignore[attr-defined]  # PCG64 has advance()
        self.kept: list[str] = []
        self.word_blocks: list[np.ndarray] = []  # the kept sentences' word counts, one block per ``add``
        self.n_read = self.n_empty = self.n_too_long = self.n_sampled_out = self.n_capped = 0
        self.too_long: list[str] = []
        self.n_not_text = self.n_null = 0

    def add(self, records: list[str]) -> None:
        """Select from the next ``records`` (in file order)."""
        stripped = [r.strip() for r in records]
        at = [i for i, s in enumerate(stripped) if s]
        nonempty = [stripped[i] for i in at]
        self.n_read += len(stripped)
        self.n_empty += len(stripped) - len(nonempty)
        if not nonempty:
            return
        # the whole record's words (an over-long line's counted as it streamed: ``stream.LongLine``)
        words = np.fromiter((word_count(records[i]) for i in at), dtype=np.int64, count=len(nonempty))
        short = words < self.max_words if self.max_words > 0 else np.ones(len(nonempty), bool)
        drawn = self._rng.random(len(nonempty)) < self.frac if self._rng is not None else np.ones(len(nonempty), bool)
        self.n_too_long += int((~short).sum())
        if len(self.too_long) < KEEP_TOO_LONG and not short.all():
            for i in np.flatnonzero(~short)[: KEEP_TOO_LONG - len(self.too_long)]:
                text = nonempty[i]
                cut = text if len(text) <= TOO_LONG_CHARS else text[:TOO_LONG_CHARS] + " …"
                self.too_long.append(f"[{int(words[i])} words] {cut}")
        self.n_sampled_out += int((short & ~drawn).sum())
        picked = np.flatnonzero(short & drawn)
        if self.cap is not None:
            room = max(self.cap - len(self.kept), 0)
            self.n_capped += max(len(picked) - room, 0)
            picked = picked[:room]
        self.kept.extend(nonempty[i] for i in picked)
        self.word_blocks.append(words[picked])

    def word_lengths(self) -> np.ndarray:
        """The word count of each kept sentence, in order (int64)."""
        return np.concatenate(self.word_blocks) if self.word_blocks else np.zeros(0, np.int64)

    def result(
        self, *, name: str, path: Path, sha256: str, fmt: str, column: str | None, dataset: dict | None = None
    ) -> CorpusText:
        """The selection as a ``CorpusText``; a ``NormvarError`` when nothing is left."""
        n_text = self.n_read - self.n_empty
        if n_text == 0:
            raise NormvarError(f"corpus {path.name} holds no text", fix="pass a file with one sentence a line")
        if not self.kept:
            raise NormvarError(
                f"no sentences left after filtering {path.name}: {n_text} read, {self.n_too_long} with "
                f">= {self.max_words} words, {self.n_sampled_out} sampled out",
                fix="raise --max-words (0 = no limit) or --sample-frac",
            )
        lengths = self.word_lengths()
        return CorpusText(
            sentences=self.kept,
            name=name,
            path=path,
            sha256=sha256,
            n_read=self.n_read,
            n_kept=len(self.kept),
            n_too_long=self.n_too_long,
            n_empty=self.n_empty,
            n_sampled_out=self.n_sampled_out,
            n_capped=self.n_capped,
            sentence_lengths=lengths,
            text_column=column,
            format=fmt,
            too_long=list(self.too_long),
            n_not_text=self.n_not_text,
            dataset=dataset,
            n_null=self.n_null,
        )
