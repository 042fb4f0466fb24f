"""The memory plans of docs/scale.md (its 7B and 40B tables): Llama-2-7B and Falcon-40B shapes (configs from
transformers config classes, no weights; the MiniLM WordPiece tokenizer counts the types of the shipped
novels, a stand-in for the models' own tokenizers), bf16 on a GPU, on 24 GB, 80 GB and 8 x 80 GB (Ray: one
actor per GPU, each holding the weights, a partial state of every measure and one batch's pass; the
driver merging partial states in host memory). Usage: .venv/bin/python benchmarks/plan_shapes.py [--max-sentences N]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def shape_dirs(root: Path) -> dict[str, Path]:
    from conftest import installed_minilm_dir
    from transformers import FalconConfig, LlamaConfig

    out = {}
    for name, c in {
        "Llama-2-7B": LlamaConfig(
            vocab_size=32000,
            hidden_size=4096,
            intermediate_size=11008,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=32,
            max_position_embeddings=4096,
        ),
        "Falcon-40B": FalconConfig(
            vocab_size=65024,
            hidden_size=8192,
            num_hidden_layers=60,
            num_attention_heads=128,
            num_kv_heads=8,
            new_decoder_architecture=True,
            parallel_attn=True,
            bias=False,
            alibi=False,
        ),
    }.items():
        d = root / name
        c.save_pretrained(d)
        for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
            if (installed_minilm_dir() / f).exists():
                shutil.copy(installed_minilm_dir() / f, d / f)
        out[name] = d
    return out


def main() -> None:
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.corpus import read as C
    from normvar_core.pipeline.memory.plan import gb, run_budget
    from normvar_core.pipeline.memory.terms import GiB, publish_sum
    from normvar_core.pipeline.model_shape import config_and_tokenizer, shape_from_config
    from normvar_core.pipeline.run_plan import make_plan

    ap = argparse.ArgumentParser()
    ap.add_argument("--max-sentences", type=int, default=None)
    ap.add_argument(
        "--devices",
        action="store_true",
        help="docs/scale.md's 'Per-device plans' table: each shape "
        "device-mapped over 1, 2, 4, 8 x 80 GB (--batch-size 32)",
    )
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="normvar-shapes-"))
    if args.devices:
        return per_device(root, args.max_sentences)
    for name, d in shape_dirs(root).items():
        for batch in (None, 32):
            cfg = RunConfig(
                model=str(d), device="cuda", dtype="bfloat16", max_sentences=args.max_sentences, batch_size=batch
            )
            mname, config, tok = config_and_tokenizer(cfg)
            shape = shape_from_config(config, name, tokenizer=tok)
            plan = make_plan(
                cfg,
                C.load_sentences(cfg),
                tok,
                num_hidden_states=shape.num_hidden_states,
                max_length=shape.max_length,
                device_type="cuda",
            )
            ctx = RunContext(cfg=cfg, layers=plan.layers, dim=shape.dim, device="cuda", plan=plan, tokens=plan.tokens)
            for mem in (24, 80):
                mp = run_budget(
                    cfg.replace(memory_gb=mem), ctx, shape=shape, device="cuda", dtype="bfloat16", loaded=False
                )
                print(f"\n### {name}, --memory-gb {mem}" + (f" --batch-size {batch}" if batch else ""))
                print("\n".join(mp.lines()))
            # Ray, 8 x 80 GB: every actor holds what one GPU run holds; the driver the merged state + one layer
            # block of an incoming partial (execute/ray_merge.py: pieces fetched and merged one layer at a time)
            mp = run_budget(cfg.replace(memory_gb=80), ctx, shape=shape, device="cuda", dtype="bfloat16", loaded=False)
            kept = sum(b for k, b in mp.measures.items() if k not in mp.dropped)
            host = run_budget(
                cfg.replace(memory_gb=1e6, device="cpu"), ctx, shape=shape, device="cpu", dtype="bfloat16", loaded=False
            )
            print(f"\n### {name}, 8 x 80 GB (Ray)" + (f" --batch-size {batch}" if batch else ""))
            print(
                f"  each actor (GPU): {gb(mp.total_bytes)} = weights {gb(mp.weights_bytes)} + measures "
                f"{gb(kept)} + pass {gb(mp.pass_bytes)}; dropped: {', '.join(mp.dropped) or 'none'}"
                + ("" if mp.fits else " — does NOT fit")
            )
            block = kept / max(len(plan.layers), 1)  # one layer of the incoming partial's arrays
            # the results of the measures the actors keep, and the writer (``memory.terms.publish_sum``)
            publish = publish_sum({k: b for k, b in host.publish.items() if k != "writer"}, drop=mp.dropped)
            print(
                f"  driver (host RAM): merged state + one incoming layer block = {gb(kept)} + {gb(block)} + runtime "
                f"{gb(host.runtime_bytes)} + plan {gb(host.plan_bytes)} + publish {gb(publish)} = "
                f"{gb(kept + block + host.runtime_bytes + host.plan_bytes + publish)}"
            )
            print(f"  types {mp.types:,}, P {mp.sample_positions:,}, K {mp.id_sample:,}; memory {gb(mem * GiB)}")


def per_device(root: Path, max_sentences: int | None) -> None:
    """One markdown row per shape and number of 80 GB GPUs: fits, the fullest GPU, what is kept."""
    from normvar_core.config import RunConfig
    from normvar_core.device_options import parse_devices
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.corpus import read as C
    from normvar_core.pipeline.memory.per_device import plan_devices
    from normvar_core.pipeline.memory.plan import gb
    from normvar_core.pipeline.model_shape import config_and_tokenizer, shape_from_config
    from normvar_core.pipeline.run_plan import make_plan

    print("| shape | GPUs | fits | layers per GPU | fullest GPU: weights + state + pass | dropped |")
    print("|---|---:|---|---|---|---|")
    for name, d in shape_dirs(root).items():
        cfg = RunConfig(model=str(d), device="cuda", dtype="bfloat16", max_sentences=max_sentences, batch_size=32)
        _, config, tok = config_and_tokenizer(cfg)
        shape = shape_from_config(config, name, tokenizer=tok)
        plan = make_plan(
            cfg,
            C.load_sentences(cfg),
            tok,
            num_hidden_states=shape.num_hidden_states,
            max_length=shape.max_length,
            device_type="cuda",
        )
        ctx = RunContext(cfg=cfg, layers=plan.layers, dim=shape.dim, device="cuda", plan=plan, tokens=plan.tokens)
        for n in (1, 2, 4, 8):
            p = plan_devices(ctx, shape, config, parse_devices(f"{n}x80"), dtype="bfloat16")
            gpus = [r for r in p["devices"] if r["device"].startswith("cuda")]
            top = max(gpus, key=lambda r: r["bytes"])
            disk = [r for r in p["devices"] if r["device"] == "disk"]
            spread = "/".join(str(len(r["layers"])) for r in gpus) + (
                f" + disk {len(disk[0]['layers'])}" if disk else ""
            )
            print(
                f"| {name} (T = {ctx.num_types:,}) | {n} | {'yes' if p['fits'] else '**no**'} | {spread} | "
                f"{top['device']}: {gb(top['weights_bytes'])} + {gb(top['state_bytes'])} + {gb(top['pass_bytes'])} "
                f"= {gb(top['bytes'])} | {', '.join(p['dropped']) or 'nothing'} |"
            )


if __name__ == "__main__":
    main()
