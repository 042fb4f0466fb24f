"""``make screenshots`` in the suite: docs/_scripts/screenshots.py, run as ``make screenshots`` runs it but on a
small run (60 sentences) and into a temporary folder, writes every image that a page of the manual shows, each a
PNG of the dashboard at full width; and every image the manual shows is in docs/screenshots. No pixel is
compared: the pages' content is the browser tests' business."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
pytestmark = [pytest.mark.browser, pytest.mark.subprocess, pytest.mark.slow]


def shown() -> set[str]:
    """Every screenshots/<name>.png a page of docs/ shows."""
    return {
        name
        for page in DOCS.rglob("*.md")
        for name in re.findall(r"screenshots/([\w.-]+\.png)", page.read_text(encoding="utf-8"))
    }


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


def test_make_screenshots_writes_every_image_the_manual_shows(tmp_path, minilm_path):
    names = shown()
    assert {"tradeoff.png", "findings.png", "compare.png", "occurrences.png"} <= names
    assert all((DOCS / "screenshots" / n).is_file() for n in names), sorted(
        n for n in names if not (DOCS / "screenshots" / n).is_file()
    )
    out = tmp_path / "shots"
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(
        [
            sys.executable,
            str(DOCS / "_scripts" / "screenshots.py"),
            "--out",
            str(out),
            "--data",
            str(tmp_path / "data"),
            "--sentences",
            "60",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    written = {p.name for p in out.glob("*.png")}
    assert names <= written, sorted(names - written)
    for name in written:
        width, height = png_size(out / name)
        assert width >= 1000 and height >= 300, (name, width, height)  # the page's full width, not a thumbnail
