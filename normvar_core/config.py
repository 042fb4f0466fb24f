"""``RunConfig``: the one typed description of a run, shared by the CLI (``compute`` and
``submit``), the worker and the dashboard's upload page.

Unknown options are rejected (``RunConfig.from_dict``), every value is validated
(``validate``), and ``to_json`` stores everything needed to reproduce the run.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import Path
from dataclasses import dataclass, fields
from typing import Any

from normvar_core.constants import ID_SAMPLE, MAX_WORDS, SAMPLES_PER_TOKEN
from normvar_core.datadir import DEFAULT_CORPUS
from normvar_core.errors import NormvarError

DTYPES = ("float32", "bfloat16", "float16")
DEVICES = ("auto", "cpu", "cuda", "mps")
MEAN_DTYPES = ("float64", "float32")
SELF_SIMILARITY = ("auto", "on", "off")


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run. Defaults follow the study (§5.1): sentences with
    fewer than 64 words, every hidden state from the input embeddings (layer 0) to the last."""

    model: str = "minilm"
    """Offline alias (``normvar models``), Hugging Face model id, or local directory."""
    corpus: str = ""
    """Corpus file (.txt/.txt.gz one sentence a line, .jsonl, .csv, .parquet); '' = the shipped novels."""
    name: str | None = None
    """Run name (file DIR/<name>.duckdb); default: <model>__<corpus stem>."""
    revision: str | None = None
    gguf_file: str | None = None
    trust_remote_code: bool = False
    text_column: str | None = None
    split_sentences: bool = False
    max_words: int = MAX_WORDS
    """Keep sentences with fewer than this many whitespace words (the study: 64); 0 = no limit."""
    sample_frac: float = 1.0
    seed: int = 0
    max_sentences: int | None = None
    exclude_special: bool = False
    exclude_position0: bool = False
    max_length: int | None = None
    """Truncation length in tokens; default: the model's maximum."""
    batch_size: int | None = None
    """Sentences per forward pass; default: automatic."""
    device: str = "auto"
    dtype: str = "float32"
    """Forward-pass dtype (bf16/fp16 only on GPU); statistics are always accumulated in float64."""
    layers: tuple[int, ...] | None = None
    """Hidden-state indices to keep (0 = input embeddings); default all. Lowers memory."""
    mean_dtype: str = "float64"
    """Storage of per-type means: float64, or float32 (halves the largest table)."""
    samples_per_token: int = SAMPLES_PER_TOKEN
    """Reservoir size of raw embeddings kept per (layer, sampled token) for the PCA clouds."""
    geometry: bool = True
    """Layer geometry in the same pass: exact covariance spectrum, anisotropy, mean cosine, TwoNN, outlier dims."""
    id_sample: int = ID_SAMPLE
    """Embeddings per layer in the seeded uniform sample for TwoNN and seed 004's batch anisotropy."""
    self_similarity: str = "auto"
    """Per-type self-similarity (an L x T x d table): auto (on below 1 GB), on, off."""

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        """Build from a mapping; unknown keys are an error (no silent typos)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise NormvarError(
                f"unknown run option(s): {', '.join(unknown)}",
                fix=f"use only: {', '.join(sorted(known))}",
            )
        data = dict(data)
        if data.get("layers") is not None:
            data["layers"] = tuple(int(x) for x in data["layers"])
        cfg = cls(**data)
        cfg.validate()
        return cfg

    @classmethod
    def from_json(cls, text: str) -> "RunConfig":
        return cls.from_dict(json.loads(text))

    def replace(self, **changes: Any) -> "RunConfig":
        return RunConfig.from_dict({**self.to_dict(), **changes})

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if d["layers"] is not None:
            d["layers"] = list(d["layers"])
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def validate(self) -> "RunConfig":
        def bad(msg: str, fix: str) -> None:
            raise NormvarError(msg, fix=fix)

        if not isinstance(self.model, str) or not self.model.strip():
            bad("no model given", "pass --model with an alias (normvar models), a hub id or a local path")
        if not 0.0 < float(self.sample_frac) <= 1.0:
            bad(f"sample_frac must be in (0, 1], got {self.sample_frac}", "e.g. --sample-frac 0.01")
        if int(self.max_words) < 0:
            bad(f"max_words must be >= 0, got {self.max_words}", "use 64 (the study) or 0 for no limit")
        if self.max_sentences is not None and int(self.max_sentences) < 1:
            bad(f"max_sentences must be >= 1, got {self.max_sentences}", "omit it to keep every sentence")
        if self.batch_size is not None and int(self.batch_size) < 1:
            bad(f"batch_size must be >= 1, got {self.batch_size}", "omit it for an automatic size")
        if self.max_length is not None and int(self.max_length) < 2:
            bad(f"max_length must be >= 2, got {self.max_length}", "omit it to use the model's maximum")
        if self.device not in DEVICES:
            bad(f"unknown device {self.device!r}", f"use one of {', '.join(DEVICES)}")
        if self.dtype not in DTYPES:
            bad(f"unknown dtype {self.dtype!r}", f"use one of {', '.join(DTYPES)}")
        if self.mean_dtype not in MEAN_DTYPES:
            bad(f"unknown mean_dtype {self.mean_dtype!r}", f"use one of {', '.join(MEAN_DTYPES)}")
        if self.layers is not None and (not self.layers or min(self.layers) < 0):
            bad(f"invalid layer subset {self.layers}", "give non-negative hidden-state indices, e.g. --layers 0,6,12")
        if int(self.id_sample) < 0:
            bad(f"id_sample must be >= 0, got {self.id_sample}", "use 16384 (seed 004) or 0 to skip TwoNN")
        if self.self_similarity not in SELF_SIMILARITY:
            bad(f"unknown self_similarity {self.self_similarity!r}", f"use one of {', '.join(SELF_SIMILARITY)}")
        if int(self.samples_per_token) < 0:
            bad("samples_per_token must be >= 0", "use 200 (default) or 0 to keep no samples")
        if self.name is not None:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", self.name):
                bad(f"invalid run name {self.name!r}", "use letters, digits, '.', '_' and '-' (max 128)")
        return self

    # ------------------------------------------------------------------ CLI
    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """Add one ``--option`` per field; shared by ``normvar compute`` and ``normvar submit``."""
        a = parser.add_argument
        a("--model", default="minilm", help="alias (normvar models), HF model id or local path")
        a("--corpus", default="", help="corpus file; default: the shipped novels")
        a("--name", default=None, help="run name; default <model>__<corpus>")
        a("--revision", default=None, help="model revision (branch, tag or commit)")
        a("--gguf-file", default=None, help="GGUF file inside the model directory")
        a("--trust-remote-code", action="store_true", help="allow the model's own code (off by default)")
        a("--text-column", default=None, help="column holding the text (.jsonl/.csv/.parquet)")
        a("--split-sentences", action="store_true", help="split lines into sentences (nupunkt)")
        a("--max-words", type=int, default=64, help="keep sentences with fewer words (0 = no limit)")
        a("--sample-frac", type=float, default=1.0, help="random fraction of sentences (the study: 0.01)")
        a("--seed", type=int, default=0)
        a("--max-sentences", type=int, default=None)
        a("--exclude-special", action="store_true", help="drop special tokens ([CLS], <s>, BOS...)")
        a("--exclude-position0", action="store_true", help="drop the first position of each sentence")
        a("--max-length", type=int, default=None, help="truncation length in tokens")
        a("--batch-size", type=int, default=None, help="sentences per batch (default automatic)")
        a("--device", default="auto", choices=DEVICES)
        a("--dtype", default="float32", choices=DTYPES, help="forward dtype (bf16/fp16 on GPU only)")
        a("--layers", default=None, help="comma-separated hidden-state indices to keep")
        a("--mean-dtype", default="float64", choices=MEAN_DTYPES)
        a("--samples-per-token", type=int, default=SAMPLES_PER_TOKEN)
        a("--no-geometry", dest="geometry", action="store_false",
          help="skip the layer geometry (covariance spectrum, cosines, TwoNN, outlier dimensions)")
        a("--id-sample", type=int, default=ID_SAMPLE, help="embeddings per layer sampled for TwoNN (seed 004: 16384)")
        a("--self-similarity", default="auto", choices=SELF_SIMILARITY,
          help="per-type self-similarity table (auto: on below 1 GB)")

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> "RunConfig":
        names = {f.name for f in fields(cls)}
        data = {k: v for k, v in vars(ns).items() if k in names}
        if isinstance(data.get("layers"), str):
            try:
                data["layers"] = tuple(int(x) for x in data["layers"].split(",") if x.strip())
            except ValueError:
                raise NormvarError(f"invalid --layers {data['layers']!r}", fix="e.g. --layers 0,6,12") from None
        return cls.from_dict(data)


_CORPUS_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".txt", ".jsonl", ".json", ".csv", ".tsv", ".parquet")


def _sanitize(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    return s or "run"


def _corpus_stem(corpus: str) -> str:
    name = Path(corpus or DEFAULT_CORPUS).name
    changed = True
    while changed:
        changed = False
        for suf in _CORPUS_SUFFIXES:
            if name.lower().endswith(suf) and len(name) > len(suf):
                name, changed = name[: -len(suf)], True
    return name


def default_run_name(cfg: RunConfig) -> str:
    """The name of a run without ``--name``: ``<model alias or last path part>__<corpus stem>``,
    sanitized to letters, digits, '.', '_' and '-' (used by compute, submit and the upload page)."""
    model = cfg.model.rstrip("/\\")
    model = re.split(r"[/\\]", model)[-1] if model else "model"
    if cfg.gguf_file:
        model = f"{model}-{_corpus_stem(cfg.gguf_file.replace('.gguf', ''))}"
    name = f"{_sanitize(model)}__{_sanitize(_corpus_stem(cfg.corpus))}"
    return name[:128].rstrip("-._") or "run"
