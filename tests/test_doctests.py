"""The examples in the library's docstrings run and give what they show (as river's stats do): every module
of ``normvar_core`` whose docstrings hold a ``>>>`` example is collected here."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "normvar_core"
WITH_EXAMPLES = sorted(
    ".".join(p.relative_to(PKG.parent).with_suffix("").parts) for p in PKG.rglob("*.py") if ">>> " in p.read_text()
)


def test_the_library_has_examples():
    assert "normvar_core.stats.axes" in WITH_EXAMPLES


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0, result
