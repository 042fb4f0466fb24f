"""Encoder–decoder folders (T5, BART) and a vision model (ViT) through the real CLI.

Tiny random-init T5 and BART (hidden 32, 2 + 2 layers) are built from transformers config classes,
with tokenizers trained offline on the shipped novels (T5: a 500-piece Unigram, </s> appended;
BART: byte-level BPE, <s> … </s>). Ground truth: the run's per-type n, μ and Q equal a float64
brute force over the hidden states that the *full* HF model returns for each sentence alone —
``encoder_hidden_states`` for ``--stack encoder`` and ``decoder_hidden_states`` with
``decoder_input_ids`` = [decoder_start] + the sentence for ``--stack decoder``; the run row records
the stack and the Runs page shows it. A ViT folder (config, weights and even tokenizer files) is
refused with one line naming what normvar needs."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from brute import per_type
from cli_helpers import assert_bad, run_cli
from model_dirs import save_model, train_bpe, training_sentences

SENTENCES = [
    f"the old man saw {w} by the river {i % 4} times"
    for i, w in enumerate(["a ship", "the sea", "his daughter", "a bird", "the town", "nothing"] * 5)
]


def _unigram_vocab(sentences: list[str], specials: list[str], size: int = 500):
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(
        sentences,
        trainers.UnigramTrainer(vocab_size=size, special_tokens=specials, unk_token="<unk>", show_progress=False),
    )
    return [tuple(v) for v in json.loads(tok.to_str())["model"]["vocab"]]


@pytest.fixture(scope="module")
def encdec_models(tmp_path_factory, tiny_models) -> dict[str, Path]:
    import transformers as T

    root = tmp_path_factory.mktemp("encdec")
    torch.manual_seed(0)
    sentences = training_sentences(2000)
    out = {}
    vocab = _unigram_vocab(sentences, ["<pad>", "</s>", "<unk>"])
    tok = T.T5Tokenizer(vocab=vocab, extra_ids=0)
    cfg = T.T5Config(
        vocab_size=len(vocab),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.pad_token_id,
    )
    out["t5"] = save_model(root / "tiny-t5", T.T5Model(cfg), tok)
    bvocab, merges = train_bpe(sentences, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"], True)
    tok = T.BartTokenizer(vocab=bvocab, merges=merges)
    cfg = T.BartConfig(
        vocab_size=len(bvocab),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.eos_token_id,
    )
    out["bart"] = save_model(root / "tiny-bart", T.BartModel(cfg), tok)
    vit = T.ViTModel(
        T.ViTConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            image_size=32,
            patch_size=8,
        )
    )
    vit.save_pretrained(root / "tiny-vit")
    for f in Path(tiny_models["bert"]).iterdir():  # a "complete" folder: even tokenizer files
        if "token" in f.name or f.name.startswith("vocab"):
            shutil.copy(f, root / "tiny-vit" / f.name)
    out["vit"] = root / "tiny-vit"
    return out


def _brute(model_dir: Path, stack: str):
    """Per-type (n, μ, Q, M, V) from the full HF model, one sentence at a time (no padding)."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    start = model.config.decoder_start_token_id
    states, ids = [], []
    for s in SENTENCES:
        x = torch.tensor([tok(s)["input_ids"]])
        dec = torch.cat([torch.tensor([[start]]), x], 1)
        with torch.no_grad():
            out = model(input_ids=x, decoder_input_ids=dec, output_hidden_states=True)
        hs = out.encoder_hidden_states if stack == "encoder" else out.decoder_hidden_states
        states.append(torch.stack(hs)[:, 0].double().numpy())
        ids.append((x if stack == "encoder" else dec)[0].numpy())
    return per_type(np.concatenate(states, 1), np.concatenate(ids))


@pytest.mark.slow
@pytest.mark.parametrize("kind,stack", [("t5", "encoder"), ("t5", "decoder"), ("bart", "decoder")])
def test_stack_statistics_equal_the_models_own_hidden_states(kind, stack, capsys, tmp_path, encdec_models):
    from normvar_core.runs.reader import open_run

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    args = [
        "compute",
        "--model",
        encdec_models[kind],
        "--corpus",
        corpus,
        "--name",
        "r",
        "--no-geometry",
        "--samples-per-token",
        0,
        "--batch-size",
        7,
        "--quiet",
        "--data-dir",
        tmp_path / "data",
    ]
    if stack == "decoder":
        args += ["--stack", "decoder"]
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    run = open_run(Path(out.strip()))
    assert run.meta["stack"] == stack and run.meta["architecture"] == {"t5": "T5Model", "bart": "BartModel"}[kind]
    want = _brute(encdec_models[kind], stack)
    stats = run.stats()
    assert sorted(want) == [int(t) for t in stats.token_ids]
    for j, t in enumerate(stats.token_ids):
        n, mu, q, _, _ = want[int(t)]
        assert stats.n[j] == n
        np.testing.assert_allclose(stats.mean[:, j], mu, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(stats.q[:, j], q, rtol=1e-4)
    code, out, _ = run_cli(capsys, "show", "r", "--data-dir", tmp_path / "data")
    assert code == 0 and f"{stack} stack" in out.splitlines()[0]


def test_runs_page_labels_the_stack(tmp_path, encdec_models, monkeypatch):
    from dashboard_run import APP
    from streamlit.testing.v1 import AppTest

    from normvar_core.service import cli

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    data = tmp_path / "data"
    assert (
        cli.main(
            [
                "compute",
                "--model",
                str(encdec_models["t5"]),
                "--corpus",
                str(corpus),
                "--name",
                "dec",
                "--stack",
                "decoder",
                "--no-geometry",
                "--quiet",
                "--data-dir",
                str(data),
            ]
        )
        == 0
    )
    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"run": "dec"})
    at.run()
    assert not at.exception
    assert any(m.label == "model" and m.value.endswith("· decoder") for m in at.metric), [m.value for m in at.metric]
    assert any("T5Model (decoder stack)" in c.value for c in at.caption)


def test_vision_model_and_a_decoder_stack_of_a_one_stack_model_are_refused(
    capsys, tmp_path, encdec_models, tiny_models
):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    line = assert_bad(
        capsys,
        tmp_path / "data",
        "compute",
        "--model",
        encdec_models["vit"],
        "--corpus",
        corpus,
        match="is a vision model",
    )
    assert "pixel_values" in line and "tokenizer and one hidden state per token" in line
    assert_bad(
        capsys,
        tmp_path / "data",
        "compute",
        "--model",
        tiny_models["bert"],
        "--corpus",
        corpus,
        "--stack",
        "decoder",
        match="--stack decoder is for encoder-decoder models",
    )
