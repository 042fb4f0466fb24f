"""``normvar plan`` for the shapes that ship (the Razzhigaev et al. 2024 protocol's models, by their hub names,
offline): the host row always, GiB labelled as GiB, dropped measures not counted, the checkpoint's size; and
every ``normvar plan`` example of the manual runs as printed."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from cli_helpers import run_cli

from normvar_core.pipeline.memory.terms import RUNTIME_BYTES, GiB

ROOT = Path(__file__).resolve().parent.parent
CAP = ["--max-sentences", "200"]
"""The corpus capped for speed (the full novels take minutes to tokenize on a loaded machine): the memory figures
follow from the same formulas at any size."""


def _plan(capsys, tmp_path, *argv) -> tuple[dict, str]:
    code, out, err = run_cli(capsys, "plan", *argv, *CAP, "--json", "--data-dir", tmp_path)
    assert code == 0, err
    code, text, err = run_cli(capsys, "plan", *argv, *CAP, "--data-dir", tmp_path)
    assert code == 0, err
    return json.loads(out), text


def test_falcon_40b_by_name_offline_shows_the_host_in_gib(capsys, tmp_path, hf_home):
    """8 x 80 GiB for tiiuae/falcon-40b with nothing cached and the hub offline: its shipped config (61 hidden
    states of 8,192, 41.3 B parameters in the base model), a row per device "of 80.0 GiB" (--devices sizes are
    GiB, as --memory-gb), a host row with what it holds while the devices run and at publish, "not checked" for
    its limit (never "fits"), the checkpoint's bytes = the kept measures' state, and no "GB" anywhere."""
    mp, text = _plan(capsys, tmp_path, "--model", "tiiuae/falcon-40b", "--dtype", "bfloat16", "--devices", "8x80")
    assert mp["hidden_states"] == 61 and mp["dim"] == 8192 and mp["model"] == "tiiuae/falcon-40b"
    assert mp["params"] == 41_303_293_952  # the base model (no LM head) built from the config on the meta device
    assert "ships with normvar" in mp["shape_note"] and "minilm tokenizer as a stand-in" in mp["shape_note"]
    gpus = [r for r in mp["devices"] if r["device"].startswith("cuda")]
    assert len(gpus) == 8 and all(r["limit_bytes"] == 80 * 2**30 for r in gpus)
    assert text.count("of 80.0 GiB") == 8 and not re.search(r"\d GB\b", text), text
    h = mp["host"]
    assert not h["row"] and h["limit_bytes"] is None and h["runtime_bytes"] == RUNTIME_BYTES > 0
    assert h["fits"] is None and "not checked" in h["limit"]  # no host limit given: not checked, never "fits"
    assert h["gathered_bytes"] == sum(r["state_bytes"] for r in mp["devices"]) > 0
    assert h["publish_bytes"] == h["runtime_bytes"] + h["plan_bytes"] + h["gathered_bytes"] + h["work_bytes"]
    assert h["work_bytes"] == sum(mp["publish"].values()) > 0 and mp["runtime_bytes"] == RUNTIME_BYTES
    host = next(x for x in text.splitlines() if x.split()[:1] == ["host"])
    assert f"{h['publish_bytes'] / GiB:.1f} GiB at publish" in host and "while the devices run" in host
    kept = {n: b for n, b in mp["measures"].items() if n not in mp["dropped"]}
    assert mp["checkpoint_bytes"] == sum(kept.values()) and f"{sum(kept.values()) / GiB:.1f} GiB" in text
    assert "\n  checkpoint " in text


def test_dropped_early_pass_is_not_counted(capsys, tmp_path):
    """On 8 x 15 GB the devices drop the occurrences: their early pass is not counted (0 bytes, no early-pass
    row, none on any device); on 8 x 80 GB they are kept and it is."""
    mp, text = _plan(capsys, tmp_path, "--model", "tiiuae/falcon-40b", "--dtype", "bfloat16", "--devices", "8x15")
    assert "occurrences" in mp["dropped"], mp["dropped"]
    assert mp["early_pass"]["bytes"] == 0 and "early pass" not in text
    assert all(r["early_bytes"] == 0 for r in mp["devices"])
    said = [x for x in text.splitlines() if x.startswith("  dropped: ")]  # "dropped: occurrences: cuda:0 needs ..."
    assert len(said) == len(mp["dropped"]) and not any(" dropped:" in x[len("  dropped: ") :] for x in said), said
    kept, text = _plan(capsys, tmp_path, "--model", "tiiuae/falcon-40b", "--dtype", "bfloat16", "--devices", "8x80")
    assert "occurrences" not in kept["dropped"] and kept["early_pass"]["bytes"] > 0 and "early pass" in text


def _examples() -> list[tuple[str, list[str]]]:
    """(page, argv) of every ``normvar plan`` line in a code block of the manual (README and docs/)."""
    out = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```[a-z]*\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL):
            for line in block.splitlines():
                line = line.strip().removeprefix("$ ").split("  #")[0].strip()
                if line.startswith("normvar plan ") and "[-h]" not in line:  # a usage synopsis is no example
                    out.append((page.name, shlex.split(line)[1:]))
    return out


EXAMPLES = _examples()


def test_the_manual_has_plan_examples():
    assert {p for p, _ in EXAMPLES} >= {"several-gpus.md", "scale.md", "getting-started.md"} and len(EXAMPLES) >= 5


@pytest.mark.parametrize("page, argv", EXAMPLES, ids=[f"{p}:{' '.join(a)}" for p, a in EXAMPLES])
def test_each_plan_example_of_the_manual_runs_offline(page, argv, capsys, tmp_path):
    """Each example with its options as printed (the corpus capped): it prints a plan; an alias this machine
    has not installed is refused in one line naming the install."""
    from normvar_core.pipeline.models.aliases import ALIASES, alias_installed

    model = argv[argv.index("--model") + 1]
    code, out, err = run_cli(capsys, *argv, *CAP, "--data-dir", tmp_path)
    if model in ALIASES and not alias_installed(model):
        assert code == 2 and "is not installed" in err and "pip install" in err, err
        return
    assert code == 0, (page, err)
    assert out.startswith("model ") and " total " in out and "GiB" in out, out
    if "--devices" in argv:
        assert "\n  host " in out, out
