"""What the memory plan needs of a model: its ``ModelShape`` (parameters, width, depth, heads, MLP width,
vocabulary, maximum length), from its transformers config alone on the meta device (``shape_from_config``,
``normvar plan``: no weights read) or from the loaded model (``shape_of_loaded``, ``compute``), and the
config and tokenizer of a model without its weights (``config_and_tokenizer``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from normvar_core.datadir import DataDir
from normvar_core.errors import NormvarError
from normvar_core.pipeline.models.load import TOKENIZER_FILES, capped_length, check_tokenizer, model_positions
from normvar_core.pipeline.models.meta_facts import facts_folder, kept_facts, whole
from normvar_core.pipeline.models.model_config import build_error, read_model_config
from normvar_core.pipeline.models.resolve import dequantized_dir, resolve_source


@dataclass
class ModelShape:
    """What the plan needs of a model, from its config alone (built on the meta device)."""

    name: str
    architecture: str
    params: int  # the base model normvar loads (AutoModel: no LM head)
    lm_head_params: int  # vocab x d: the output matrix published counts of decoders include
    buffer_bytes: int  # non-parameter buffers (position ids ...) at their own dtypes
    dim: int
    num_hidden_states: int  # blocks + 1 (0 = the input embeddings)
    heads: int
    ffn: int
    vocab: int
    max_length: int


def text_config(config):
    """The text part of a transformers config (a multimodal model's ``get_text_config()``), else the config."""
    get = getattr(config, "get_text_config", None)
    return get() if callable(get) else config


def shape_from_config(
    config, name: str = "", *, trust_remote_code: bool = False, tokenizer=None, cache: Path | None = None
) -> ModelShape:
    """Build ``AutoModel.from_config(config)`` on the meta device (no weights read or allocated) and
    count its parameters; the width, depth, heads and MLP width from the (text) config. ``cache``: a folder where
    what the build gives is kept and read back (``models.meta_facts``: the same figures, no model built)."""
    facts = kept_facts(
        cache,
        "shape",
        config,
        trust_remote_code,
        {},
        _shape_facts,
        lambda: _built_shape(config, name, trust_remote_code),
    )
    tc = text_config(config)
    d = int(getattr(tc, "hidden_size", 0) or getattr(tc, "d_model", 0) or getattr(tc, "n_embd", 0))
    blocks = int(getattr(tc, "num_hidden_layers", 0) or getattr(tc, "n_layer", 0))
    heads = int(getattr(tc, "num_attention_heads", 0) or getattr(tc, "n_head", 0) or 1)
    ffn = int(
        getattr(tc, "intermediate_size", 0) or getattr(tc, "ffn_hidden_size", 0) or getattr(tc, "n_inner", 0) or 4 * d
    )
    vocab = int(getattr(tc, "vocab_size", 0) or 0)
    if d < 1 or blocks < 1:
        raise NormvarError(
            f"cannot read the width and depth of {name or 'the model'} from its config",
            fix="pass a transformers model directory whose config.json has hidden_size and num_hidden_layers",
        )
    return ModelShape(
        name=name,
        architecture=facts["architecture"],
        params=facts["params"],
        lm_head_params=vocab * d,
        buffer_bytes=facts["buffer_bytes"],
        dim=d,
        num_hidden_states=blocks + 1,
        heads=heads,
        ffn=ffn,
        vocab=vocab,
        max_length=capped_length(facts["positions"], tokenizer),
    )


def _built_shape(config, name: str, trust_remote_code: bool) -> dict:
    """What ``shape_from_config`` reads of the model built on the meta device (``meta_facts``' "shape" entry); built
    from a copy of ``config`` (a build sets fields of its config: the caller's, and its key, stay as read)."""
    import copy

    import torch
    from transformers import AutoModel

    try:
        with torch.device("meta"):
            model = AutoModel.from_config(copy.deepcopy(config), trust_remote_code=trust_remote_code)
    except Exception as exc:
        raise build_error(exc, name or "the model") from None
    return {
        "architecture": type(model).__name__,
        "params": int(sum(p.numel() for p in model.parameters())),
        "buffer_bytes": int(sum(b.numel() * b.element_size() for b in model.buffers())),
        "positions": model_positions(model),
    }


def _shape_facts(facts: dict) -> bool:
    """A "shape" entry read back has the fields and types ``_built_shape`` gives."""
    positions = facts["positions"]
    return (
        isinstance(facts["architecture"], str)
        and bool(facts["architecture"])
        and whole(facts["params"])
        and whole(facts["buffer_bytes"])
        and (positions is None or whole(positions))
    )


def shape_of_loaded(loaded) -> ModelShape:
    """The ModelShape of a loaded model (its real parameters; no meta build)."""
    model = loaded.model
    hf_config = text_config(model.config)
    params = sum(p.numel() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    d = int(loaded.info.dim)
    return ModelShape(
        name=loaded.info.name,
        architecture=loaded.info.architecture,
        params=int(params),
        lm_head_params=int(getattr(hf_config, "vocab_size", 0) or 0) * d,
        buffer_bytes=int(buffers),
        dim=d,
        num_hidden_states=int(loaded.info.num_hidden_states),
        heads=int(getattr(hf_config, "num_attention_heads", 0) or getattr(hf_config, "n_head", 0) or 1),
        ffn=int(getattr(hf_config, "intermediate_size", 0) or getattr(hf_config, "ffn_hidden_size", 0) or 4 * d),
        vocab=int(getattr(hf_config, "vocab_size", 0) or 0),
        max_length=int(loaded.info.max_length),
    )


def shipped_shape(cfg) -> Path | None:
    """The shipped config of ``cfg.model`` (``models.shipped_shapes``) when the plan reads it: the model is named
    by a hub name that ships and is not found locally (an alias, a path, the Hugging Face cache)."""
    from huggingface_hub.errors import HFValidationError

    from normvar_core.pipeline.models.aliases import ALIASES
    from normvar_core.pipeline.models.resolve import hub_cached
    from normvar_core.pipeline.models.shipped_shapes import shipped_config_file

    found = shipped_config_file(cfg.model)
    if found is None or cfg.model in ALIASES or cfg.gguf_file or Path(cfg.model).expanduser().exists():
        return None
    try:
        return None if hub_cached(cfg.model, cfg.revision) is not None else found
    except HFValidationError:  # a bare name ("falcon-40b"): no hub id, so nothing cached under it
        return found


def config_and_tokenizer(cfg, data_dir=None):
    """(name, transformers config, tokenizer) of ``cfg.model`` without reading any weights: an alias,
    a local directory holding config.json and the tokenizer files, a cached hub id, a GGUF file (its metadata; a
    dequantized cache when there is one), or the shipped shape of a model named by its hub name
    (``shipped_shape``: its config, and the MiniLM alias's tokenizer as a stand-in), before any network."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    cache = DataDir.at(data_dir).cache / "models"
    if (shipped := shipped_shape(cfg)) is not None:
        from normvar_core.pipeline.models.shipped_shapes import STAND_IN, shipped_config

        stand_in = resolve_source(cfg.replace(model=STAND_IN, revision=None), cache)
        return (
            shipped.stem.replace("--", "/", 1),
            shipped_config(shipped),
            AutoTokenizer.from_pretrained(stand_in.path, local_files_only=True),
        )
    src = resolve_source(cfg, cache)
    kw = dict(trust_remote_code=bool(cfg.trust_remote_code), local_files_only=True)
    path, gguf = Path(src.path), None
    if src.gguf_file:
        if src.cache_key and (cache / src.cache_key / "config.json").exists():
            path = cache / src.cache_key
        elif src.prepare is not None:
            path = dequantized_dir(src, cache)  # the file has to be assembled first (gemma's parts)
        else:
            gguf = src.gguf_file
    if gguf is None and path.is_dir() and not (path / "config.json").exists():
        raise NormvarError(
            f"model directory {path} of {src.name!r} lacks config.json",
            fix="pass a transformers model directory (config.json + tokenizer files)",
        )
    extra = {"gguf_file": gguf} if gguf else {}
    kept = facts_folder(data_dir)  # the model class's input, kept (``check_text_model``)
    config = read_model_config(path, src.name, cache=kept, **kw, **extra)  # the checks compute makes, in one place
    if gguf is None and path.is_dir() and not any((path / f).exists() for f in TOKENIZER_FILES):
        raise NormvarError(
            f"model directory {path} of {src.name!r} lacks tokenizer files: the plan counts the "
            "corpus' types with the tokenizer",
            fix="copy tokenizer.json (or the vocab files) beside config.json",
        )
    try:
        tok = AutoTokenizer.from_pretrained(path, **kw, **extra)
    except (OSError, ValueError) as exc:
        raise NormvarError(
            f"could not read the tokenizer of model {src.name!r}: {str(exc).splitlines()[0]}"[:300],
            fix="pass a transformers model directory (config.json + tokenizer files)",
        ) from None
    check_tokenizer(tok, src.name)
    return src.name, config, tok


__all__ = ["ModelShape", "text_config", "shape_from_config", "shape_of_loaded", "shipped_shape", "config_and_tokenizer"]
