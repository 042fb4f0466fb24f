"""Sibling runs (``runs.siblings``): the same model, corpus and options with ``exclude_position0``
flipped — found among other runs by their recorded options, and computed from the run's own config."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError
from normvar_core.runs.siblings import excludes_position0, position0_sibling, position0_sibling_config


def _run(name: str, **options):
    opts = RunConfig(model="minilm", name=name, **options).to_dict()
    return SimpleNamespace(name=name, meta={"options": opts})


def test_the_sibling_differs_only_in_position0():
    base = _run("a", max_sentences=300)
    same_flag = _run("b", max_sentences=300)  # not flipped
    other_opts = _run("c", max_sentences=200, exclude_position0=True)  # flipped, but another corpus size
    sibling = _run("d", max_sentences=300, exclude_position0=True)
    assert position0_sibling(base, [None, base, same_flag, other_opts, sibling]) is sibling
    assert position0_sibling(base, [same_flag, other_opts]) is None
    assert position0_sibling(sibling, [other_opts, base]) is base  # and back
    assert position0_sibling(SimpleNamespace(name="x", meta={}), [base, sibling]) is None  # no options: none


def test_the_sibling_config_flips_position0_and_names_it():
    base, excl = _run("a", max_sentences=300), _run("e", max_sentences=300, exclude_position0=True)
    cfg = position0_sibling_config(base)
    assert cfg.exclude_position0 and cfg.name == "a-nopos0"
    assert {k: v for k, v in cfg.to_dict().items() if k not in ("name", "exclude_position0")} == {
        k: v for k, v in base.meta["options"].items() if k not in ("name", "exclude_position0")
    }
    back = position0_sibling_config(excl)
    assert not back.exclude_position0 and back.name == "e-allpos"
    assert not excludes_position0(base) and excludes_position0(excl)


def test_a_sibling_of_a_run_without_options_is_refused():
    with pytest.raises(NormvarError, match="no recorded options"):
        position0_sibling_config(SimpleNamespace(name="x", meta={}))
