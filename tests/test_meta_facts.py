"""What ``normvar plan`` keeps of the meta model (``models.meta_facts``): a plan read from the kept facts (the shape,
the placement, the model class's input) is the plan built from the model (``--json`` equal, no model built the
second time), an entry that is damaged, foreign or of another key is ignored and written anew, a link at an
entry's name is never followed, a remote-code model is never kept, and the entries that ship for
tiiuae/falcon-40b are what a fresh build gives in this environment."""

from __future__ import annotations

import json
import os

import pytest

from normvar_core.config import RunConfig
from normvar_core.device_options import parse_devices
from normvar_core.pipeline.memory import per_device
from normvar_core.pipeline.models import meta_facts as F
from normvar_core.pipeline.models.shipped_shapes import shipped_config, shipped_config_file

OPTIONS = dict(model="minilm", max_sentences=40, dtype="float32")
DEVICES = "2x1,cpu=64"


@pytest.fixture
def no_shipped(tmp_path, monkeypatch):
    """No shipped entries: every fact comes from the data directory or a build."""
    monkeypatch.setattr(F, "SHIPPED_DIR", tmp_path / "no-shipped")


def _plan(data) -> dict:
    from normvar_core.pipeline.execute.dry_run import plan_run

    return plan_run(RunConfig(**OPTIONS), data, devices=DEVICES).to_dict()


def _no_build(monkeypatch) -> None:
    """Any meta build from here on fails the test."""
    from normvar_core.pipeline import model_shape
    from normvar_core.pipeline.models import model_config

    def refuse(*a, **k):
        raise AssertionError("a model was built: the kept facts were not read")

    monkeypatch.setattr(model_shape, "_built_shape", refuse)
    monkeypatch.setattr(model_config, "_main_input", refuse)
    monkeypatch.setattr(per_device, "meta_model", refuse)


