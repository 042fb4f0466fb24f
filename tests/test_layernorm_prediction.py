"""App. I — what LayerNorm predicts: the run records ‖γ‖² + ‖β‖² of the normalization whose output each
hidden state is. Ground truth: the modules' own parameters (randomized so that γ ≠ 1, β ≠ 0) on tiny
BERT / RoBERTa (Post-LN: every hidden state), GPT-2 / Llama (Pre-LN: only the final norm), and
Gemma's RMSNorm x·(1 + w), whose effective γ is 1 + w."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline import models as M
from normvar_core.pipeline.models.norm_params import effective_affine, norm_tables
from normvar_core.pipeline.models.probe import is_norm


def _randomized(path, tmp_path):
    """A copy of a tiny model whose normalization weights and biases are random."""
    import transformers as T

    model = T.AutoModel.from_pretrained(path)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for mod in model.modules():
            if is_norm(mod):
                for pname, p in mod.named_parameters(recurse=False):
                    p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1.0 if pname == "weight" else 0.0))
    out = tmp_path / path.name
    model.save_pretrained(out)
    T.AutoTokenizer.from_pretrained(path).save_pretrained(out)
    return out


@pytest.mark.parametrize("kind,norm_layers", [("bert", "all"), ("roberta", "all"), ("gpt2", "last"), ("llama", "last")])
def test_recorded_norm_parameters_equal_the_modules(kind, norm_layers, tiny_models, tmp_path):
    loaded = M.load_model(RunConfig(model=str(_randomized(tiny_models[kind], tmp_path))))
    L = loaded.info.num_hidden_states
    tab = norm_tables(loaded.model, loaded.tokenizer, list(range(L)), loaded.info.dim)["norm_params"].to_pandas()
    mods = dict(loaded.model.named_modules())
    want = list(range(L)) if norm_layers == "all" else [L - 1]
    assert tab.loc[tab["module"] != "", "layer"].tolist() == want
    assert tab.loc[tab["module"] == "", "q_pred"].isna().all()  # Pre-LN blocks: no prediction
    for row in tab[tab["module"] != ""].itertuples():
        mod = mods[row.module]
        w = mod.weight.detach().double().numpy()
        b = mod.bias.detach().double().numpy() if getattr(mod, "bias", None) is not None else np.zeros_like(w)
        assert row.gamma_sq == pytest.approx(w @ w, rel=1e-5)
        assert row.beta_sq == pytest.approx(b @ b, rel=1e-5, abs=1e-9)
        assert row.norm_type == ("RMSNorm" if kind == "llama" else "LayerNorm")


def test_gemma_rmsnorm_scales_by_one_plus_w():
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm

    norm = GemmaRMSNorm(24, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(-0.5, 0.7, 24))
    kind, gamma, beta = effective_affine(norm, 24)
    assert kind == "RMSNorm"
    np.testing.assert_allclose(gamma, 1 + np.linspace(-0.5, 0.7, 24), rtol=1e-5)
    np.testing.assert_allclose(beta, 0, atol=1e-7)


def test_minilm_run_records_every_layernorm(run, minilm_path):
    """The real MiniLM run (Post-LN): every stored hidden state is a LayerNorm output (the embeddings'
    and each block's ``output.LayerNorm``), with the parameters of the real checkpoint. How close
    Q(X_t) comes to the prediction is measured, not assumed (docs/statistics.md: the App. I table)."""
    import transformers as T

    tab = run.table("norm_params").sort_values("layer")
    assert tab["layer"].tolist() == run.layers
    assert tab["module"].tolist() == ["embeddings.LayerNorm"] + [
        f"encoder.layer.{i}.output.LayerNorm" for i in range(len(run.layers) - 1)
    ]
    mods = dict(T.AutoModel.from_pretrained(minilm_path).named_modules())
    for row in tab.itertuples():
        w, b = (mods[row.module].weight.detach().double().numpy(), mods[row.module].bias.detach().double().numpy())
        assert row.q_pred == pytest.approx(w @ w + b @ b, rel=1e-5)


def test_pages_draw_the_prediction(app, run):
    """Trade-off: the line V = ‖γ‖² + ‖β‖² − M at the chosen layer; Decomposition: the predicted Q per
    layer on the raw values and the measured-vs-predicted table."""
    from dashboard_run import arr, figure, open_page, open_section, trace

    tab = run.table("norm_params").set_index("layer")
    at = open_page(app, "tradeoff", layer="3")
    line = trace(figure(at, "layer 3"), "LayerNorm prediction")
    np.testing.assert_allclose(arr(line["x"]) + arr(line["y"]), tab.loc[3, "q_pred"], rtol=1e-12)
    assert any("App. I" in c.value for c in at.caption)
    at.switch_page("views/decomposition.py").run()
    assert not at.exception
    pred = trace(figure(open_section(at, "decomposition", "Raw values"), "Raw values"), "‖γ‖² + ‖β‖² (App. I)")
    np.testing.assert_allclose(arr(pred["y"]), tab.sort_index()["q_pred"].to_numpy(), rtol=1e-12)
    open_section(at, "decomposition", "App. I")  # the tables: App. I's own tab
    from normvar_core.viz.table_words import WORDS

    raw = {w: c for c, w in WORDS.items()}  # the page heads its columns in words: read them back by name
    tables = [d.value.rename(columns=raw) for d in at.dataframe]
    assert not any(c in d.value for d in at.dataframe for c in ("q_pred", "gamma_weighting", "z_energy"))
    shown = next(d for d in tables if "measured_over_predicted" in d)
    assert shown["module"].tolist() == tab.sort_index()["module"].tolist()
    why = next(d for d in tables if "gamma_weighting" in d).set_index("layer")
    assert why.index.tolist() == run.layers
    # the three terms add up to Q(X), and Q(X) from the per-coordinate statistics is the moments' Q(X)
    np.testing.assert_allclose(why["gamma_term"] + why["cross_term"] + why["beta_sq"], why["q_all"], rtol=1e-9)
    np.testing.assert_allclose(why["q_all"], run.layer_stats().set_index("layer").loc[run.layers, "q"], rtol=1e-9)


def test_attribution_equals_brute_force_on_kept_states(tiny_models, tmp_path):
    """Where App. I fails, from the run's tables (``norm_affine`` + ``dim_stats``), against the kept
    hidden states of a tiny BERT with random γ, β and the modules' own parameters, in float64:
    Q(X) = Σ γ² E z² + 2 Σ γ β E z + ‖β‖², z = (x − β)/γ per coordinate."""
    from brute import pass_in_memory

    from normvar_core.stats.layernorm import layernorm_attribution

    cfg = RunConfig(
        model=str(_randomized(tiny_models["bert"], tmp_path)), max_sentences=80, samples_per_token=0, id_sample=50
    )
    plan, source, ctx, parts, measures = pass_in_memory(cfg)
    out = measures["outliers"]
    dim_stats = out.tables(out.result(), ctx)["dim_stats"].to_pandas()
    params = source.info.tables["norm_params"].to_pandas()
    got = layernorm_attribution(source.info.tables["norm_affine"].to_pandas(), dim_stats, params).set_index("layer")
    X = torch.cat([p.states for p in parts], 1).double().numpy()
    mods = dict(source.loaded.model.named_modules())
    names = source.info.tables["norm_params"].to_pandas().set_index("layer")["module"]
    assert got.index.tolist() == list(plan.layers)
    for li, layer in enumerate(plan.layers):
        mod = mods[names[layer]]
        g, b = mod.weight.detach().double().numpy(), mod.bias.detach().double().numpy()
        x = X[li]
        z = (x - b) / g
        ez2, ez = (z * z).mean(0), z.mean(0)
        row = got.loc[layer]
        assert row.q_all == pytest.approx((x * x).sum(1).mean(), rel=1e-9)
        assert row.gamma_term == pytest.approx(g * g @ ez2, rel=1e-6)
        assert row.cross_term == pytest.approx(2 * (g * b) @ ez, rel=1e-5, abs=1e-6 * row.q_all)
        assert row.beta_sq == pytest.approx(b @ b, rel=1e-5)
        assert row.gamma_term + row.cross_term + row.beta_sq == pytest.approx(row.q_all, rel=1e-9)
        assert row.gamma_weighting == pytest.approx(g * g @ ez2 / (g @ g), rel=1e-6)
        assert row.z_energy == pytest.approx(1.0, abs=1e-4) and (z * z).sum(1).mean() / z.shape[1] == pytest.approx(
            1.0, abs=1e-4
        )
        top = np.argsort(ez2)[::-1][:5]
        assert row.top_z_share == pytest.approx(ez2[top].sum() / ez2.sum(), rel=1e-6)
        assert row.top_gamma_sq_ratio == pytest.approx((g[top] ** 2).mean() / (g**2).mean(), rel=1e-6)
