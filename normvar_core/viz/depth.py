"""Layers by depth: the default (middle) layer, the nearest stored layer, and the relative depth that lines up
runs of different models (0 = input embeddings, 1 = last hidden state). Pure Python."""

from __future__ import annotations

from collections.abc import Sequence


def default_layer(layers: Sequence[int]) -> int:
    """The middle stored layer (the study's Fig. 1, 2, 7 use the middle layer)."""
    layers = list(layers)
    return int(layers[len(layers) // 2]) if layers else 0


def nearest_layer(layers: Sequence[int], layer: int | None) -> int:
    """``layer`` if the run stores it, else the closest stored one (None -> middle)."""
    layers = [int(x) for x in layers]
    if not layers:
        return 0
    if layer is None:
        return default_layer(layers)
    return min(layers, key=lambda x: (abs(x - int(layer)), x))


def relative_depth(layer: int, num_hidden_states: int) -> float:
    """Hidden-state index -> depth in [0, 1] (0 = input embeddings, 1 = last hidden state)."""
    last = max(int(num_hidden_states) - 1, 1)
    return float(layer) / last


def layer_at_depth(layers: Sequence[int], depth: float, num_hidden_states: int | None = None) -> int:
    """The stored layer whose relative depth is closest to ``depth`` (ties -> the shallower)."""
    layers = [int(x) for x in layers]
    if not layers:
        return 0
    n = num_hidden_states if num_hidden_states else max(layers) + 1
    return min(layers, key=lambda x: (round(abs(relative_depth(x, n) - float(depth)), 9), x))
