"""Loading: ``load_model(cfg, data_dir)`` → ``LoadedModel`` (the base model, its tokenizer, ``ModelInfo``).

The model is the base AutoModel in eval mode with every hidden state f_0..f_L of the study's §3
(layer 0 = input embeddings); ``ModelInfo`` records where the normalization sits, detected by one
probe of the model (``probe.py``, ``architecture.py``) whose norm outputs the run's App. I tables
reuse (``LoadedModel.norm_outputs``). Where the files are: ``resolve.py``; the aliases: ``aliases.py``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from normvar_core.config import RunConfig
from normvar_core.datadir import DataDir
from normvar_core.errors import NormvarError
from normvar_core.pipeline.models.architecture import detect_architecture
from normvar_core.pipeline.models.device_map import (
    check_map_modules,
    clean_offload_after,
    device_map_of,
    folder_names,
    input_device,
    meta_model,
    pretrained_kwargs,
    state_places,
)
from normvar_core.pipeline.models.model_config import build_error, read_model_config
from normvar_core.pipeline.models.probe import producers, run_probe
from normvar_core.pipeline.models.resolve import cached_hash, dequantized_dir, resolve_source, weights_hash

TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "sentencepiece.model",
)
_WORDS = "The old man walked slowly along the river, thinking of his daughter."


@dataclass
class ModelInfo:
    """What a run records about its model. ``norm_placement``: "post" (norm after the residual add,
    BERT), "pre" (norm on the block input, GPT-2/Llama) or "pre+post" (Gemma: also on each
    sublayer output); ``final_norm``: HF's last hidden state is taken after a final norm."""

    name: str
    source: str
    revision: str | None
    architecture: str
    model_type: str
    num_hidden_states: int
    dim: int
    max_length: int
    is_decoder: bool
    norm_placement: str
    norm_type: str
    final_norm: bool
    weights_hash: str
    padding_side: str
    gguf_file: str | None = None
    device: str = "cpu"
    dtype: str = "float32"
    stack: str | None = None
    """Encoder-decoders: the stack measured, "encoder" or "decoder" (``encdec``); None otherwise."""
    device_map: dict | None = None
    """--device-map: the resolved map {module: "cuda:k" | "cpu" | "disk"} (``models.device_map.device_map_of``)."""
    places: list | None = None
    """--device-map: [(map entry, state device)] per hidden state (``models.device_map.state_places``)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    info: ModelInfo
    extra: dict[str, Any] = field(default_factory=dict)
    norm_outputs: dict[int, str] | None = None
    """{hidden-state index: normalization module whose output it is}, from the load's probe (None: probe again)."""

    @property
    def device(self):
        import torch

        return torch.device(self.info.device)


def resolve_device(cfg: RunConfig) -> str:
    """cfg.device, with "auto" → cuda > mps > cpu. An unavailable explicit device is an error."""
    import torch

    want = cfg.device
    cuda = torch.cuda.is_available()
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    if want == "auto":
        return "cuda" if cuda else "mps" if mps else "cpu"
    if want == "cuda" and not cuda:
        raise NormvarError("device 'cuda' requested but no CUDA GPU is available", fix="use --device auto or cpu")
    if want == "mps" and not mps:
        raise NormvarError("device 'mps' requested but MPS is not available", fix="use --device auto or cpu")
    return want


def resolve_dtype(dtype: str, device: str, config=None) -> str:
    """The forward pass's dtype by name: ``auto`` is float32 off a GPU and, on a GPU, the dtype the model's config
    declares (``torch_dtype``/``dtype`` of its text config: bfloat16 for Falcon, Llama, Gemma) when it is one of
    float32, bfloat16, float16, else float32; any other name as given."""
    if dtype != "auto":
        return dtype
    if device != "cuda" or config is None:
        return "float32"
    get = getattr(config, "get_text_config", None)
    tc = get() if callable(get) else config
    declared = getattr(tc, "dtype", None) or getattr(tc, "torch_dtype", None) or getattr(config, "torch_dtype", None)
    name = str(declared).replace("torch.", "") if declared is not None else ""
    return name if name in ("float32", "bfloat16", "float16") else "float32"


