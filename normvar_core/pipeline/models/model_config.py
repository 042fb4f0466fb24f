"""A model's ``config.json`` read and checked once, for ``compute`` and ``plan`` alike (``read_model_config``).

One line naming the fix, before any weight or tokenizer loads, for: a config that cannot be read (not JSON,
unknown ``model_type``, a model needing its own code); a field of the wrong type (``"num_hidden_layers":
"many"``, transformers' strict validation); a size that is not a positive integer (``"hidden_size": -5``);
a model whose main input is not token ids (vision, audio: ``check_text_model``). A config that passes
but cannot be built (a width not a multiple of the heads) is refused by ``build_error`` with the
library's own first line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from normvar_core.errors import NormvarError
from normvar_core.pipeline.models.meta_facts import kept_facts

_NON_TEXT = {"pixel_values": "a vision model", "input_values": "an audio model", "input_features": "an audio model"}
# sizes a text config holds under one of these names; each, where present, must be a positive integer
SIZE_FIELDS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
    "num_key_value_heads",
    "head_dim",
    "n_embd",
    "n_layer",
    "n_head",
    "n_positions",
    "n_inner",
    "d_model",
    "d_ff",
    "num_layers",
    "num_heads",
    "d_kv",
    "encoder_layers",
    "decoder_layers",
    "encoder_attention_heads",
    "decoder_attention_heads",
)
_FIX = "correct config.json (or copy the model folder again)"


def read_model_config(path, name: str, *, cache: Path | None = None, **kw: Any):
    """The transformers config of the model at ``path`` (``kw``: ``from_pretrained``'s options), checked
    as the module doc says; a NormvarError naming the field otherwise. ``cache``: ``check_text_model``'s."""
    from transformers import AutoConfig

    try:
        conf = AutoConfig.from_pretrained(path, **kw)
    except Exception as exc:
        raise config_error(exc, name) from None
    check_sizes(conf, name)
    check_text_model(conf, name, cache=cache, trust_remote_code=bool(kw.get("trust_remote_code")))
    return conf


def config_error(exc: Exception, name: str) -> NormvarError:
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()] or [type(exc).__name__]
    if "trust_remote_code" in lines[0]:
        return NormvarError(f"model {name!r} needs its own code", fix="re-run with --trust-remote-code if you trust it")
    if "validation error for field" in lines[0].lower():  # "Validation error for field 'x':" + "TypeError: ..."
        detail = lines[1].split(": ", 1)[-1] if len(lines) > 1 else lines[0]
        return NormvarError(f"config.json of model {name!r} has a wrong value: {detail}"[:300], fix=_FIX)
    return NormvarError(
        f"could not read the config of model {name!r}: {lines[0]}"[:300],
        fix="pass a transformers model directory (config.json + tokenizer files)",
    )


def check_sizes(conf, name: str) -> None:
    """Every size field of the config and of its text / encoder / decoder sub-configs a positive integer."""
    subs = [conf] + [
        getattr(conf, a) for a in ("text_config", "encoder", "decoder") if hasattr(getattr(conf, a, None), "to_dict")
    ]
    for sub in subs:
        for key in SIZE_FIELDS:
            value = getattr(sub, key, None)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise NormvarError(
                    f"config.json of model {name!r} has {key} = {value!r}; it must be a positive integer", fix=_FIX
                )


def check_text_model(conf, name: str, *, cache: Path | None = None, trust_remote_code: bool = False) -> None:
    """Refuse a model whose main input is not token ids (vision, audio), from its config alone. ``cache``: a folder
    where the model class's input is kept and read back (``meta_facts``: reading it imports the model's code)."""
    facts = kept_facts(cache, "input", conf, trust_remote_code, {}, _input_facts, lambda: _main_input(conf))
    main = facts["main_input_name"]
    if main != "input_ids":
        what = _NON_TEXT.get(main, "not a text model")
        raise NormvarError(
            f"model {name!r} is {what} ({facts['model_class']} reads {main}, not token ids): normvar needs a "
            "text model with a tokenizer and one hidden state per token",
            fix="use a text encoder, decoder or encoder-decoder (BERT, GPT-2, Llama, T5, BART ...)",
        )


def _main_input(conf) -> dict:
    """The model class of ``conf`` and the input it reads (``input_ids`` when transformers maps no class to it)."""
    try:
        from transformers import AutoModel

        cls = AutoModel._model_mapping[type(conf)]
    except Exception:
        return {"model_class": None, "main_input_name": "input_ids"}
    main = str(getattr(cls, "main_input_name", "input_ids"))
    return {"model_class": cls.__name__, "main_input_name": main}  # type: ignore[attr-defined]  # the mapping holds the model class


def _input_facts(facts: dict) -> bool:
    """An "input" entry read back has the fields and types ``_main_input`` gives."""
    cls = facts["model_class"]
    return len(facts) == 2 and isinstance(facts["main_input_name"], str) and (cls is None or isinstance(cls, str))


def build_error(exc: Exception, name: str) -> NormvarError:
    """A config whose values pass but whose model cannot be built (e.g. hidden size 30 with 7 heads)."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return NormvarError(f"model {name!r} cannot be built from its config.json: {first}"[:300], fix=_FIX)


__all__ = ["read_model_config", "check_text_model", "check_sizes", "config_error", "build_error", "SIZE_FIELDS"]
