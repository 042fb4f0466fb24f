"""What ``normvar plan`` reads of a model built on the meta device, kept as plain JSON so that a later plan of the
same model builds none (building it imports the model's transformers code: seconds of CPU for a large one).

Two kinds of entry, each a JSON object ``{"format", "kind", "key", "inputs", "facts"}``:

* ``shape``: the class name, parameter count, buffer bytes and position limit of ``AutoModel.from_config`` on the
  meta device (``model_shape.shape_from_config``; the width, depth, heads ... are read from the config itself);
* ``placement``: the model at the run's dtype placed over ``plan --devices`` (``memory.per_device.placed_model``):
  the device map, the map entry producing each hidden state, each entry's weight bytes and the entries that run a
  block.

The key is a SHA-256 of everything these depend on: the config's whole JSON (``to_json_string``), the kind, for a
placement the dtype, the ``--device-map`` strategy (or the file's map) and the devices' limits, the transformers,
accelerate and torch versions and this file's ``FORMAT``. A model with ``--trust-remote-code`` is never kept (its
code is not in the key). Entries live in the data directory's ``cache/meta-facts`` (``kept_files``: regular files
only, written to a temporary name and published with ``os.replace``, at most ``KEEP``); the package ships the
entries of ``plan --model tiiuae/falcon-40b --devices 8x80`` beside the shipped configs (``shapes/meta``, checked
against a fresh build by tests/test_meta_facts.py). An entry that cannot be read, is not JSON, names another key or
kind, or whose facts do not have the expected fields and types is ignored: the model is built and the entry
written anew.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from normvar_core.pipeline.kept_files import open_kept, package_version, publish_kept, touch_kept
from normvar_core.pipeline.models.shipped_shapes import SHAPES_DIR

FORMAT = 1
"""Bumped when the facts or the way they are computed change: old entries are then never read."""
KEEP = 64
"""Entries kept in the data directory's folder (a few kB each)."""
SUFFIX = ".json"
SHIPPED_DIR = SHAPES_DIR / "meta"
"""The entries that ship with normvar (the shipped shapes' plans named in the module docstring)."""
MAX_BYTES = 16 << 20
"""An entry larger than this is not read (a device map of thousands of modules is far smaller)."""


def facts_folder(data_dir=None) -> Path:
    """``cache/meta-facts`` of the data directory (created when first written)."""
    from normvar_core.datadir import DataDir

    return DataDir.at(data_dir).root / "cache" / "meta-facts"


def fact_key(kind: str, config, trust_remote_code: bool, **inputs: Any) -> str | None:
    """The entry's name for ``config`` and ``inputs`` (JSON values); None when it is not kept (remote code, or a
    config that has no JSON)."""
    if trust_remote_code:
        return None
    try:
        text = config.to_json_string(use_diff=False)
        head = json.dumps({"format": FORMAT, "kind": kind, "inputs": inputs, "versions": _versions()}, sort_keys=True)
    except (TypeError, ValueError, AttributeError):
        return None
    h = hashlib.sha256(head.encode())
    h.update(hashlib.sha256(text.encode()).digest())
    return h.hexdigest()


def _versions() -> list[str]:
    return [package_version(p) for p in ("transformers", "accelerate", "torch")]


def read_facts(path: Path, kind: str, key: str, check: Callable[[Any], bool]) -> dict | None:
    """The facts of the entry at ``path`` when it is whole, of ``kind`` and ``key``, and ``check(facts)`` holds;
    None otherwise (nothing at the name but a regular file of one name is read)."""
    fh = open_kept(path, f"the kept facts of a model ({kind})")
    if fh is None:
        return None
    try:
        with fh:
            raw = fh.read(MAX_BYTES + 1)
        entry = json.loads(raw) if len(raw) <= MAX_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("kind") != kind:
        return None
    facts = entry.get("facts")
    if entry.get("key") != key or not isinstance(facts, dict):
        return None
    try:
        return facts if check(facts) else None
    except (TypeError, ValueError, KeyError, AttributeError):
        return None


def kept_facts(
    folder: Path | None,
    kind: str,
    config,
    trust_remote_code: bool,
    inputs: dict,
    check: Callable[[Any], bool],
    build: Callable[[], dict],
) -> dict:
    """The facts of ``kind`` for ``config`` and ``inputs`` (``fact_key``): from the data directory's ``folder``, else
    from the shipped entries, else ``build()`` (written to ``folder``, best effort; ``inputs`` recorded beside
    them). ``check(facts)``: whether facts read back have the fields and types ``build`` gives."""
    key = fact_key(kind, config, trust_remote_code, **inputs)
    if key is None:
        return build()
    for where in (folder, SHIPPED_DIR):
        if where is None:
            continue
        path = Path(where) / f"{key}{SUFFIX}"
        facts = read_facts(path, kind, key, check)
        if facts is not None:
            if where is folder:
                touch_kept(path)
            return facts
    facts = build()
    if folder is not None:
        text = json.dumps({"format": FORMAT, "kind": kind, "key": key, "inputs": inputs, "facts": facts}, indent=1)
        publish_kept(Path(folder) / f"{key}{SUFFIX}", lambda fh: fh.write(text.encode()), suffix=SUFFIX, keep=KEEP)
    return facts


def whole(value: Any) -> bool:
    """A JSON count: an int (not a bool) of at least 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


__all__ = ["FORMAT", "KEEP", "SHIPPED_DIR", "facts_folder", "fact_key", "read_facts", "kept_facts", "whole"]