def torch_dtype(cfg: RunConfig, device: str):
    """The torch dtype of ``cfg.dtype`` on ``device`` ("auto" on a GPU: the string "auto", resolved from the config
    where the model loads: ``resolve_dtype``)."""
    import torch

    if cfg.dtype == "auto":
        return "auto" if device == "cuda" else torch.float32
    if cfg.dtype != "float32" and device == "cpu":
        raise NormvarError(
            f"dtype {cfg.dtype} is only supported on a GPU (device is cpu)", fix="use --dtype float32 on CPU"
        )
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[cfg.dtype]


def load_model(cfg: RunConfig, data_dir=None) -> LoadedModel:
    """Load ``cfg.model`` (alias, local dir, .gguf file or hub id) offline-first; see module doc."""
    from transformers.utils import logging as hf_logging

    from normvar_core.pipeline.models.encdec import select_stack  # torch: this package imports none (the dashboard)

    hf_logging.disable_progress_bar()
    cache = DataDir.at(data_dir).cache / "models"
    src = resolve_source(cfg, cache)
    path = dequantized_dir(src, cache) if src.gguf_file else src.path
    device = resolve_device(cfg)
    dtype = torch_dtype(cfg, device)
    mapped = pretrained_kwargs(cfg)
    offloaded_before = folder_names(mapped.get("offload_folder"))
    model, tok = _from_pretrained(cfg, Path(path), src.name, dtype, **mapped)
    clean_offload_after(model, mapped.get("offload_folder"), offloaded_before)
    architecture = type(model).__name__
    model, stack = select_stack(model, tok, cfg.stack, src.name)
    model.config.output_hidden_states = True
    model.eval()
    if mapped:  # accelerate placed every module: the run reads where the token ids go
        device = str(input_device(model))
    else:
        model.to(device)
    probe = run_probe(model, tok)
    arch = detect_architecture(model, tok, probe)
    norm_outputs = probe.norm_of_hidden_states()
    dmap = device_map_of(model)
    info = ModelInfo(
        name=src.name,
        source=str(path),
        revision=src.revision,
        stack=stack,
        architecture=architecture,
        model_type=str(getattr(model.config, "model_type", "")),
        num_hidden_states=arch["num_hidden_states"],
        dim=arch["dim"],
        max_length=max_length(model, tok),
        is_decoder=arch["is_decoder"],
        norm_placement=arch["norm_placement"],
        norm_type=arch["norm_type"],
        final_norm=arch["final_norm"],
        weights_hash=cached_hash(path) or weights_hash(model),
        padding_side=str(getattr(tok, "padding_side", "right")),
        gguf_file=src.gguf_file,
        device=device,
        dtype=str(getattr(model, "dtype", dtype)).replace("torch.", ""),
        device_map=(dmap or {"": device}) if mapped else None,
        places=None if dmap is None else state_places(dmap, producers(model, arch["num_hidden_states"], norm_outputs)),
    )
    return LoadedModel(model, tok, info, norm_outputs=norm_outputs)


