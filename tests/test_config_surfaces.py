"""One source of truth: RunConfig's fields, the CLI flags of `compute`/`submit` and the New-run form
agree — every field reachable from each, the same defaults."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

import pytest

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError
from normvar_core.service.cli import build_parser
from views import _form

FIELDS = [f.name for f in fields(RunConfig)]


def _sub(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


@pytest.mark.parametrize("command", ["compute", "submit"])
def test_every_field_is_a_cli_flag_with_the_same_default(command):
    sub = _sub(command)
    dests = {a.dest for a in sub._actions}
    assert set(FIELDS) <= dests, set(FIELDS) - dests
    ns = sub.parse_args([])
    assert RunConfig.from_args(ns) == RunConfig()


def test_cli_values_reach_the_config():
    ns = _sub("compute").parse_args(
        [
            "--layers",
            "0,3",
            "--no-geometry",
            "--seed",
            "4",
            "--exclude-special",
            "--self-similarity",
            "off",
            "--sample-frac",
            "0.5",
        ]
    )
    cfg = RunConfig.from_args(ns)
    assert cfg.layers == (0, 3) and cfg.geometry is False and cfg.seed == 4 and cfg.exclude_special
    assert cfg.self_similarity == "off" and cfg.sample_frac == 0.5


def test_unknown_and_mistyped_options_are_refused():
    with pytest.raises(NormvarError, match="unknown run option"):
        RunConfig.from_dict({"modle": "x"})
    with pytest.raises(NormvarError, match="--seed -1 is not a whole number from 0 to "):
        RunConfig.from_dict({"seed": -1})
    with pytest.raises(NormvarError, match="--max-words many is not a whole number"):
        RunConfig.from_dict({"max_words": "many"})


def test_every_field_has_a_form_widget_with_the_same_default(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("NORMVAR_DATA", str(tmp_path))
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("views/new_run.py").run()
    assert not at.exception, [e.value for e in at.exception]
    widgets = {}
    for kind in ("checkbox", "selectbox", "number_input", "text_input"):
        for w in getattr(at, kind):
            widgets[w.key] = w
    default = RunConfig()
    for name in FIELDS:
        if name in _form.SPECIAL:
            continue
        w = widgets.get(_form.widget_key(name))
        assert w is not None, f"no form widget for {name}"
        value = w.value
        if isinstance(value, str) and name not in ("self_similarity", "device", "dtype", "mean_dtype"):
            value = value or None
        assert RunConfig.from_dict({name: value}) == default, (name, w.value)
    assert {"w_model", "w_upload"} <= set(widgets) | {"w_upload"}
