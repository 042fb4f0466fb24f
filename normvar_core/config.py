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
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from normvar_core.constants import (
    ID_SAMPLE,
    MAX_ID_SAMPLE,
    MAX_SAMPLES_PER_TOKEN,
    MAX_WORDS,
    MAX_WORKERS,
    OCCURRENCES,
    OCCURRENCES_MAX,
    SAMPLES_PER_TOKEN,
    TWONN_BATCH,
)
from normvar_core.corpus_formats import TABLE_SUFFIXES, TEXT_SUFFIXES, corpus_stem
from normvar_core.datadir import DEFAULT_CORPUS, DataDir
from normvar_core.device_options import check_options as check_device_options
from normvar_core.errors import NormvarError
from normvar_core.numbers import MAX_COUNT, MAX_MEMORY_GB, MAX_SEED, Number

DTYPES = ("auto", "float32", "bfloat16", "float16")
UNITS = ("token", "word")
DEVICES = ("auto", "cpu", "cuda", "mps")
MEAN_DTYPES = ("float64", "float32")
SCATTER_DTYPES = ("float64", "float32", "auto")
EXECUTORS = ("local", "ray")


def opt(
    default: Any,
    help: str,
    *,
    section: str = "advanced",
    choices: tuple | None = None,
    minimum=None,
    maximum=None,
    label: str | None = None,
    flag: str | None = None,
) -> Any:
    """A RunConfig field with what the CLI and the New-run form need: its help, the form section
    ("corpus", "model", "options" or "advanced"), allowed choices, the least and the largest value (a count
    past its maximum is refused before any work), a form label and a CLI flag when it is not
    ``--<name-with-dashes>`` (e.g. ``--no-geometry`` for a field that defaults on)."""
    return field(
        default=default,
        metadata=dict(
            help=help, section=section, choices=choices, minimum=minimum, maximum=maximum, label=label, flag=flag
        ),
    )


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run. Defaults follow the study (§5.1): sentences with
    fewer than 64 words, every hidden state from the input embeddings (layer 0) to the last.
    Each field's metadata (``opt``) generates its CLI flag and its New-run form widget. The measures'
    switches and options (``samples_per_token`` to ``self_similarity``, after ``mean_dtype``) are read by their
    measure classes (``pipeline/measures/``: ``asked``, ``may_drop``)."""

    model: str = opt("minilm", "alias (normvar models), Hugging Face model id or local directory", section="model")
    corpus: str = opt(
        "",
        f"corpus file ({'/'.join(TEXT_SUFFIXES)} one sentence a line, {', '.join(TABLE_SUFFIXES)}); "
        "'' = the shipped novels",
        section="corpus",
    )
    name: str | None = opt(
        None, "run name (file DIR/<name>.duckdb); default <model>__<corpus stem>", section="options", label="Run name"
    )
    revision: str | None = opt(None, "model revision (branch, tag or commit)", section="model")
    stack: str = opt(
        "encoder",
        "encoder-decoder models (T5, BART): the stack measured — its encoder, or its decoder "
        "(the sentence as decoder input after the start token, as in training)",
        section="model",
        choices=("encoder", "decoder"),
    )
    gguf_file: str | None = opt(None, "GGUF file inside the model directory", section="model", label="GGUF file")
    trust_remote_code: bool = opt(
        False, "allow the model's own code (off by default; only for models you trust)", section="model"
    )
    dataset: str | None = opt(
        None,
        "a Hugging Face dataset in place of --corpus: Hub id (from the local cache, never "
        "downloaded), save_to_disk folder, or data files (.parquet/.json/.jsonl/.csv/.arrow; "
        "comma-separated, globs allowed)",
        section="corpus",
    )
    dataset_config: str | None = opt(None, "the dataset's configuration (subset)", section="corpus")
    split: str | None = opt(None, "the dataset's split; default train, or its only split", section="corpus")
    dataset_revision: str | None = opt(None, "the Hub dataset's commit (the cached one by default)", section="corpus")
    text_column: str | None = opt(
        None,
        "column holding the text (.jsonl/.csv/.parquet, --dataset); default: the only text column",
        section="corpus",
    )
    split_sentences: bool = opt(False, "split lines into sentences (nupunkt)", section="corpus")
    max_words: int = opt(
        MAX_WORDS,
        "keep sentences with fewer whitespace words (the study: 64); 0 = no limit",
        section="options",
        minimum=0,
        label="Word limit",
    )
    sample_frac: float = opt(
        1.0,
        "random fraction of sentences (the study: 0.01 of BookCorpus)",
        section="options",
        minimum=0.0,
        maximum=1.0,
        label="Sample fraction",
    )
    seed: int = opt(
        0,
        "seed of the sentence sample, the PCA samples and the TwoNN sample",
        section="options",
        minimum=0,
        maximum=MAX_SEED,
    )
    max_sentences: int | None = opt(
        None, "keep at most this many sentences (default all)", section="options", minimum=1, label="Max sentences"
    )
    exclude_special: bool = opt(False, "drop special tokens ([CLS], <s>, BOS ...)", section="options")
    exclude_position0: bool = opt(
        False,
        "drop the first position of each sentence (decoders' massive activations)",
        section="options",
        label="Exclude position 0",
    )
    allow_unknown: bool = opt(
        False,
        "compute even when over half of the corpus's tokens are the tokenizer's "
        "unknown token ([UNK]); refused otherwise",
        section="options",
    )
    max_length: int | None = opt(None, "truncation length in tokens; default: the model's maximum", minimum=2)
    batch_size: int | None = opt(None, "sentences per forward pass; default: automatic (a token budget)", minimum=1)
    device: str = opt("auto", "where the model runs", choices=DEVICES)
    dtype: str = opt(
        "auto",
        "forward-pass dtype: auto = the model config's dtype on a GPU, float32 on the CPU (bf16/fp16 on GPU only); "
        "statistics always accumulate in float64",
        choices=DTYPES,
    )
    layers: tuple[int, ...] | None = opt(
        None,
        "comma-separated hidden-state indices to keep (0 = input embeddings); default all — fewer layers, less memory",
    )
    mean_dtype: str = opt(
        "float64", "storage of per-type means: float64, or float32 (halves the largest table)", choices=MEAN_DTYPES
    )
    samples_per_token: int = opt(
        SAMPLES_PER_TOKEN,
        "raw embeddings kept per (layer, sampled token) for the PCA clouds and the token explorer; 0 = none",
        minimum=0,
        maximum=MAX_SAMPLES_PER_TOKEN,
    )
    geometry: bool = opt(
        True,
        "layer geometry in the same pass: exact covariance spectrum, anisotropy, mean cosine, "
        "TwoNN, outlier dimensions",
        flag="--no-geometry",
    )
    neighbourhoods: bool = opt(
        True,
        "with the geometry: GRIDE's intrinsic dimension across scales and the neighbourhood overlap between "
        "layers, from an exact 128-NN search of the TwoNN sample at publish; --no-neighbourhoods leaves both out "
        "(the ID-across-scales and overlap figures)",
        flag="--no-neighbourhoods",
    )
    halves: bool = opt(
        True,
        "split halves (by a hash of the sentence id) for the findings' intervals of the "
        "corpus-level quantities and the geometry: twice the per-type moments' memory",
        flag="--no-halves",
    )
    layer_linearity: bool = opt(
        True,
        "linear CKA and the linearity score (Razzhigaev et al. 2024) between consecutive layers, exact over every "
        "embedding, with split-half intervals: four d x d float64 scatters per layer and one float64 Gram product "
        "per pair and batch; --no-layer-linearity leaves it out (the CKA and linearity curves)",
        flag="--no-layer-linearity",
    )
    prompt_entropy: bool = opt(
        False,
        "prompt entropy (Skean et al. 2025): the matrix entropy of each sentence's token Gram matrix, "
        "averaged over sentences; off by default (an eigendecomposition per sentence and layer; its cost is in "
        "docs/benchmarks.md)",
    )
    id_sample: int = opt(
        ID_SAMPLE,
        "embeddings per layer in the seeded uniform sample for TwoNN and seed 004's batch "
        "anisotropy: min(N, this), whatever the run's size (seed 004: 16384), in batches of "
        f"at least {TWONN_BATCH:,}",
        minimum=0,
        maximum=MAX_ID_SAMPLE,
        label="TwoNN sample",
    )
    occurrences: int = opt(
        OCCURRENCES,
        "most occurrences per layer kept for the Occurrences page, each at its "
        "coordinates on the layer's principal axes (every one when the run has fewer, else a "
        f"seeded uniform sample); 0 = none, at most {OCCURRENCES_MAX:,}",
        minimum=0,
        maximum=OCCURRENCES_MAX,
        label="Occurrences shown",
    )
    self_similarity: str = opt(
        "auto",
        "per-type self-similarity table (L x T x d): auto = on when it fits in the device's memory (normvar plan)",
        choices=("auto", "on", "off"),
    )
    memory_gb: float | None = opt(
        None,
        "memory the run may hold, in GiB (2^30 bytes); default: what the device reports "
        "free (CUDA free memory, else available RAM). Decides which measures fit "
        "(normvar plan shows it)",
        minimum=0.01,
        maximum=MAX_MEMORY_GB,
        label="Memory (GB)",
    )
    scatter_dtype: str = opt(
        "auto",
        "per-batch arithmetic of the covariance and cosine sums (merged in float64): "
        "float64 (exact), float32 (GPUs with slow float64), auto = float64 on CPU and on "
        "compute capability 8.0/9.0 GPUs, float32 elsewhere",
        choices=SCATTER_DTYPES,
    )
    executor: str = opt(
        "local",
        "local: one process; ray: batch ranges sharded over Ray actors (one per GPU where "
        "there are GPUs), partial states merged exactly",
        choices=EXECUTORS,
    )
    ray_address: str | None = opt(None, "address of a running Ray cluster (default: start a local Ray)")
    workers: int | None = opt(
        None,
        "Ray actors (default: one per GPU, else 2); at most one per GPU, or per core of a local Ray",
        minimum=1,
        maximum=MAX_WORKERS,
    )
    device_map: str | None = opt(
        None,
        "one model over several devices (accelerate): auto, balanced, balanced_low_0, "
        "sequential or a JSON file {module: device}; each kept layer's state stays on its "
        "layer's device",
        label="Device map",
    )
    max_memory: str | None = opt(None, "with --device-map: what each device may hold, e.g. 0=70GiB,1=70GiB,cpu=200GiB")
    offload_folder: str | None = opt(None, "with --device-map: folder for the weights that fit on no device (disk)")
    gpus_per_worker: int | None = opt(
        None,
        "Ray: GPUs per actor, each actor one device-mapped replica over its GPUs (0: CPU actors)",
        minimum=0,
        label="GPUs per worker",
    )
    unit: str = opt(
        "token",
        "what a type is: token (the study's main text) or word (App. J: x_w = the mean of a word's "
        "token embeddings, words from the fast tokenizer's word ids, keyed by their text)",
        section="options",
        choices=UNITS,
    )
    sweep: str | None = opt(None, "the training sweep this run belongs to (set by normvar sweep)")
    step: int | None = opt(None, "the checkpoint's training step (set by normvar sweep)", minimum=0)

    def __post_init__(self) -> None:
        # what runs is what is recorded: --layers 0,0 or 6,0 keeps hidden states [0] or [0, 6]
        if isinstance(self.layers, (tuple, list)) and all(isinstance(x, int) for x in self.layers):
            object.__setattr__(self, "layers", tuple(sorted(set(self.layers))))

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """Build from a mapping; unknown keys are an error (no silent typos); every value is coerced
        to its field's type or refused with a NormvarError naming the option."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise NormvarError(
                f"unknown run option(s): {', '.join(unknown)}",
                fix=f"use only: {', '.join(sorted(known))}",
            )
        cfg = cls(**{k: _coerce(known[k], v) for k, v in data.items()})
        cfg.validate()
        return cfg

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        return cls.from_dict(json.loads(text))

    def replace(self, **changes: Any) -> RunConfig:
        return RunConfig.from_dict({**self.to_dict(), **changes})

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if d["layers"] is not None:
            d["layers"] = list(d["layers"])
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def validate(self) -> RunConfig:
        """Every value of the right type (``_coerce``), at least its field's minimum, one of its choices;
        then the checks that concern one option in particular."""

        def bad(msg: str, fix: str) -> None:
            raise NormvarError(msg, fix=fix)

        for f in fields(self):
            value = _coerce(f, getattr(self, f.name))  # a number: in its range (``number_of``), or refused
            meta = f.metadata
            if meta.get("choices") and value not in meta["choices"]:
                bad(f"unknown {f.name} {value!r}", f"use one of {', '.join(meta['choices'])}")
        if not self.model.strip():
            bad("no model given", "pass --model with an alias (normvar models), a hub id or a local path")
        if self.executor != "ray":  # a Ray option on a local run would be silently ignored
            for given, flag in ((self.ray_address, "--ray-address"), (self.workers, "--workers")):
                if given is not None:
                    bad(
                        f"{flag} is an option of the Ray executor; this run's executor is {self.executor!r}",
                        f"add --executor ray, or leave {flag} out",
                    )
        if self.layers is not None and (not self.layers or min(self.layers) < 0):
            bad(f"invalid layer subset {self.layers}", "give non-negative hidden-state indices, e.g. --layers 0,6,12")
        if self.dataset and self.corpus:
            bad("both --corpus and --dataset given", "pass one of them")
        extra = [n for n in ("dataset_config", "split", "dataset_revision") if getattr(self, n) and not self.dataset]
        if extra:
            bad(f"--{extra[0].replace('_', '-')} needs --dataset", "name the dataset with --dataset, or drop it")
        check_device_options(self.device_map, self.max_memory, self.offload_folder)
        if self.gpus_per_worker is not None and self.executor != "ray":
            bad("--gpus-per-worker is for the Ray executor", "add --executor ray, or leave --gpus-per-worker out")
        for label, value in (("run name", self.name), ("sweep name", self.sweep)):
            if value is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", value):
                bad(f"invalid {label} {value!r}", "use letters, digits, '.', '_' and '-' (max 128)")
        return self

    # ------------------------------------------------------------------ CLI
    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """One ``--option`` per field, generated from the fields' metadata (``compute``, ``submit``, ``sweep``)."""
        for f in fields(RunConfig):
            meta = f.metadata
            kind = field_kind(f)
            flag = meta.get("flag") or "--" + f.name.replace("_", "-")
            if kind is bool:  # a --no-X flag turns off what its field's help describes (on by default)
                action = "store_false" if f.default else "store_true"
                helped = f"turn off (on by default): {meta.get('help')}" if f.default else meta.get("help")
                parser.add_argument(flag, dest=f.name, action=action, help=helped)
                continue
            kw: dict[str, Any] = dict(dest=f.name, default=f.default, help=meta.get("help"))
            if kind in (int, float):
                kw["type"] = number_of(f)
            if meta.get("choices"):
                kw["choices"] = meta["choices"]
            parser.add_argument(flag, **kw)

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> RunConfig:
        names = {f.name for f in fields(cls)}
        return cls.from_dict({k: v for k, v in vars(ns).items() if k in names})


