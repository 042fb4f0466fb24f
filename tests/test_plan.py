"""``normvar plan``: the memory of a run before any weight loads (issue 20).

Models of the published shapes are built from transformers config classes into a temp dir that holds
config.json and tokenizer files only (no weights): the parameter counts match the published ones, every measure the
run asks for is planned, and the device limits decide what a run keeps (a Llama-2-7B shape keeps the geometry of all
33 hidden states on 80 GB and names a subset that fits on 24 GB). Each measure's planned bytes are the bytes of its
real ``state_dict()`` after a real pass of a tiny model (``real_state.py``; exact, or an upper bound where its class
says so). Against real runs: ``benchmarks/bench_plan.py`` (the plan's total vs the measured peak RSS)."""

from __future__ import annotations

import json
import re

import pytest
from cli_helpers import run_cli
from real_state import assert_planned_is_held, real_pass

from normvar_core.config import RunConfig
from normvar_core.pipeline.measures import MEASURES

GiB = 2**30


def plan_json(capsys, *argv) -> dict:
    code, out, err = run_cli(capsys, "plan", "--json", *argv)
    assert code == 0, err
    return json.loads(out)


def test_published_shapes_params_and_measures(capsys, tmp_path, shapes, corpus40):
    gpu = ["--device", "cuda", "--dtype", "bfloat16"]
    common = ["--corpus", corpus40, "--data-dir", tmp_path / "data"]
    bert = plan_json(capsys, "--model", shapes["bert-base"], "--memory-gb", "80", *common)
    llama = plan_json(capsys, "--model", shapes["llama-2-7b"], "--memory-gb", "80", *gpu, *common)
    falcon = plan_json(capsys, "--model", shapes["falcon-40b"], "--memory-gb", "80", *gpu, *common)

    # parameters: bert-base 110M (BertModel, what normvar loads); Llama-2-7B 6.74B and Falcon-40B 41.8B as
    # published, i.e. with the vocab x d output matrix; the base LlamaModel is 6,607,343,616
    assert abs(bert["params"] / 110e6 - 1) < 0.01
    assert abs(llama["params"] / 6_607_343_616 - 1) < 0.01
    assert abs(llama["params_with_lm_head"] / 6.74e9 - 1) < 0.01
    assert abs(falcon["params_with_lm_head"] / 41.8e9 - 1) < 0.01
    for p, L, d in ((bert, 13, 768), (llama, 33, 4096), (falcon, 61, 8192)):
        assert (p["hidden_states"], p["dim"], len(p["layers"])) == (L, d, L)
        # every measure the run asks for (their bytes: the real state, test below)
        assert p["types"] > 100 and set(p["measures"]) == {c.name for c in MEASURES if c.asked(RunConfig())}
        assert all(b > 0 for b in p["measures"].values())
        assert p["total_bytes"] >= p["weights_bytes"] + sum(
            b for k, b in p["measures"].items() if k not in p["dropped"]
        )
    assert bert["weights_bytes"] - 4 * bert["params"] < 2**20  # float32 on the CPU (+ position-id buffers)
    assert 0 <= llama["weights_bytes"] - 2 * llama["params"] < 2**20  # bfloat16
    # Falcon-40B's weights alone (78 GB in bf16) leave no room on 80 GB: the plan says so and what would help
    assert falcon["weights_bytes"] > 75 * GiB and not falcon["fits"] and falcon["suggestions"]


def test_the_plan_is_the_state_of_a_real_pass(capsys, tmp_path, tiny_models, corpus40):
    """``normvar plan --json``'s bytes of each measure (and the memory plan ``compute`` follows) against the
    ``state_dict()`` of every measure after a real pass of a tiny BERT over the same corpus and options."""
    argv = ["--model", tiny_models["bert"], "--corpus", corpus40, "--id-sample", "200", "--memory-gb", "1000"]
    planned = plan_json(capsys, *argv, "--data-dir", tmp_path / "data")
    cfg = RunConfig(model=str(tiny_models["bert"]), corpus=str(corpus40), id_sample=200, memory_gb=1000)
    setup, measures = real_pass(cfg, tmp_path / "data")
    assert not planned["dropped"] and setup.ctx.memory.measures == planned["measures"]
    assert set(measures) == {c.name for c in MEASURES if c.asked(cfg)}  # every measure asked for is held
    assert_planned_is_held(planned["measures"], measures)


