"""Placeholder: sub-commands registered by this module (being written)."""
from __future__ import annotations


def register(sub) -> None:  # noqa: D103
    return None
