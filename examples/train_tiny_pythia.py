"""Train a tiny GPT-NeoX (the Pythia architecture) from scratch on the shipped novels, on CPU, and save
checkpoints at log-spaced steps in the Hugging Face Trainer's folder layout — a real checkpoint series
for `normvar sweep --checkpoints OUT` (seed 004's training dynamics), made offline.

    python examples/train_tiny_pythia.py --out runs/tiny-pythia            # defaults: a few minutes on 2 cores
    normvar sweep --checkpoints runs/tiny-pythia --max-sentences 2000

OUT/checkpoint-<step>/ holds config.json, model.safetensors, the tokenizer (a byte-level BPE trained on
the same text with the `tokenizers` package) and trainer_state.json ({"global_step": step}); steps are
0, 16, 32, 64, ... up to --steps. Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "data" / "corpora" / "novels_en.txt.gz"


def log_steps(total: int) -> list[int]:
    """0, 16, 32, 64, ... and the last step."""
    steps = [0] + [16 * 2**k for k in range(int(math.log2(max(total, 16) / 16)) + 1)]
    return sorted({s for s in steps if s <= total} | {total})


def train_tokenizer(sentences: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(sentences, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token="<|pad|>",
    )


def save(model, tok, out: Path, step: int, loss: float | None) -> None:
    d = out / f"checkpoint-{step}"
    model.save_pretrained(d, safe_serialization=True)
    tok.save_pretrained(d)
    (d / "trainer_state.json").write_text(json.dumps({"global_step": step, "loss": loss}))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-sentences", type=int, default=20000)
    a = ap.parse_args(argv)

    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(a.seed)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    t0 = time.time()
    with gzip.open(CORPUS, "rt", encoding="utf-8") as fh:
        sentences = [s.strip() for s in itertools.islice(fh, a.max_sentences) if s.strip()]
    tok = train_tokenizer(sentences, a.vocab)
    eos = tok.eos_token_id
    ids = []
    for s in sentences:
        ids += tok(s)["input_ids"] + [eos]
    data = torch.tensor(ids, dtype=torch.long)
    cfg = GPTNeoXConfig(
        vocab_size=len(tok),
        hidden_size=a.hidden,
        num_hidden_layers=a.layers,
        num_attention_heads=a.heads,
        intermediate_size=4 * a.hidden,
        max_position_embeddings=512,
        rotary_pct=0.25,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=tok.pad_token_id,
        use_parallel_residual=True,
        tie_word_embeddings=False,
    )
    model = GPTNeoXForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 32))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    keep = set(log_steps(a.steps))
    gen = torch.Generator().manual_seed(a.seed)
    loss_val = None
    for step in range(a.steps + 1):
        if step in keep:
            save(model, tok, out, step, loss_val)
            print(
                f"step {step:5d}  loss {loss_val if loss_val is None else round(loss_val, 3)}  "
                f"{time.time() - t0:.0f} s",
                flush=True,
            )
        if step == a.steps:
            break
        starts = torch.randint(0, data.numel() - a.seq_len - 1, (a.batch_size,), generator=gen)
        x = torch.stack([data[s : s + a.seq_len] for s in starts])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        loss_val = loss.item()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