def field_kind(f) -> type:
    """The value type of a field: bool, int, float, str or tuple (Optional stripped)."""
    t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    for name, kind in (("bool", bool), ("tuple", tuple), ("int", int), ("float", float)):
        if t.startswith(name):
            return kind
    return str


def optional(f) -> bool:
    t = f.type if isinstance(f.type, str) else str(f.type)
    return "None" in t


def number_of(f) -> Number:
    """The validator (``numbers.Number``) of a numeric field: its flag, type and range (``minimum``, ``maximum``;
    a sample fraction above 0, any other count at most ``numbers.MAX_COUNT``)."""
    kind, meta = field_kind(f), f.metadata
    least = meta.get("minimum")
    most = meta.get("maximum")
    return Number(
        meta.get("flag") or "--" + f.name.replace("_", "-"),
        kind=kind,
        least=(0 if least is None else least),
        most=(MAX_COUNT if most is None else most),
        least_open=f.name == "sample_frac",
        note="0 = none" if f.name == "occurrences" else "",
    )


def _coerce(f, value: Any) -> Any:
    """``value`` as field ``f``'s type; a NormvarError naming the option when it cannot be (a number: outside
    its range too, ``number_of``)."""
    kind = field_kind(f)
    flag = "--" + f.name.replace("_", "-")
    if value is None:
        if optional(f):
            return None
        raise NormvarError(f"option {f.name} cannot be empty", fix=f"give {flag} a value or leave it out")
    if kind in (int, float):
        return number_of(f)(value)
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in (
                "1",
                "true",
                "yes",
                "on",
                "0",
                "false",
                "no",
                "off",
            ):
                return value.strip().lower() in ("1", "true", "yes", "on")
            if isinstance(value, (int, float)) and value in (0, 1):
                return bool(value)
            raise ValueError
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not float(value).is_integer()):
                raise ValueError
            return int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError
            out = float(value)
            if out != out or out in (float("inf"), float("-inf")):
                raise ValueError
            return out
        if kind is tuple:
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(int(x) for x in items if str(x).strip() != "")
        if not isinstance(value, str):
            raise ValueError
        return value
    except (ValueError, TypeError, OverflowError):
        what = {
            bool: "true or false",
            int: "an integer",
            float: "a number",
            tuple: "comma-separated integers",
            str: "text",
        }[kind]
        raise NormvarError(
            f"option {f.name} must be {what}, got {value!r}"[:200], fix=f"pass {flag} with {what}"
        ) from None