def test_device_limits_decide_the_geometry(capsys, tmp_path, shapes):
    # 2,000 of the shipped novels' sentences; the TwoNN sample is min(N, --id-sample) (seed 004, issue 33);
    # 32 sentences a batch (the GPU's default 65,536-token batches alone need 30 GB of hidden states at this shape)
    llama = [
        "--model",
        shapes["llama-2-7b"],
        "--device",
        "cuda",
        "--dtype",
        "bfloat16",
        "--max-sentences",
        "2000",
        "--data-dir",
        tmp_path / "data",
    ]
    code, out, _ = run_cli(capsys, "plan", *llama, "--memory-gb", "24")
    assert code == 0 and "does NOT fit" in out and re.search(r"fix: --batch-size \d+", out)
    llama += ["--batch-size", "32"]
    on80 = plan_json(capsys, *llama, "--memory-gb", "80")
    assert on80["fits"] and "geometry" not in on80["dropped"] and on80["layers"] == list(range(33))
    assert on80["total_bytes"] <= 80 * GiB and on80["embeddings"] > 40_000
    assert on80["id_sample"] == min(16384, on80["embeddings"]) == 16384

    on24 = plan_json(capsys, *llama, "--memory-gb", "24")
    assert "geometry" in on24["dropped"] and on24["fits"] and on24["total_bytes"] <= 24 * GiB
    reason = on24["reasons"]["geometry"]
    m = re.search(r"keep at most (\d+) layers \(e\.g\. --layers (\d+(?:,\d+)*)\)", reason)
    subset = m.group(2)
    assert int(m.group(1)) == len(subset.split(",")) < 33
    # the named subset really fits with its geometry, and one more layer would not
    sub = plan_json(capsys, *llama, "--memory-gb", "24", "--layers", subset)
    assert sub["fits"] and "geometry" not in sub["dropped"] and sub["total_bytes"] <= 24 * GiB
    k = len(subset.split(",")) + 1
    more = [int(round(i * 32 / (k - 1))) for i in range(k)]
    over = plan_json(capsys, *llama, "--memory-gb", "24", "--layers", ",".join(map(str, sorted(set(more)))))
    assert "geometry" in over["dropped"]
    # without the geometry's sample the neighbourhoods have nothing to search: dropped with it, and the line says so
    assert "neighbourhoods" in on24["dropped"] and "geometry" in on24["reasons"]["neighbourhoods"]


def test_a_dropped_measures_layers_keep_it_beside_all_the_run_keeps(capsys, tmp_path, shapes):
    """A measure dropped for its memory names a --layers subset: the same run on those layers keeps it, and keeps
    every measure the first plan kept (the subset is computed with the plan's other drops, not with more)."""
    llama = ["--model", shapes["llama-2-7b"], "--device", "cuda", "--dtype", "bfloat16", "--max-sentences", "2000"]
    llama += ["--batch-size", "32", "--memory-gb", "80", "--data-dir", tmp_path / "data"]
    first = plan_json(capsys, *llama)
    named = {
        name: m.group(1)
        for name, reason in first["reasons"].items()
        if (m := re.search(r"keep fewer layers \(e\.g\. --layers (\d+(?:,\d+)*)\)", reason))
    }
    assert named, first["reasons"]
    kept = {c.name for c in MEASURES} - set(first["dropped"])
    for name, subset in named.items():
        assert len(subset.split(",")) < len(first["layers"])
        again = plan_json(capsys, *llama, "--layers", subset)
        assert again["fits"] and name not in again["dropped"], (name, again["dropped"])
        assert not (kept & set(again["dropped"])), again["dropped"]


def test_plan_refuses_bad_input_in_one_line(capsys, tmp_path, corpus40):
    from cli_helpers import assert_bad

    data = tmp_path / "data"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_bad(capsys, data, "plan", "--model", empty, "--corpus", corpus40, match="config.json")
    from transformers import BertConfig

    notok = tmp_path / "notok"
    BertConfig().save_pretrained(notok)
    assert_bad(capsys, data, "plan", "--model", notok, "--corpus", corpus40, match="tokenizer")
    assert_bad(capsys, data, "plan", "--model", "minilm", "--corpus", corpus40, "--memory-gb", "0", match="--memory-gb")


@pytest.mark.slow
def test_new_run_page_shows_the_plan_before_submit(tmp_path, monkeypatch):
    """ "Check memory" on the New-run page: the plan's figure ("needs X GB of Y GB"), computed in a child
    process (the dashboard does not import torch), equal to the plan of the same options; nothing submitted."""
    from dashboard_run import APP
    from streamlit.testing.v1 import AppTest

    from normvar_core.config import RunConfig
    from normvar_core.pipeline.execute.dry_run import plan_run
    from normvar_core.pipeline.memory.plan import gb
    from normvar_core.service.jobs import JobStore

    data = tmp_path / "data"
    monkeypatch.setenv("NORMVAR_DATA", str(data))
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    at.switch_page("views/new_run.py").run()
    at.number_input(key="w_cfg_max_sentences").set_value(30)
    at.button(key="w_plan").click().run()
    assert not at.exception
    shown = [s.value for s in at.success]
    want = plan_run(RunConfig(model="minilm", max_sentences=30, memory_gb=1000), data)
    assert len(shown) == 1 and f"This run needs {gb(want.total_bytes)} of " in shown[0], shown
    assert f"{want.params:,} parameters" in shown[0]
    assert JobStore(data).list() == []
    # what the page imports to get the plan leaves torch and transformers out of the dashboard's process
    import subprocess
    import sys

    code = (
        "import sys, normvar_core.service.commands_plan as c, views._form; "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
