"""A model over several devices (accelerate's big-model path) and where each hidden state's statistics live.

``pretrained_kwargs(cfg)`` are ``from_pretrained``'s ``device_map`` / ``max_memory`` / ``offload_folder`` for
the run's options. Once loaded, ``model.hf_device_map`` says which module sits where (a GPU index, "cpu" or
"disk"); ``state_places(model, probe)`` reads, for every hidden state f_0 … f_L, the module that produced it
(the input embeddings, block i-1, or the final norm whose output the last state is) and its map entry:

* a GPU entry k: the hidden state comes out on cuda:k and its accumulator state lives there;
* "cpu" or "disk" (offloaded): the state lives on the CPU (the weights are streamed to the execution
  device for the pass; the statistics stay in host memory).

The places group the kept layers (one group per map entry, in layer order): each group's accumulators
hold only its layers, so no hidden state crosses devices during the pass (``pipeline/placement.py``).
"""
from __future__ import annotations

from typing import Any

from normvar_core.devicemap import check_offload_folder, parse_max_memory, read_device_map


def pretrained_kwargs(cfg) -> dict[str, Any]:
    """{} without ``--device-map``; else device_map (a strategy or the file's dict), max_memory, offload_folder."""
    if not cfg.device_map:
        return {}
    kw: dict[str, Any] = {"device_map": read_device_map(cfg.device_map)}
    memory = parse_max_memory(cfg.max_memory)
    if memory:
        kw["max_memory"] = memory
    folder = check_offload_folder(cfg.offload_folder)
    if folder is not None:
        kw["offload_folder"] = str(folder)
    return kw


def device_map_of(model) -> dict[str, str] | None:
    """The resolved map {module: "cuda:k" | "cpu" | "disk"} of a device-mapped model, else None."""
    from normvar_core.devicemap import device_name

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


def producers(model, num_hidden_states: int, norm_outputs: dict[int, str] | None) -> list[str]:
    """The module whose output each hidden state f_0 … f_L is: the input embeddings, block i-1, or the
    normalization the probe found the state equal to (the final norm of decoders)."""
    from normvar_core.pipeline.models.probe import blocks

    stack = blocks(model)
    names = {id(m): n for n, m in model.named_modules()}
    emb = names.get(id(model.get_input_embeddings()), "")
    out = []
    for i in range(num_hidden_states):
        if norm_outputs and i in norm_outputs:
            out.append(norm_outputs[i])
        elif i == 0:
            out.append(emb)
        else:
            out.append(names.get(id(stack[min(i - 1, len(stack) - 1)]), ""))
    return out


def state_places(model, num_hidden_states: int, norm_outputs: dict[int, str] | None) -> list[tuple[str, str]] | None:
    """[(map entry, device of the state)] per hidden state of a device-mapped model; None for a model in one piece."""
    dmap = device_map_of(model)
    if dmap is None:
        return None
    places = []
    for name in producers(model, num_hidden_states, norm_outputs):
        entry = entry_of(dmap, name)
        places.append((entry, entry if entry.startswith("cuda") or entry == "mps" else "cpu"))
    return places


__all__ = ["pretrained_kwargs", "device_map_of", "entry_of", "input_device", "producers", "state_places"]