def _from_pretrained(cfg: RunConfig, path: Path, name: str, dtype, **mapped):
    """(model, tokenizer) from a local directory, each failure as one line naming the fix."""
    from transformers import AutoModel, AutoTokenizer

    kw: dict[str, Any] = dict(trust_remote_code=bool(cfg.trust_remote_code), local_files_only=True)
    if path.is_dir() and not (path / "config.json").exists():
        check_model_dir(path, name)  # says all that the folder lacks
    config = read_model_config(path, name, **kw)  # wrong values, vision / audio: one line before anything heavy
    if dtype == "auto":  # --dtype auto on a GPU: the config's own dtype
        import torch

        dtype = getattr(torch, resolve_dtype("auto", "cuda", config))
    if mapped and getattr(config, "is_encoder_decoder", False):  # its stacks are not placed per layer group
        raise NormvarError(
            f"--device-map is for one-stack models; {name!r} is an encoder-decoder",
            fix="leave --device-map out for encoder-decoders (T5, BART)",
        )
    check_model_dir(path, name)
    if mapped:  # accelerate's "Some parameters are on the meta device because they were offloaded" is what
        import logging  # an offload means; the run row records the map instead of a raw log line

        logging.getLogger("accelerate.big_modeling").setLevel(logging.ERROR)
    if isinstance(mapped.get("device_map"), dict):  # its modules named by the model itself, on the meta device
        check_map_modules(
            mapped["device_map"],
            meta_model(config, trust_remote_code=kw["trust_remote_code"]),
            cfg.device_map,  # type: ignore[arg-type]  # a dict device map was given
        )
    tok = None
    try:
        tok = AutoTokenizer.from_pretrained(path, **kw)
        model = AutoModel.from_pretrained(path, config=config, dtype=dtype, **mapped, **kw)
    except ValueError as exc:
        msg = str(exc).splitlines()[0]
        if "trust_remote_code" in msg:
            raise NormvarError(
                f"model {name!r} needs its own code", fix="re-run with --trust-remote-code if you trust it"
            ) from None
        if tok is not None:  # the config's values pass its checks but do not build (hidden size 30, 7 heads)
            raise build_error(exc, name) from None
        raise NormvarError(
            f"could not load the tokenizer of model {name!r}: {msg}",
            fix="pass a transformers model directory (config.json + weights + tokenizer)",
        ) from None
    except OSError as exc:
        raise NormvarError(
            f"could not load model {name!r} from {path}: {str(exc).splitlines()[0]}",
            fix="the directory needs config.json, weights and tokenizer files",
        ) from None
    except Exception as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise NormvarError(
            f"the weights of model {name!r} are damaged or incomplete ({type(exc).__name__}: {first[:160]})",
            fix="copy or download the model files again",
        ) from None
    check_tokenizer(tok, name)
    return model, tok


def check_model_dir(path: Path, name: str) -> None:
    """A local model directory must have a config, weights and tokenizer files (checked before
    anything is loaded, so a half-copied model gives one line instead of a traceback or a run
    over [UNK] alone)."""
    if not path.is_dir():
        return  # a hub id resolved by transformers' cache
    missing = []
    if not (path / "config.json").exists():
        missing.append("config.json")
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")) and not any(path.glob("*.pt")):
        missing.append("weights (*.safetensors)")
    if not any((path / f).exists() for f in TOKENIZER_FILES):
        missing.append("tokenizer files (tokenizer.json or vocab files)")
    if missing:
        raise NormvarError(
            f"model directory {path} of {name!r} lacks {', '.join(missing)}",
            fix="copy the complete model folder (config, weights and tokenizer files)",
        )


def check_tokenizer(tok, name: str) -> None:
    """Refuse a tokenizer that maps ordinary English words to the unknown token."""
    unk = getattr(tok, "unk_token_id", None)
    if unk is None:
        return
    ids = tok(_WORDS, add_special_tokens=False)["input_ids"]
    if ids and sum(i == unk for i in ids) / len(ids) > 0.5:
        raise NormvarError(
            f"the tokenizer of {name!r} maps most words to {tok.unk_token!r}",
            fix="the tokenizer files are missing or do not belong to this model",
        )


def max_length(model, tok) -> int:
    """Usable positions: config max positions (minus RoBERTa-style padding offset), capped by the
    tokenizer's model_max_length when that is set; fallback 512."""
    return capped_length(model_positions(model), tok)


def model_positions(model) -> int | None:
    """The model's own position limit: its config's max positions, minus a RoBERTa-style padding offset (None when
    the config names none)."""
    cfg = model.config
    n = None
    for attr in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        v = getattr(cfg, attr, None)
        if isinstance(v, int) and v > 0:
            n = v
            break
    pad_idx = getattr(getattr(model, "embeddings", None), "padding_idx", None)
    if n is not None and isinstance(pad_idx, int):
        n -= pad_idx + 1
    return n


def capped_length(n: int | None, tok) -> int:
    """``max_length`` from the model's limit ``n`` (``model_positions``) and the tokenizer."""
    t = getattr(tok, "model_max_length", None)
    if isinstance(t, int) and 0 < t < 1_000_000:
        n = min(n, t) if n else t
    return int(n) if n and n > 1 else 512


__all__ = [
    "ModelInfo",
    "LoadedModel",
    "load_model",
    "resolve_device",
    "torch_dtype",
    "resolve_dtype",
    "check_model_dir",
    "check_tokenizer",
    "max_length",
    "model_positions",
    "capped_length",
    "TOKENIZER_FILES",
]
