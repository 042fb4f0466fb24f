"""``normvar plan --devices`` (issue 32, item 3): Llama-2-7B and Falcon-40B shapes (configs only, the model on the
meta device, no weights) device-mapped over 1, 2, 4 and 8 x 80 GB. Each device's bytes equal docs/scale.md's
"Running a 40B model" formulas — the weights from the blocks' closed-form parameter counts and the modules the
map puts there, the state as each measure plans it (``planned_bytes``, checked against a real state in test_plan.py
and the contract test) at that device's layers, the pass share — and ``fits``
and what each run keeps match the table of docs/scale.md ("Per-device plans")."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

from normvar_core.pipeline.measures import MEASURES

E = 2  # bfloat16


def assert_drops_follow_the_rule(ctx, shape, config, devices: dict, got: dict) -> None:
    """The per-device plan's drops follow its rule, whatever the registry holds (no list of today's measures):
    only droppable measures, in registry order; a plan that fits keeps every measure it can (each dropped one put
    back overflows a device); a plan that does not fit has dropped every droppable measure an overflowing device
    holds."""
    from normvar_core.pipeline.memory.per_device import device_rows, meta_model
    from normvar_core.pipeline.models.device_map import device_name

    droppable = [c.name for c in MEASURES if c.droppable(ctx)]
    assert got["dropped"] == [n for n in droppable if n in got["dropped"]], got["dropped"]
    model = meta_model(config, "bfloat16", False)
    limits = {device_name(k): int(v) for k, v in devices.items()}

    def rows(drop):
        return device_rows(ctx, shape, model, got["device_map"], limits, "bfloat16", MEASURES, drop)

    if got["fits"]:
        for name in got["dropped"]:
            back = rows([n for n in got["dropped"] if n != name])
            assert not all(r["fits"] for r in back), (name, "fits again")
    else:
        over = [r for r in rows(()) if not r["fits"] and r["state_bytes"] and r["device"] != "disk"]
        held = {n for r in over for n in r["measures"]}
        assert got["dropped"] == [n for n in droppable if n in held]


def block_params(kind: str, d: int) -> int:
    if kind == "llama-2-7b":  # q, k, v, o (32 kv heads) + gate, up, down (f = 11008) + two RMSNorms
        return 4 * d * d + 3 * d * 11008 + 2 * d
    # Falcon-40B: fused q + 8 kv heads' k and v (head 64), dense, 4d MLP, two LayerNorms with bias
    return d * (d + 2 * 8 * 64) + d * d + 8 * d * d + 4 * d


NAMES = {
    "llama-2-7b": ("embed_tokens", "layers.", "norm", 32000, 1),
    "falcon-40b": ("word_embeddings", "h.", "ln_f", 65024, 2),
}


@pytest.fixture(scope="module")
def contexts(shapes):
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.corpus import read as C
    from normvar_core.pipeline.model_shape import config_and_tokenizer, shape_from_config
    from normvar_core.pipeline.run_plan import make_plan

    out = {}
    for kind in NAMES:
        cfg = RunConfig(model=str(shapes[kind]), device="cuda", dtype="bfloat16", max_sentences=2000, batch_size=32)
        name, config, tok = config_and_tokenizer(cfg)
        shape = shape_from_config(config, name, tokenizer=tok)
        plan = make_plan(
            cfg,
            C.load_sentences(cfg),
            tok,
            num_hidden_states=shape.num_hidden_states,
            max_length=shape.max_length,
            device_type="cuda",
        )
        out[kind] = (
            RunContext(cfg=cfg, layers=plan.layers, dim=shape.dim, device="cuda", plan=plan, tokens=plan.tokens),
            shape,
            config,
        )
    return out


def state_of(ctx, layers: list[int], dropped) -> int:
    """What the measures kept plan to hold for ``layers`` alone (a device's share of the run)."""
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.measures import MEASURES

    sub = RunContext(cfg=ctx.cfg, layers=layers, dim=ctx.dim, device=ctx.device, plan=ctx.plan, tokens=ctx.tokens)
    return sum(cls.planned_bytes(sub) for cls in MEASURES if cls.name not in dropped) if layers else 0


def update_of(ctx, layers: list[int], dropped, n: int, rows: int) -> int:
    """The measures' update of a batch of n tokens in ``rows`` sentences for ``layers`` alone: the shared view
    (8·n·d + 8·d², with a split 12·n·d + 24·d², + 8·n) + Σ held + max(peak − held) over the kept measures."""
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.measures.layerview import LayerMajor

    sub = RunContext(cfg=ctx.cfg, layers=layers, dim=ctx.dim, device=ctx.device, plan=ctx.plan, tokens=ctx.tokens)
    kept = [c for c in MEASURES if c.asked(ctx.cfg) and c.name not in dropped]
    if not layers or not kept:
        return 0
    d, split = ctx.dim, any(c.splits_view for c in kept)
    view = (12 * n * d + 24 * d * d if split else 8 * n * d + 8 * d * d) + 8 * n
    held = [c.update_held(sub, n, rows) for c in kept]
    peaks = [c.update_bytes(sub, n, rows) - h for c, h in zip(kept, held)]
    return view * any(issubclass(c, LayerMajor) for c in kept) + sum(held) + max(peaks)


def expected_rows(kind: str, ctx, p: dict, dmap: dict, n_gpus: int, batch, dropped) -> dict:
    """Each device's bytes from the formulas of docs/scale.md ("Per-device plans"), given the map's placement of
    the modules."""
    emb, prefix, norm, V, norm_vectors = NAMES[kind]
    L1, d = p["hidden_states"], p["dim"]
    heads, ffn = (32, 11008) if kind == "llama-2-7b" else (128, 4 * d)
    where = {k: v for k, v in dmap.items()}
    block_dev = [where.get(f"{prefix}{i}", where.get("")) for i in range(L1 - 1)]
    emb_dev, norm_dev = where.get(emb, where.get("")), where.get(norm, where.get(""))
    produced = [emb_dev] + block_dev[:-1] + [norm_dev]  # f_L: after the final norm
    rows, width, N = batch
    P = rows * width
    devices = list(dict.fromkeys([*where.values(), *(f"cuda:{i}" for i in range(n_gpus))]))
    out = {dev: dict(weights=0, state=0, pass_=0, layers=[], early=0) for dev in devices}
    for dev in devices:
        # an offloaded entry ("disk" here: no "cpu" device given): its blocks run on cuda:0, its state and the kept
        # copy of its layers' positions stay in host memory (the "disk" row stands for it)
        run_on = dev if dev.startswith("cuda") else "cuda:0"
        out[dev]["weights"] = E * (
            block_dev.count(dev) * block_params(kind, d)
            + (emb_dev == dev) * V * d
            + (norm_dev == dev) * norm_vectors * d
        )
        layers = out[dev]["layers"] = [l for l in range(L1) if produced[l] == dev]
        out[dev]["state"] = state_of(ctx, layers, dropped)
        # the occurrences' early pass: a running float64 d x d scatter, mean and batch scatter per layer, before
        # the measures exist (the larger of it and the state counts)
        out[dev]["early"] = 0 if "occurrences" in dropped else 8 * len(layers) * d * (d + 2)
        out[run_on]["pass_"] += produced.count(dev) * P * d * E + (dev in block_dev) * (
            P * (ffn + 4 * d) * E + rows * heads * width**2 * E
        )
        out[dev]["pass_"] += bool(layers) * len(layers) * N * d * E + update_of(ctx, layers, dropped, N, rows)
    return out


@pytest.mark.parametrize("kind", list(NAMES))
def test_per_device_bytes_equal_the_formulas_and_drops_follow_the_rule(contexts, kind):
    from normvar_core.device_options import parse_devices
    from normvar_core.pipeline.memory.per_device import plan_devices

    ctx, shape, config = contexts[kind]
    p = {
        "hidden_states": shape.num_hidden_states,
        "dim": shape.dim,
        "types": ctx.num_types,
        "layers": ctx.layers,
        "sample_positions": int(ctx.plan.samples.size),
        "id_sample": int(ctx.plan.uniform.size),
        "embeddings": int(ctx.plan.total_embeddings),
    }
    for n in (1, 2, 4, 8):
        devices = parse_devices(f"{n}x80")
        got = plan_devices(ctx, shape, config, devices, dtype="bfloat16")
        assert_drops_follow_the_rule(ctx, shape, config, devices, got)
        want = expected_rows(kind, ctx, p, got["device_map"], n, got["batch"], got["dropped"])
        assert [r["device"] for r in got["devices"]] == list(want)
        for r in got["devices"]:
            w = want[r["device"]]
            assert r["layers"] == w["layers"], (kind, n, r["device"])
            assert 0 <= r["weights_bytes"] - w["weights"] < 4096, (kind, n, r["device"])  # + rotary buffers
            assert r["pass_bytes"] == w["pass_"], (kind, n, r["device"])
            assert r["state_bytes"] == w["state"], (kind, n, r["device"])
            assert r["early_bytes"] == (w["early"] if r["device"] != "disk" else 0), (kind, n, r["device"])
            if r["device"] != "disk":
                assert r["bytes"] == r["weights_bytes"] + max(r["state_bytes"], r["early_bytes"]) + r["pass_bytes"]
                assert r["limit_bytes"] == 80 * 2**30 and r["fits"] == (r["bytes"] <= 80 * 2**30)
        assert sorted(l for r in got["devices"] for l in r["layers"]) == list(range(shape.num_hidden_states))
        gpus = {v for v in got["device_map"].values() if v.startswith("cuda")}
        assert len(gpus) >= min(n, 7)  # accelerate's balanced map uses (nearly) every GPU


def test_plan_cli_devices_json(capsys, tmp_path, shapes, corpus40):
    code, out, err = run_cli(
        capsys,
        "plan",
        "--json",
        "--model",
        shapes["falcon-40b"],
        "--dtype",
        "bfloat16",
        "--corpus",
        corpus40,
        "--devices",
        "2x80",
        "--data-dir",
        tmp_path,
    )
    assert code == 0, err
    p = json.loads(out)
    assert [r["device"] for r in p["devices"]] == ["cuda:0", "cuda:1"] and p["fits"]
    assert set(p["devices"][0]) >= {
        "device",
        "weights_bytes",
        "state_bytes",
        "pass_bytes",
        "bytes",
        "limit_bytes",
        "fits",
    }
    assert p["total_bytes"] == sum(r["bytes"] for r in p["devices"])
    # the occurrences' early pass: per device its layers' running scatters, nothing held on the host (a GPU run)
    L, d = p["hidden_states"], p["dim"]
    assert [r["early_bytes"] for r in p["devices"]] == [8 * len(r["layers"]) * d * (d + 2) for r in p["devices"]]
    assert p["early_pass"]["scatter_bytes"] == 8 * L * d * (d + 2) and p["early_pass"]["host_bytes"] == 0
    assert p["early_pass"]["positions"] >= p["embeddings"] and p["early_pass"]["batches"] >= 1  # 40 sentences: all
    code, out, err = run_cli(
        capsys,
        "plan",
        "--model",
        shapes["falcon-40b"],
        "--dtype",
        "bfloat16",
        "--corpus",
        corpus40,
        "--devices",
        "1x70",  # GiB: 76.9 GiB of bf16 weights spill to disk
        "--data-dir",
        tmp_path,
    )
    assert code == 0 and "does NOT fit" in out and "disk" in out and "--offload-folder" in out
    code, out, err = run_cli(
        capsys, "plan", "--model", "minilm", "--corpus", corpus40, "--devices", "8y80", "--data-dir", tmp_path
    )
    assert code == 2 and err.count("\n") == 1 and "--devices" in err
