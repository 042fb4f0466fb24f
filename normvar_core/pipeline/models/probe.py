"""One hooked forward pass on one sentence, read by architecture detection and by App. I's norm tables.

``run_probe(model, tokenizer)`` runs the model once on ``PROBE_SENTENCE`` with forward hooks that
record, on their first call:

* the first transformer block's input and output and the last block's output;
* every module inside the first block, in call order, with its input and output tensor;
* the output of every normalization module that holds parameters, anywhere in the model.

``architecture.detect_architecture`` reads the block records (where the norm sits, whether a final
norm follows the last block); ``norm_params.norm_tables`` reads which hidden states are norm outputs.
``blocks`` finds the transformer blocks and ``producers`` the module whose output each hidden state is (a
device map keeps each state's statistics where that module runs: ``models/device_map.state_places``).
``is_norm`` says what a normalization module is and ``norm_kind`` whether it is a LayerNorm or an
RMSNorm — decided here once for both readers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from normvar_core.errors import NormvarError
from normvar_core.pipeline.models.device_map import input_device

PROBE_SENTENCE = "The old man looked at the sea for a while."
PROBE = 100.0  # probe amplitude: a norm's ε (1e-12 … 1e-5) is negligible against PROBE²


@dataclass
class Probe:
    """What the hooked pass recorded (module docstring). Tensors are those the model produced."""

    ids: Any  # (1, T) input ids of PROBE_SENTENCE
    hidden_states: tuple  # HF's hidden states f_0 … f_L
    block_in: Any = None  # the first block's input
    block_out: Any = None  # the first block's output
    last_block_out: Any = None  # the last block's output
    calls: dict[str, tuple] = field(default_factory=dict)  # first block: {name: (module, input, output)}, call order
    norm_outputs: dict[str, Any] = field(default_factory=dict)  # {module name: output} of every norm with parameters

    def norm_of_hidden_states(self) -> dict[int, str]:
        """{hidden-state index: name of the normalization whose output it is (``torch.equal``)}."""
        import torch

        found: dict[int, str] = {}
        for layer, h in enumerate(self.hidden_states):
            for name, o in self.norm_outputs.items():
                if o is not None and o.shape == h.shape and torch.equal(o, h):
                    found[layer] = name
                    break
        return found


def is_norm(mod) -> bool:
    """A normalization module: torch's LayerNorm / RMSNorm, or a class whose name says "norm"."""
    import torch

    norm_types = tuple(t for t in (torch.nn.LayerNorm, getattr(torch.nn, "RMSNorm", None)) if t)
    return isinstance(mod, norm_types) or "norm" in type(mod).__name__.lower()


def as_function(norm) -> Callable[[np.ndarray], np.ndarray]:
    """The module as a float64 function of one d-vector (fed as a (1, 1, d) batch), on its own device and dtype."""
    import torch

    p = next(norm.parameters(), None)
    device, dtype = (p.device, p.dtype) if p is not None else (torch.device("cpu"), torch.float32)
    if device.type == "meta":  # offloaded (--device-map): accelerate's hook brings the weights to the input
        device = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")

    def f(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            t = torch.as_tensor(x, dtype=torch.float32).to(device=device, dtype=dtype)[None, None]
            return norm(t)[0, 0].to(torch.float64).cpu().numpy()

    return f


def norm_kind(f: Callable[[np.ndarray], np.ndarray], dim: int) -> tuple[str, np.ndarray, np.ndarray]:
    """(kind, f(c·1), f(−c·1)) with c = PROBE: a LayerNorm centres its input, so both constant inputs
    give β; an RMSNorm does not, and gives ±γ/√(1 + ε/c²)."""
    ones = np.full(dim, PROBE)
    plus, minus = f(ones), f(-ones)
    centred = np.allclose(plus, minus, rtol=1e-3, atol=1e-6 * (1 + np.abs(plus).max()))
    return ("LayerNorm" if centred else "RMSNorm"), plus, minus


def blocks(model):
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
        raise NormvarError(
            f"cannot find the transformer blocks of {type(model).__name__}",
            fix="use a standard transformers model (encoder or decoder)",
        )
    return best[1]


def producers(model, num_hidden_states: int, norm_outputs: dict[int, str] | None) -> list[str]:
    """The name of the module whose output each hidden state f_0 … f_L is: the input embeddings, block i-1, or
    the normalization the probe found the state equal to (``Probe.norm_of_hidden_states``: the final norm of
    decoders)."""
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


def first_tensor(x):
    import torch

    if isinstance(x, torch.Tensor):
        return x
    items = x if isinstance(x, (tuple, list)) else x.values() if isinstance(x, dict) else ()
    for y in items:
        t = first_tensor(y)
        if t is not None:
            return t
    return None


def forward(model, ids):
    """Hidden states of ``ids`` (1, T), no attention padding."""
    import torch

    with torch.inference_mode():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True).hidden_states


def run_probe(model, tokenizer) -> Probe:
    """The hooked forward pass on PROBE_SENTENCE (module docstring)."""
    import torch

    stack = blocks(model)
    first, last = stack[0], stack[-1]
    names = {m: n for n, m in first.named_modules() if n}
    rec: dict[str, Any] = {}
    calls: dict[str, tuple] = {}
    norms: dict[str, Any] = {}

    def block_in(mod, args, kwargs):
        x = kwargs.get("hidden_states")
        rec.setdefault("in", x if x is not None else first_tensor(args))

    def block_out(key):  # a forward hook that returns a value replaces the output: these return None
        def hook(mod, args, output) -> None:
            rec.setdefault(key, first_tensor(output))

        return hook

    def call(mod, args, kwargs, output):
        if names[mod] not in calls:
            x = args[0] if args and isinstance(args[0], torch.Tensor) else kwargs.get("hidden_states")
            calls[names[mod]] = (mod, x, first_tensor(output))

    def norm_out(name):
        def hook(mod, args, output) -> None:
            norms.setdefault(name, output if isinstance(output, torch.Tensor) else None)

        return hook

    hooks = [
        first.register_forward_pre_hook(block_in, with_kwargs=True),
        first.register_forward_hook(block_out("out")),
        last.register_forward_hook(block_out("last_out")),
    ]
    hooks += [mod.register_forward_hook(call, with_kwargs=True) for mod in names]
    hooks += [
        mod.register_forward_hook(norm_out(name))
        for name, mod in model.named_modules()
        if name and is_norm(mod) and any(True for _ in mod.parameters(recurse=False))
    ]
    ids = tokenizer(PROBE_SENTENCE, return_tensors="pt")["input_ids"].to(input_device(model))
    try:
        hs = forward(model, ids)
    finally:
        for h in hooks:
            h.remove()
    return Probe(
        ids=ids,
        hidden_states=hs,
        block_in=rec.get("in"),
        block_out=rec.get("out"),
        last_block_out=rec.get("last_out"),
        calls=calls,
        norm_outputs=norms,
    )


__all__ = [
    "Probe",
    "run_probe",
    "is_norm",
    "as_function",
    "norm_kind",
    "blocks",
    "producers",
    "forward",
    "PROBE",
    "PROBE_SENTENCE",
]