def _sanitize(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    return s or "run"


def _corpus_stem(corpus: str) -> str:
    """The file name of ``corpus`` (the shipped novels if empty) without its corpus suffix."""
    return corpus_stem(Path(corpus or DEFAULT_CORPUS).name)


def dataset_stem(dataset: str) -> str:
    """A dataset's name: a Hub id's or a folder's last part, a data file's stem (the first file; a glob's folder)."""
    parts = Path(dataset.split(",")[0].strip().rstrip("/\\")).parts or ("dataset",)
    plain = [p for p in parts if not any(c in p for c in "*?[")] or ["dataset"]
    name = plain[-1]
    return name.rsplit(".", 1)[0] if name.lower().endswith((".arrow", ".json")) else corpus_stem(name)


def run_path_for(cfg: RunConfig, data_dir=None, out_dir=None) -> Path:
    """The run file ``compute`` publishes: ``<out_dir or the data directory's runs/>/<name>.duckdb``."""
    out = Path(out_dir) if out_dir is not None else DataDir.at(data_dir).runs
    return out / f"{cfg.name or default_run_name(cfg)}.duckdb"


def default_run_name(cfg: RunConfig) -> str:
    """The name of a run without ``--name``: ``<model alias or last path part>__<corpus stem>``,
    sanitized to letters, digits, '.', '_' and '-' (used by compute, submit and the upload page)."""
    model = cfg.model.rstrip("/\\")
    model = re.split(r"[/\\]", model)[-1] if model else "model"
    if cfg.gguf_file:
        model = f"{model}-{_corpus_stem(cfg.gguf_file.replace('.gguf', ''))}"
    corpus = (
        _corpus_stem(cfg.corpus)
        if not cfg.dataset
        else "-".join(x for x in (dataset_stem(cfg.dataset), cfg.dataset_config, cfg.split) if x)
    )
    name = f"{_sanitize(model)}__{_sanitize(corpus)}"
    return name[:128].rstrip("-._") or "run"
