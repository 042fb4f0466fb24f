"""The shapes of the models the Razzhigaev et al. 2024 protocol measures, known offline by their hub names.

``shapes/<org>--<name>.json`` holds each model's transformers config (a few hundred bytes: its width, depth,
heads, MLP width and vocabulary, as on the hub), so ``normvar plan --model tiiuae/falcon-40b --devices 8x80``
needs neither the network nor the weights. Their tokenizers (megabytes each) do not ship: the plan counts the
corpus' types with the MiniLM alias's WordPiece tokenizer as a stand-in, and says so. A model found locally (an
alias, a folder, the Hugging Face cache) is read from there instead, with its own tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path

SHAPES_DIR = Path(__file__).resolve().parent / "shapes"
STAND_IN = "minilm"
"""The alias whose tokenizer counts the types of a shipped shape."""


def shipped_names() -> dict[str, Path]:
    """{hub name: its shipped config file}: "tiiuae/falcon-40b" for shapes/tiiuae--falcon-40b.json."""
    return {p.stem.replace("--", "/", 1): p for p in sorted(SHAPES_DIR.glob("*.json"))}


def shipped_config_file(model: str) -> Path | None:
    """The shipped config of ``model`` by its hub name ("org/name", case-insensitive; the bare name too, as
    "gpt2" or "falcon-40b"), or None."""
    want = model.strip().rstrip("/").lower()
    for name, path in shipped_names().items():
        if want in (name.lower(), name.split("/", 1)[1].lower()):
            return path
    return None


def shipped_config(path: Path):
    """The transformers config of a shipped shape (``AutoConfig.for_model`` of its JSON)."""
    from transformers import AutoConfig

    values = json.loads(path.read_text(encoding="utf-8"))
    return AutoConfig.for_model(values.pop("model_type"), **values)


__all__ = ["SHAPES_DIR", "STAND_IN", "shipped_config", "shipped_config_file", "shipped_names"]