def _entries(data) -> dict[str, dict]:
    folder = F.facts_folder(data)
    return {p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def test_a_plan_from_kept_facts_is_the_built_one(tmp_path, no_shipped, monkeypatch):
    data = tmp_path / "data"
    built = _plan(data)
    entries = _entries(data)
    assert sorted(e["kind"] for e in entries.values()) == ["input", "placement", "shape"]
    _no_build(monkeypatch)
    assert _plan(data) == built  # read back: the same plan, and no model built


@pytest.mark.parametrize(
    "damage",
    [
        lambda e: "{not json",
        lambda e: json.dumps({**e, "key": "0" * 64}),  # another entry's content under this name
        lambda e: json.dumps({**e, "format": F.FORMAT + 1}),
        lambda e: json.dumps({**e, "facts": dict.fromkeys(e["facts"], 1.5)}),
        lambda e: json.dumps({**e, "facts": {}}),
        lambda e: json.dumps([e]),
        lambda e: "",
    ],
    ids=["not_json", "foreign_key", "format", "wrong_type", "no_facts", "a_list", "empty"],
)
def test_a_damaged_entry_is_ignored_and_written_anew(tmp_path, no_shipped, damage):
    data = tmp_path / "data"
    built = _plan(data)
    good = _entries(data)
    for name, entry in good.items():
        (F.facts_folder(data) / name).write_text(damage(entry))
    assert _plan(data) == built  # the model built again, not the damaged facts trusted
    assert _entries(data) == good  # and the entries written anew


def test_a_placement_of_another_depth_is_not_read(tmp_path, no_shipped):
    """Facts that do not fit the model (a hidden state more) are not read: the model is placed anew."""
    data = tmp_path / "data"
    built = _plan(data)
    folder = F.facts_folder(data)
    (name,) = [n for n, e in _entries(data).items() if e["kind"] == "placement"]
    entry = json.loads((folder / name).read_text())
    entry["facts"]["produced"].append(entry["facts"]["produced"][-1])
    (folder / name).write_text(json.dumps(entry))
    assert _plan(data) == built
    assert len(_entries(data)[name]["facts"]["produced"]) == len(entry["facts"]["produced"]) - 1


def test_a_link_at_an_entry_is_not_followed(tmp_path, no_shipped):
    """An entry's name holding a link (to facts that would change the plan) is no entry: the model is built, the
    link replaced by the entry itself, and its target left as it was."""
    data = tmp_path / "data"
    built = _plan(data)
    folder = F.facts_folder(data)
    targets = {}
    for name, entry in _entries(data).items():
        if entry["kind"] == "shape":
            entry["facts"]["params"] += 1_000_000
        targets[tmp_path / f"target-{name}"] = json.dumps(entry)
        next(reversed(targets)).write_text(targets[next(reversed(targets))])
        (folder / name).unlink()
        os.symlink(next(reversed(targets)), folder / name)
    assert _plan(data) == built  # not 1,000,000 parameters more
    assert all(not (folder / name).is_symlink() for name in _entries(data))
    assert all(t.read_text() == text for t, text in targets.items())  # the links' targets untouched


def test_a_remote_code_model_is_never_kept(tmp_path):
    config = shipped_config(shipped_config_file("gpt2"))
    assert F.fact_key("shape", config, True) is None
    assert F.fact_key("shape", config, False) is not None
    built = F.kept_facts(tmp_path, "shape", config, True, {}, lambda f: True, lambda: {"n": 1})
    assert built == {"n": 1} and not list(tmp_path.iterdir())


def test_the_key_follows_the_config_and_the_inputs():
    config = shipped_config(shipped_config_file("gpt2"))
    key = F.fact_key("placement", config, False, dtype="bfloat16")
    assert key == F.fact_key("placement", config, False, dtype="bfloat16")
    assert key != F.fact_key("placement", config, False, dtype="float32")
    assert key != F.fact_key("shape", config, False, dtype="bfloat16")
    other = shipped_config(shipped_config_file("gpt2"))
    other.n_layer += 1
    assert key != F.fact_key("placement", other, False, dtype="bfloat16")


@pytest.mark.slow
def test_the_shipped_entries_are_a_fresh_build(tmp_path, monkeypatch):
    """The entries of ``shapes/meta`` are what building tiiuae/falcon-40b on the meta device gives here (the
    shape; its placement at bfloat16 over 8x80 with --device-map auto, as ``plan --devices 8x80`` asks). When
    transformers, accelerate or torch change, regenerate them: remove shapes/meta/*.json, run ``normvar plan --model
    tiiuae/falcon-40b --devices 8x80 --data-dir D`` and copy D/cache/meta-facts/*.json there."""
    from normvar_core.pipeline.model_shape import shape_from_config

    shipped = {p.name: json.loads(p.read_text()) for p in sorted(F.SHIPPED_DIR.glob("*.json"))}
    monkeypatch.setattr(F, "SHIPPED_DIR", tmp_path / "no-shipped")
    config = shipped_config(shipped_config_file("tiiuae/falcon-40b"))
    kept = tmp_path / "kept"
    shape = shape_from_config(config, "tiiuae/falcon-40b", cache=kept)
    per_device.placed_model(config, "bfloat16", False, None, parse_devices("8x80"), shape.num_hidden_states, cache=kept)
    fresh = {p.name: json.loads(p.read_text()) for p in sorted(kept.glob("*.json"))}
    assert fresh == shipped, "shapes/meta is stale: regenerate it as this test's docstring says"


def test_a_vision_model_is_refused_from_the_kept_input_too(tmp_path, no_shipped, monkeypatch):
    """``check_text_model`` keeps the model class's input: the refusal read back is the refusal built."""
    from transformers import ViTConfig

    from normvar_core.errors import NormvarError
    from normvar_core.pipeline.models import model_config

    config = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    with pytest.raises(NormvarError) as built:
        model_config.check_text_model(config, "vit", cache=tmp_path)
    model_config.check_text_model(shipped_config(shipped_config_file("gpt2")), "gpt2", cache=tmp_path)  # a text model
    monkeypatch.setattr(model_config, "_main_input", lambda conf: pytest.fail("the kept input was not read"))
    with pytest.raises(NormvarError) as kept:
        model_config.check_text_model(config, "vit", cache=tmp_path)
    assert str(kept.value) == str(built.value) and "pixel_values" in str(kept.value)
