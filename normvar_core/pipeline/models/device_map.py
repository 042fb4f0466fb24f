"""A model over several devices (accelerate's big-model path): how it is loaded and where its modules sit.

``pretrained_kwargs(cfg)`` are ``from_pretrained``'s ``device_map`` / ``max_memory`` / ``offload_folder`` for
the run's options (``device_options.py`` reads them; ``check_offload_folder`` makes the folder and writes to it
before the model loads). Once loaded, ``model.hf_device_map`` says which module sits where (a GPU index, "cpu"
or "disk"): ``device_map_of`` gives it as torch device names, ``entry_of`` the entry a module falls under (its
longest mapped prefix) and ``input_device`` where the token ids go.

``state_places(device_map, producers)`` gives, for every hidden state f_0 … f_L, the map entry of the module that
produced it (``probe.producers``: the input embeddings, block i-1, or the final norm whose output the last
state is) and where that state's statistics live:

* a GPU entry k: the hidden state comes out on cuda:k and its measure state lives there;
* "cpu" or "disk" (offloaded): the state lives on the CPU (the weights are streamed to the execution
  device for the pass; the statistics stay in host memory).

The places group the kept layers (one group per map entry, in layer order): each group's measures
hold only its layers, so no hidden state crosses devices during the pass (``layer_groups.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from normvar_core.destination import probe_writable
from normvar_core.device_options import parse_max_memory, read_device_map
from normvar_core.errors import NormvarError


def check_offload_folder(folder: str | None) -> Path | None:
    """The offload folder made if missing and written to for real (before the model loads)."""
    if not folder:
        return None
    path = Path(folder).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NormvarError(
            f"cannot make --offload-folder {path}: {exc.strerror or exc}", fix="give a folder you can write in"
        ) from None
    if not path.is_dir():
        raise NormvarError(f"--offload-folder {path} is not a folder", fix="give a folder you can write in")
    probe_writable(path, "--offload-folder")
    return path


def named_devices(cfg) -> list[int | str]:
    """The devices that ``--device-map`` (a JSON file) and ``--max-memory`` name, GPU indices and "mps"."""
    dmap = read_device_map(cfg.device_map)
    named = list(dmap.values()) if isinstance(dmap, dict) else []
    return named + list(parse_max_memory(cfg.max_memory) or {})


def check_devices_present(cfg) -> None:
    """Refuse, before any weight loads, a map or memory limit naming a GPU this machine lacks (one line
    naming it, instead of accelerate's "Device 0 is not available" and a load that fails later)."""
    named = named_devices(cfg)
    gpus = sorted({d for d in named if isinstance(d, int)})
    if gpus:
        import torch

        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        missing = [g for g in gpus if g >= have]
        if missing:
            held = "no GPU" if have == 0 else f"only {have} GPU{'s' if have > 1 else ''} (0..{have - 1})"
            raise NormvarError(
                f"the device map names GPU {missing[0]}, but this machine has {held}",
                fix='map the modules to devices that are here ("cpu", or the GPUs nvidia-smi lists)',
            )
    if "mps" in named:
        import torch

        if not torch.backends.mps.is_available():
            raise NormvarError("the device map names mps, but this machine has no Apple GPU", fix='use "cpu"')


def meta_model(config, dtype: str = "float32", trust_remote_code: bool = False):
    """The model of ``config`` on the meta device: its modules and shapes, no memory, no weights read."""
    import torch
    from transformers import AutoModel

    with torch.device("meta"):
        return AutoModel.from_config(config, trust_remote_code=trust_remote_code, dtype=getattr(torch, dtype))


def check_map_modules(device_map, model, source: str) -> None:
    """A ``--device-map`` file's modules are the model's (its ``named_modules``, "" for the whole model; a meta
    model is enough): a name it lacks would be dropped silently and the run placed otherwise."""
    if not isinstance(device_map, dict):
        return
    names = {n for n, _ in model.named_modules()}
    unknown = [k for k in device_map if k not in names]
    if unknown:
        tops = ", ".join(n for n in list(names) if n and "." not in n)[:120]
        raise NormvarError(
            f"--device-map {source} names module {unknown[0]!r}, which the model does not have",
            fix=f"use the model's module names (top level: {tops})",
        )


def pretrained_kwargs(cfg) -> dict[str, Any]:
    """{} without ``--device-map``; else device_map (a strategy or the file's dict), max_memory, offload_folder."""
    if not cfg.device_map:
        return {}
    check_devices_present(cfg)
    kw: dict[str, Any] = {"device_map": read_device_map(cfg.device_map)}
    memory = parse_max_memory(cfg.max_memory)
    if memory:
        kw["max_memory"] = memory
    folder = check_offload_folder(cfg.offload_folder)
    if folder is not None:
        kw["offload_folder"] = str(folder)
    return kw


def clean_offload_after(model, folder: str | None, before: set[str]) -> None:
    """The weights accelerate wrote into ``folder`` while loading (one file per offloaded tensor, for weights
    it cannot read in place) are removed once ``model`` is gone (its run ended: a worker's job, or the process
    exit); what the folder held before the load stays."""
    if not folder:
        return
    import weakref

    weakref.finalize(model, _remove_new, Path(folder), frozenset(before))


def folder_names(folder: str | None) -> set[str]:
    try:
        return {p.name for p in Path(folder).iterdir()} if folder else set()
    except OSError:
        return set()


def _remove_new(folder: Path, before: frozenset) -> None:
    import shutil

    for name in folder_names(str(folder)) - before:
        p = folder / name
        try:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        except OSError:
            pass


def device_name(key: int | str) -> str:
    """accelerate's device key as a torch device name: 0 -> cuda:0, "cpu", "disk"."""
    return f"cuda:{key}" if isinstance(key, int) else str(key)


def device_map_of(model) -> dict[str, str] | None:
    """The resolved map {module: "cuda:k" | "cpu" | "disk"} of a device-mapped model, else None."""
    hf = getattr(model, "hf_device_map", None)
    return None if not hf else {str(k): device_name(v) for k, v in hf.items()}


def _execution_device():
    import torch

    return torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")


def entry_of(device_map: dict[str, str], module_name: str) -> str:
    """The map entry of ``module_name``: the entry of its longest mapped prefix ("" maps the whole model)."""
    best, where = -1, "cpu"
    for key, dev in device_map.items():
        if key == "" or module_name == key or module_name.startswith(key + "."):
            if len(key) > best:
                best, where = len(key), dev
    return where


def input_device(model):
    """Where the token ids go: the input embeddings' device (a GPU entry), else the execution device
    (offloaded embeddings), else the first parameter's device (a model in one piece)."""
    import torch

    dmap = device_map_of(model)
    if dmap is None:
        return next(model.parameters()).device
    emb = _name_of(model, model.get_input_embeddings())
    entry = entry_of(dmap, emb) if emb is not None else next(iter(dmap.values()))
    return torch.device(entry) if entry.startswith("cuda") else _execution_device()


def _name_of(model, module) -> str | None:
    return next((n for n, m in model.named_modules() if m is module), None)


def state_places(device_map: dict[str, str], producers: list[str]) -> list[tuple[str, str]]:
    """[(map entry, device of the state)] per hidden state, from the module that produced it (``producers``)."""
    places = []
    for name in producers:
        entry = entry_of(device_map, name)
        places.append((entry, entry if entry.startswith("cuda") or entry == "mps" else "cpu"))
    return places


__all__ = [
    "clean_offload_after",
    "folder_names",
    "meta_model",
    "check_map_modules",
    "check_devices_present",
    "named_devices",
    "check_offload_folder",
    "pretrained_kwargs",
    "device_name",
    "device_map_of",
    "entry_of",
    "input_device",
    "state_places",
]
