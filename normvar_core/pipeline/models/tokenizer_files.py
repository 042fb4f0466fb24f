"""A run's tokenizer read from its files alone — without torch or transformers — for the dashboard's
token lookup (``stats.lookup``): the ``tokenizers`` library loads ``tokenizer.json`` and gives the
tokenizer's own normalizer (an uncased BERT lowercases and strips accents) and its split of a word
into types. A model directory with only ``vocab.txt`` falls back to ``tokenizer_config.json``'s
``do_lower_case``. Nothing here imports torch: ``resolve.resolve_source`` only finds paths.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from normvar_core.config import RunConfig
from normvar_core.datadir import DataDir
from normvar_core.pipeline.models.aliases import ALIASES
from normvar_core.pipeline.models.resolve import resolve_source


@dataclass(frozen=True)
class TokenizerFiles:
    normalise: Callable[[str], str]
    """Text as the tokenizer normalises it before splitting."""
    pieces: Callable[[str], list[str]]
    """The types a word is split into (no special tokens); [] when unknown."""
    source: str
    """Where the files were read from."""


def _lower_strip_accents(s: str) -> str:
    s = unicodedata.normalize("NFD", s.lower())
    return "".join(c for c in s if unicodedata.category(c) != "Mn")


def from_directory(path: Path) -> TokenizerFiles | None:
    """The tokenizer of a model directory, or None when it holds no tokenizer file we can read."""
    path = Path(path)
    tj = path / "tokenizer.json"
    if tj.is_file():
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tj))
        tok.no_padding()
        tok.no_truncation()
        norm = tok.normalizer

        def normalise(s: str) -> str:
            return norm.normalize_str(s) if norm is not None else s

        def pieces(s: str) -> list[str]:
            return list(tok.encode(s, add_special_tokens=False).tokens) if s.strip() else []

        return TokenizerFiles(normalise, pieces, str(tj))
    cfg = path / "tokenizer_config.json"
    if cfg.is_file():
        try:
            lower = bool(json.loads(cfg.read_text()).get("do_lower_case", False))
        except (OSError, ValueError):
            lower = False
        return TokenizerFiles(_lower_strip_accents if lower else (lambda s: s), lambda s: [], str(cfg))
    return None


def for_model(model: str, data_dir=None) -> TokenizerFiles | None:
    """The tokenizer files of a run's ``model`` (alias, local directory or cached hub id); None when
    they cannot be found offline (the lookup then matches the names as typed)."""
    try:
        cfg = RunConfig(model=model)
        cache = DataDir.at(data_dir).cache / "models"
        name = cfg.model.strip()
        if name not in ALIASES and not Path(name).expanduser().exists():
            from huggingface_hub import snapshot_download

            src_path = Path(snapshot_download(name, local_files_only=True))
        else:
            src = resolve_source(cfg, cache)
            src_path = (cache / src.cache_key) if src.gguf_file and src.cache_key else src.path
        return from_directory(src_path)
    except Exception:
        return None


__all__ = ["TokenizerFiles", "from_directory", "for_model"]
