"""The New-run form's option widgets, generated from RunConfig's field metadata (``config.opt``):
one widget per field, its default the field's default, its help the field's help. Adding a run
option is adding a field to RunConfig; the CLI flag and this widget follow."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import streamlit as st

from normvar_core.config import RunConfig, field_kind, optional

SPECIAL = ("model", "corpus")  # chosen by the page's own widgets (installed aliases, the upload)
SECTIONS = ("corpus", "model", "options", "advanced")


def widget_key(name: str) -> str:
    return f"w_cfg_{name}"


def config_fields(section: str) -> list:
    return [f for f in fields(RunConfig) if f.name not in SPECIAL and f.metadata.get("section", "advanced") == section]


def _label(f) -> str:
    return f.metadata.get("label") or f.name.replace("_", " ").capitalize()


def config_widget(f, where=st) -> Any:
    """One widget for field ``f``; returns the value to put in the RunConfig dict (None = default)."""
    meta, kind, key = f.metadata, field_kind(f), widget_key(f.name)
    label, help_ = _label(f), meta.get("help")
    if kind is bool:
        return where.checkbox(label, value=bool(f.default), key=key, help=help_)
    if meta.get("choices"):
        choices = list(meta["choices"])
        return where.selectbox(label, choices, index=choices.index(f.default), key=key, help=help_)
    if kind in (int, float):
        step = 1 if kind is int else 0.01
        minimum = meta.get("minimum")
        value = where.number_input(
            label,
            min_value=kind(minimum) if minimum is not None else None,
            max_value=1.0
            if f.name == "sample_frac"
            else None
            if meta.get("maximum") is None
            else kind(meta["maximum"]),
            value=f.default,
            step=step,
            key=key,
            help=help_,
            format="%.4f" if kind is float else "%d",
            placeholder="default" if optional(f) else None,
        )
        return None if value is None else kind(value)
    text = where.text_input(
        label,
        value=""
        if f.default is None
        else ",".join(map(str, f.default))
        if isinstance(f.default, tuple)
        else str(f.default),
        key=key,
        help=help_,
        placeholder="default" if optional(f) else None,
    )
    text = (text or "").strip()
    return text or (None if optional(f) else "")


def config_section(section: str, where=st) -> dict[str, Any]:
    """The widgets of one section, laid out in rows of up to four; {field name: value}."""
    out: dict[str, Any] = {}
    fs = config_fields(section)
    for start in range(0, len(fs), 4):
        cols = where.columns(4)
        for f, col in zip(fs[start : start + 4], cols):
            out[f.name] = config_widget(f, col)
    return out


__all__ = ["config_section", "config_widget", "config_fields", "widget_key", "SPECIAL", "SECTIONS"]
