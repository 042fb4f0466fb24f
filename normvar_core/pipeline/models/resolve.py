"""Where a model's files are: an alias, a local directory or ``.gguf`` file, or a Hugging Face id.

``resolve_source(cfg, cache)`` returns a ``ModelSource`` (a directory, or the directory holding a
GGUF file). GGUF weights are dequantized once and cached as safetensors under ``cache/<key>``
(``dequantized_dir``: temp dir + rename), so later loads take about a second. Nothing here waits on
the network: hub ids are looked up in the local cache first, and the hub is contacted only when it
answers a 2-second probe and HF_HUB_OFFLINE is not set. ``weights_hash``: sha256 of the weight files.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import socket
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import normvar_core.pipeline.models.aliases as A
from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError


@dataclass
class ModelSource:
    name: str
    path: Path  # a directory (or, with gguf_file, the directory holding it)
    revision: str | None = None
    gguf_file: str | None = None
    cache_key: str | None = None  # for GGUF: the dequantized cache directory name
    prepare: Callable[[Path], Path] | None = None  # makes the GGUF file on demand (gemma assemble)


def resolve_source(cfg: RunConfig, cache: Path) -> ModelSource:
    """``cfg.model`` as an alias, a local directory / .gguf file, or a hub id (module docstring)."""
    name = cfg.model.strip()
    if name in A.ALIASES:
        return _resolve_alias(name, cache)
    p = Path(name).expanduser()
    if p.exists():
        p = p.resolve()
        if p.is_file():
            if p.suffix != ".gguf":
                raise NormvarError(
                    f"model path {p} is a file, not a model directory",
                    fix="pass the directory holding config.json, or a .gguf file",
                )
            return ModelSource(name, p.parent, gguf_file=p.name)
        if cfg.gguf_file is None and not (p / "config.json").exists():
            ggufs = sorted(p.glob("*.gguf"))
            if len(ggufs) == 1:
                return ModelSource(name, p, gguf_file=ggufs[0].name)
            raise NormvarError(
                f"{p} holds no config.json (not a transformers model directory)",
                fix="pass a directory saved with save_pretrained, or --gguf-file NAME",
            )
        return ModelSource(name, p, gguf_file=cfg.gguf_file)
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise NormvarError(f"model path not found: {name}", fix="check the path, or use an alias (`normvar models`)")
    return _resolve_hub(cfg)


def _resolve_alias(alias: str, cache: Path) -> ModelSource:
    """The files of an installed alias, by its ``layout`` (``aliases.AliasSpec``)."""
    if not A.alias_installed(alias):
        raise A.not_installed(alias)
    spec = A.ALIASES[alias]
    key = f"{alias}-{spec.version}"
    home = A.module_dir(spec.modules[0]) if spec.modules else None
    if spec.layout == "dir":
        return ModelSource(alias, home / Path(spec.weights).parent)  # type: ignore[operator]  # a dir layout names its module
    if spec.layout == "zip-parts":
        if not (cache / key / "config.json").exists():
            _unzip_parts(spec.part_files(), cache / key)  # type: ignore[arg-type]  # alias_installed checked every part
        return ModelSource(alias, cache / key)
    if spec.layout == "gguf":
        return ModelSource(alias, home, gguf_file=sorted(home.glob(spec.weights))[0].name, cache_key=key)  # type: ignore[arg-type, union-attr]  # a gguf layout names its module

    def assemble(tmp: Path) -> Path:  # gguf-parts: the package joins its part packages
        mod = importlib.import_module(spec.modules[0])
        return Path(mod.assemble(tmp / mod.MODEL_NAME))

    return ModelSource(alias, cache, gguf_file=spec.gguf_file, cache_key=key, prepare=assemble)


def _unzip_parts(parts: list[Path], target: Path) -> None:
    """Concatenate the zip parts and extract once into ``target`` (temp dir + rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        joined = tmp / "model.zip"
        with open(joined, "wb") as out:
            for p in parts:
                with open(p, "rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 22)
        with zipfile.ZipFile(joined) as zf:
            members = [m for m in zf.namelist() if not m.endswith("desktop.ini")]
            zf.extractall(tmp / "x", members=members)
        joined.unlink()
        inner = next(p.parent for p in (tmp / "x").rglob("config.json") if p.parent.name != "1_Pooling")
        _publish_dir(inner, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _publish_dir(src: Path, target: Path) -> None:
    """Rename ``src`` to ``target``; if another process won the race, keep theirs."""
    try:
        os.replace(src, target)
    except OSError:
        if not (target / "config.json").exists():
            raise


def _hub_reachable(timeout: float = 2.0) -> bool:
    """True when HF_HUB_OFFLINE is unset and the hub endpoint answers a TCP connect quickly."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on") or os.environ.get(
        "TRANSFORMERS_OFFLINE", "0"
    ).lower() in ("1", "true", "yes", "on"):
        return False
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def hub_cached(repo: str, revision: str | None = None) -> Path | None:
    """The local Hugging Face cache's snapshot of hub id ``repo``, or None (no network; an id that is not one
    raises ``HFValidationError``)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError

    try:
        return Path(snapshot_download(repo, revision=revision, local_files_only=True))
    except HFValidationError:
        raise
    except Exception:
        return None


def _resolve_hub(cfg: RunConfig) -> ModelSource:
    """A hub id: the local HF cache first; the network only if reachable within 2 s."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError

    repo, rev = cfg.model, cfg.revision
    names = ", ".join(A.ALIASES)
    try:
        path = hub_cached(repo, rev)
    except HFValidationError:
        raise NormvarError(
            f"unknown model {repo!r}: not an alias ({names}), a local path or a hub id",
            fix="check the spelling; `normvar models` lists the aliases",
        ) from None
    if path is not None:
        return ModelSource(repo, path, revision=rev, gguf_file=cfg.gguf_file)
    if not _hub_reachable():
        raise NormvarError(
            f"model {repo!r} is not an alias ({names}), not a local path, and not in the local "
            "Hugging Face cache; the hub is offline",
            fix="pass a local model directory, or install an alias (`normvar models`)",
        )
    patterns = ["*.json", "*.txt", "*.model", "*.safetensors", "*.tiktoken"]
    if cfg.trust_remote_code:
        patterns.append("*.py")
    if cfg.gguf_file:
        patterns.append(cfg.gguf_file)
    try:
        path = Path(snapshot_download(repo, revision=rev, allow_patterns=patterns, etag_timeout=10))
        if not cfg.gguf_file and not any(path.glob("*.safetensors")):
            path = Path(snapshot_download(repo, revision=rev, allow_patterns=patterns + ["*.bin"]))
    except Exception as exc:
        raise NormvarError(
            f"could not download model {repo!r}: {type(exc).__name__}: {exc}".splitlines()[0],
            fix="check the id and revision, or pass a local directory",
        ) from None
    return ModelSource(repo, path, revision=rev, gguf_file=cfg.gguf_file)


def has_accelerate() -> bool:
    return importlib.util.find_spec("accelerate") is not None


def dequantized_dir(src: ModelSource, cache: Path) -> Path:
    """Dequantize a GGUF model once into ``cache/<key>`` (safetensors + tokenizer)."""
    gguf_path = src.path / src.gguf_file if src.prepare is None else None  # type: ignore[operator]  # a GGUF source names its file
    key = src.cache_key
    if key is None:
        st = gguf_path.stat()  # type: ignore[union-attr]  # prepare is None here (a GGUF file)
        digest = hashlib.sha256(f"{gguf_path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()  # type: ignore[union-attr]
        key = f"{gguf_path.stem}-{digest[:12]}"  # type: ignore[union-attr]
    target = cache / key
    if (target / "config.json").exists():
        return target
    if gguf_path is not None and not gguf_path.exists():
        raise NormvarError(
            f"GGUF file not found: {gguf_path}", fix="check --gguf-file (a file inside the model directory)"
        )
    if not has_accelerate():
        raise NormvarError("loading a GGUF model needs the accelerate package", fix="pip install accelerate")
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=cache))
    try:
        if src.prepare is not None:
            gguf_path = src.prepare(tmp)
        out = _dequantize(gguf_path, tmp / "model")  # type: ignore[arg-type]  # a GGUF file
        _publish_dir(out, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _dequantize(gguf_path: Path, out: Path) -> Path:
    """Read a GGUF file with transformers and save it as safetensors + tokenizer (+ its hash) in ``out``."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        model = AutoModel.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    except Exception as exc:
        raise NormvarError(
            f"could not read GGUF file {gguf_path.name}: {exc}".splitlines()[0],
            fix="transformers reads llama/gemma/qwen-family GGUF files; check the file",
        ) from None
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "normvar_source.json").write_text(
        json.dumps(
            {"gguf_file": gguf_path.name, "gguf_size": gguf_path.stat().st_size, "weights_hash": weights_hash(out)}
        )
    )
    return out


_HASH_CACHE: dict[tuple, str] = {}


def weights_hash(source: str | os.PathLike | Any) -> str:
    """sha256 over the weight files' bytes (``*.safetensors``, else ``*.bin``/``*.pt``, sorted by
    name) of a directory or file; for a torch module without files, over its state dict."""
    if not isinstance(source, (str, os.PathLike)):
        import torch

        h = hashlib.sha256()
        for name, t in sorted(source.state_dict().items()):
            h.update(name.encode())
            h.update(t.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes())
        return h.hexdigest()
    p = Path(source)
    files = (
        [p]
        if p.is_file()
        else sorted(p.glob("*.safetensors"))
        or sorted(list(p.glob("*.bin")) + list(p.glob("*.pt")) + list(p.glob("*.gguf")))
    )
    if not files:
        raise NormvarError(f"no weight files in {p}", fix="pass a directory holding *.safetensors or *.bin")
    key = tuple((str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if key not in _HASH_CACHE:
        h = hashlib.sha256()
        for f in files:
            h.update(f.name.encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 22), b""):
                    h.update(block)
        _HASH_CACHE[key] = h.hexdigest()
    return _HASH_CACHE[key]


def cached_hash(path: Path) -> str | None:
    """The weights hash stored beside a dequantized GGUF cache, else hashed now (None: no files)."""
    meta = path / "normvar_source.json"
    if meta.exists():
        try:
            h = json.loads(meta.read_text()).get("weights_hash")
            if h:
                return h
        except (OSError, ValueError):
            pass
    if any(path.glob("*.safetensors")) or any(path.glob("*.bin")):
        return weights_hash(path)
    return None


__all__ = ["ModelSource", "resolve_source", "dequantized_dir", "has_accelerate", "weights_hash", "cached_hash"]
